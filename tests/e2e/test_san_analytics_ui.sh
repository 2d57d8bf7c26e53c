#!/usr/bin/env bash
# timeout: 180
# The offset heat map of the web UI, in a real browser, over iSCSI and NBD: while
# qemu-io writes again and again to one place of a 64 MiB volume through iSCSI
# (offset 48 MiB: scsi.ops region 24 of 32) and to another through NBD (offset
# 40 MiB: nbd.ops offset label 40M, 1 MiB regions), headless Chromium (chromedriver's
# WebDriver API, tests/e2e/webdriver.py) opens the analytics page for scsi.ops of
# that volume: the offset heat map is shown, has its 32 rows, and names region 24
# the hottest; then nbd.ops: 40M the hottest. A statistic without an offset
# (fuse.ops) hides the map. Screenshots go to $ARTIFACTS.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

need_browser
command -v qemu-io >/dev/null || fail "qemu-io is not installed (qemu-utils)"
C=$CACHALOT

SERVE_ARGS="--nfs off --nbd 127.0.0.1:0"
export SERVE_ARGS

start_daemon
D=$(mktmp)
assert_ok "$C" pool create -s 512M tank "$D/d0" >/dev/null
assert_ok "$C" create -s -V 64M -o shareiscsi=on -o sharenbd=on tank/vol >/dev/null
ISCSI=iscsi://$(cat "$HOME_DIR/iscsi.addr")/iqn.2026-11.org.cachalot:tank.vol/0
NBD=nbd://$(cat "$HOME_DIR/nbd.addr")/tank/vol
assert_ok qemu-io -f raw -c 'write -P 0x5a 48M 256k' "$ISCSI" >/dev/null
assert_ok qemu-io -f raw -c 'write -P 0xa5 40M 256k' "$NBD" >/dev/null

note "workload: qemu-io writes at 48M through iSCSI and at 40M through NBD, until the test ends"
(
    while :; do
        qemu-io -f raw -c 'write -P 0x5a 48M 256k' -c 'write -P 0x5a 48M 256k' -c flush "$ISCSI" >/dev/null 2>&1
        qemu-io -f raw -c 'write -P 0xa5 40M 256k' -c 'write -P 0xa5 40M 256k' -c flush "$NBD" >/dev/null 2>&1
        sleep 0.2
    done
) &
background $!

browser_python <<'PY'
from webdriver import Browser  # tests/e2e/webdriver.py

def hottest(label):
    """JS: the canvas's data-hot list when LABEL leads it, else null."""
    return ("const h = document.getElementById('offset-heat').dataset.hot || ''; "
            f"return h.split(',')[0] == '{label}' ? h : null")

with Browser() as b:
    b.open("/#/analytics?stat=scsi.ops&by=op&filter=volume%3Dtank%2Fvol")
    b.wait("the offset heat map shown", "return !document.getElementById('offset-box').hidden")
    hot = b.wait("region 24 the hottest of scsi.ops", hottest("24"))
    print(f"scsi.ops regions with operations, hottest first: {hot}")
    nrows = b.js("return document.getElementById('offset-heat').dataset.rows")
    assert nrows == "32", f"the scsi.ops map has {nrows} rows, not one per 1/32 of the LUN"
    b.shot("san-offset-heat-scsi")
    b.open("/#/analytics?stat=nbd.ops&by=op&filter=volume%3Dtank%2Fvol")
    b.wait("the offset heat map shown for nbd.ops", "return !document.getElementById('offset-box').hidden")
    hot = b.wait("40M the hottest of nbd.ops", hottest("40M"))
    print(f"nbd.ops offsets with operations, hottest first: {hot}")
    b.shot("san-offset-heat-nbd")
    b.open("/#/analytics?stat=fuse.ops&by=op")
    b.wait("no offset heat map for fuse.ops", "return document.getElementById('offset-box').hidden")
    print("ok: offset heat maps of scsi.ops and nbd.ops in Chromium")
PY
stop_background
stop_daemon
assert_eq "$DAEMON_EXIT" 0 "clean exit"
note "ok"
