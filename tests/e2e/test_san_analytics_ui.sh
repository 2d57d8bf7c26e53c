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

command -v chromedriver >/dev/null || fail "chromedriver is not installed (Debian: chromium-driver)"
command -v chromium >/dev/null || fail "chromium is not installed"
command -v qemu-io >/dev/null || fail "qemu-io is not installed (qemu-utils)"
C=$CACHALOT

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
SERVE_ARGS="--nfs off --nbd 127.0.0.1:0"
export SERVE_ARGS

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
WORKLOAD_PID=$!

PORT=$(free_port)
chromedriver --port="$PORT" --allowed-ips=127.0.0.1 >"$ARTIFACTS/chromedriver.log" 2>&1 &
DRIVER_PID=$!
ADDR=$(cat "$HOME_DIR/http.addr")

python3 - "$PORT" "$ADDR" "$ARTIFACTS" "$(mktmp)" "$(dirname "${BASH_SOURCE[0]}")" <<'PY'
import sys

port, addr, artifacts, profile, here = sys.argv[1:6]
sys.path.insert(0, here)
from webdriver import Browser  # tests/e2e/webdriver.py

b = Browser(port, artifacts, profile)
call, js, wait, shot, S = b.call, b.js, b.wait, b.shot, b.session

def hottest(label):
    """JS: the canvas's data-hot list when LABEL leads it, else null."""
    return ("const h = document.getElementById('offset-heat').dataset.hot || ''; "
            f"return h.split(',')[0] == '{label}' ? h : null")

try:
    call("POST", S + "/url", {"url": f"http://{addr}/#/analytics?stat=scsi.ops&by=op&filter=volume%3Dtank%2Fvol"})
    wait("the offset heat map shown", "return !document.getElementById('offset-box').hidden")
    hot = wait("region 24 the hottest of scsi.ops", hottest("24"))
    print(f"scsi.ops regions with operations, hottest first: {hot}")
    nrows = js("return document.getElementById('offset-heat').dataset.rows")
    assert nrows == "32", f"the scsi.ops map has {nrows} rows, not one per 1/32 of the LUN"
    shot("san-offset-heat-scsi")
    call("POST", S + "/url", {"url": f"http://{addr}/#/analytics?stat=nbd.ops&by=op&filter=volume%3Dtank%2Fvol"})
    wait("the offset heat map shown for nbd.ops", "return !document.getElementById('offset-box').hidden")
    hot = wait("40M the hottest of nbd.ops", hottest("40M"))
    print(f"nbd.ops offsets with operations, hottest first: {hot}")
    shot("san-offset-heat-nbd")
    call("POST", S + "/url", {"url": f"http://{addr}/#/analytics?stat=fuse.ops&by=op"})
    wait("no offset heat map for fuse.ops", "return document.getElementById('offset-box').hidden")
    print("ok: offset heat maps of scsi.ops and nbd.ops in Chromium")
finally:
    call("DELETE", S)
PY
ls -l "$ARTIFACTS"/*.png >&2
kill "$WORKLOAD_PID" 2>/dev/null
wait "$WORKLOAD_PID" 2>/dev/null || true # it ends by our TERM (status 143)
WORKLOAD_PID=
stop_daemon
assert_eq "$DAEMON_EXIT" 0 "clean exit"
note "ok"
