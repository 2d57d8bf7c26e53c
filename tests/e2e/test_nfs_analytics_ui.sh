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

command -v chromedriver >/dev/null || fail "chromedriver is not installed (Debian: chromium-driver)"
command -v chromium >/dev/null || fail "chromium is not installed"
command -v nfs-cp >/dev/null || fail "nfs-cp is not installed (libnfs-utils)"
C=$CACHALOT

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
NFS_PORT=$(free_port)
SERVE_ARGS="--nfs 127.0.0.1:$NFS_PORT --portmap off"
export SERVE_ARGS
url() { echo "nfs://127.0.0.1/$1?version=3&nfsport=$NFS_PORT&mountport=$NFS_PORT"; }

WORKLOAD_PID=
DRIVER_PID=
_ui_cleanup() {
    local rc=$?
    set +e
    [[ -n $WORKLOAD_PID ]] && kill "$WORKLOAD_PID" 2>/dev/null && wait "$WORKLOAD_PID" 2>/dev/null
    [[ -n $DRIVER_PID ]] && kill "$DRIVER_PID" 2>/dev/null && wait "$DRIVER_PID" 2>/dev/null
    (exit "$rc")
    _e2e_cleanup
}
trap _ui_cleanup EXIT

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
WORKLOAD_PID=$!

PORT=$(free_port)
chromedriver --port="$PORT" --allowed-ips=127.0.0.1 >"$ARTIFACTS/chromedriver.log" 2>&1 &
DRIVER_PID=$!
ADDR=$(cat "$HOME_DIR/http.addr")

python3 - "$PORT" "$ADDR" "$ARTIFACTS" "$(mktmp)" "$(dirname "${BASH_SOURCE[0]}")" <<'PY'
import sys, time

port, addr, artifacts, profile, here = sys.argv[1:6]
sys.path.insert(0, here)
from webdriver import Browser  # tests/e2e/webdriver.py

b = Browser(port, artifacts, profile)
call, js, wait, shot, S = b.call, b.js, b.wait, b.shot, b.session

def rows():
    return js("return [...document.querySelectorAll('#rows tr')].map(r => r.dataset.value)")

try:
    call("POST", S + "/url", {"url": f"http://{addr}/#/analytics?stat=nfs.ops&by=file&filter=share%3Dtank%2Fweb"})
    assert js("return document.getElementById('stat').value") == "nfs.ops"
    wait("busy.dat in the breakdown", "return document.querySelector('#rows tr[data-value=\"/busy.dat\"]') !== null")
    wait("other.dat in the breakdown", "return document.querySelector('#rows tr[data-value=\"/other.dat\"]') !== null")
    rate = float(wait("a non-zero total rate", "const r = document.getElementById('total').dataset.rate; return r && parseFloat(r) > 0 ? r : null"))
    print(f"nfs.ops by file: {rows()}, total {rate:.1f} ops/s")
    shot("nfs-analytics-by-file")
    # Drill down: click busy.dat; the page filters on it and breaks down by the next dimension.
    row = call("POST", S + "/element", {"using": "css selector", "value": "#rows tr[data-value=\"/busy.dat\"]"})
    call("POST", S + f"/element/{list(row.values())[0]}/click", {})
    wait("the file filter chip", "return [...document.querySelectorAll('#filters .chip')].some(c => c.textContent === 'file=/busy.dat')")
    by = js("return document.getElementById('by').value")
    assert by == "client", f"the drill-down broke down by {by!r}, not client"
    wait("the client row", "return document.querySelector('#rows tr[data-value=\"127.0.0.1\"]') !== null")
    shot("nfs-analytics-drilldown")
    # Bytes by op for the whole share: busy.dat is written, other.dat read.
    call("POST", S + "/url", {"url": f"http://{addr}/#/analytics?stat=nfs.bytes&by=op&filter=share%3Dtank%2Fweb"})
    wait("write and read rows", "const v = [...document.querySelectorAll('#rows tr')].map(r => r.dataset.value); return v.includes('write') && v.includes('read')")
    print(f"nfs.bytes by op: {rows()}")
    # The dataset page: the NFS panels name the client and the file.
    call("POST", S + "/url", {"url": f"http://{addr}/#/dataset/tank%2Fweb"})
    wait("the NFS panels", "return [...document.querySelectorAll('#detail-panels .panel h3')].filter(h => h.textContent.startsWith('NFS')).length == 2")
    wait("an NFS panel naming the client", "return document.getElementById('detail-panels').innerText.includes('127.0.0.1')")
    wait("an NFS panel naming busy.dat", "return document.getElementById('detail-panels').innerText.includes('/busy.dat')")
    shot("nfs-dataset-page")
    call("POST", S + "/url", {"url": f"http://{addr}/"})
    wait("the overview's NFS panel naming the share", "return [...document.querySelectorAll('#ov-panels .panel')].some(p => p.querySelector('h3').textContent == 'NFS ops by share' && p.innerText.includes('tank/web'))")
    shot("nfs-overview")
    print("ok: NFS analytics by file, client, op and share in Chromium")
finally:
    call("DELETE", S)
PY
ls -l "$ARTIFACTS"/*.png >&2
stop_daemon
assert_eq "$DAEMON_EXIT" 0 "clean exit"
note "ok"
