#!/usr/bin/env bash
# timeout: 180
# NFS analytics in the web UI, in a real browser: while libnfs's nfs-cp writes
# busy.dat to a share of the daemon (and reads other.dat back) over NFSv3,
# headless Chromium (chromedriver's WebDriver API from Python's standard library)
# loads the analytics page for nfs.ops by file in that share and sees busy.dat,
# drills down into it by clicking its row (by client: 127.0.0.1), switches to
# nfs.bytes by op, and sees the NFS panels of the dataset page and the overview
# name the client, the file and the share. Screenshots go to $ARTIFACTS.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

need_browser
command -v nfs-cp >/dev/null || fail "nfs-cp is not installed (libnfs-utils)"
C=$CACHALOT

NFS_PORT=$(free_port)
SERVE_ARGS="--nfs 127.0.0.1:$NFS_PORT --portmap off"
export SERVE_ARGS
url() { echo "nfs://127.0.0.1/$1?version=3&nfsport=$NFS_PORT&mountport=$NFS_PORT"; }

start_daemon
D=$(mktmp)
assert_ok "$C" pool create -s 512M tank "$D/d0" >/dev/null
assert_ok "$C" create -o "sharenfs=rw=127.0.0.1,no_root_squash" tank/web

W=$(mktmp)
head -c $((1 << 20)) /dev/urandom >"$W/busy.dat"
head -c $((256 << 10)) /dev/urandom >"$W/other.dat"
assert_ok nfs-cp "$W/other.dat" "$(url tank/web/other.dat)" >/dev/null
note "workload: nfs-cp writes busy.dat and reads other.dat, until the test ends"
(
    while :; do
        nfs-cp "$W/busy.dat" "$(url tank/web/busy.dat)" >/dev/null 2>&1
        nfs-cp "$(url tank/web/other.dat)" "$W/back.dat" >/dev/null 2>&1
        rm -f "$W/back.dat"
        sleep 0.2
    done
) &
background $!

browser_python <<'PY'
import time

from webdriver import Browser  # tests/e2e/webdriver.py

def rows():
    return b.js("return [...document.querySelectorAll('#rows tr')].map(r => r.dataset.value)")

with Browser() as b:
    b.open("/#/analytics?stat=nfs.ops&by=file&filter=share%3Dtank%2Fweb")
    assert b.js("return document.getElementById('stat').value") == "nfs.ops"
    b.wait("busy.dat in the breakdown", "return document.querySelector('#rows tr[data-value=\"/busy.dat\"]') !== null")
    b.wait("other.dat in the breakdown", "return document.querySelector('#rows tr[data-value=\"/other.dat\"]') !== null")
    rate = float(b.wait("a non-zero total rate", "const r = document.getElementById('total').dataset.rate; return r && parseFloat(r) > 0 ? r : null"))
    print(f"nfs.ops by file: {rows()}, total {rate:.1f} ops/s")
    b.shot("nfs-analytics-by-file")
    # Drill down: click busy.dat; the page filters on it and breaks down by the next dimension.
    b.click("#rows tr[data-value=\"/busy.dat\"]")
    b.wait("the file filter chip", "return [...document.querySelectorAll('#filters .chip')].some(c => c.textContent === 'file=/busy.dat')")
    by = b.js("return document.getElementById('by').value")
    assert by == "client", f"the drill-down broke down by {by!r}, not client"
    b.wait("the client row", "return document.querySelector('#rows tr[data-value=\"127.0.0.1\"]') !== null")
    b.shot("nfs-analytics-drilldown")
    # Bytes by op for the whole share: busy.dat is written, other.dat read.
    b.open("/#/analytics?stat=nfs.bytes&by=op&filter=share%3Dtank%2Fweb")
    b.wait("write and read rows", "const v = [...document.querySelectorAll('#rows tr')].map(r => r.dataset.value); return v.includes('write') && v.includes('read')")
    print(f"nfs.bytes by op: {rows()}")
    # The dataset page: the NFS panels name the client and the file.
    b.open("/#/dataset/tank%2Fweb")
    b.wait("the NFS panels", "return [...document.querySelectorAll('#detail-panels .panel h3')].filter(h => h.textContent.startsWith('NFS')).length == 2")
    b.wait("an NFS panel naming the client", "return document.getElementById('detail-panels').innerText.includes('127.0.0.1')")
    b.wait("an NFS panel naming busy.dat", "return document.getElementById('detail-panels').innerText.includes('/busy.dat')")
    b.shot("nfs-dataset-page")
    b.open("/")
    b.wait("the overview's NFS panel naming the share", "return [...document.querySelectorAll('#ov-panels .panel')].some(p => p.querySelector('h3').textContent == 'NFS ops by share' && p.innerText.includes('tank/web'))")
    b.shot("nfs-overview")
    print("ok: NFS analytics by file, client, op and share in Chromium")
PY
stop_daemon
assert_eq "$DAEMON_EXIT" 0 "clean exit"
note "ok"
