#!/usr/bin/env bash
# timeout: 180
# The web UI in a real browser: headless Chromium (driven through chromedriver's
# WebDriver HTTP API from Python's standard library) loads the analytics page
# while a workload writes to a FUSE mount, sees the live chart and the busy file
# in the breakdown, drills down by clicking its row, opens a dataset page, and
# saves screenshots into $ARTIFACTS.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/e2e/fuse_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/fuse_lib.sh"

command -v chromedriver >/dev/null || fail "chromedriver is not installed (Debian: chromium-driver)"
command -v chromium >/dev/null || fail "chromium is not installed"
fuse_pool 512M
M=$(mktmp)/web
fuse_mount tank/web "$M"

WORKLOAD_PID=
DRIVER_PID=
_ui_cleanup() {
    local rc=$?
    set +e
    [[ -n $WORKLOAD_PID ]] && kill "$WORKLOAD_PID" 2>/dev/null && wait "$WORKLOAD_PID" 2>/dev/null
    [[ -n $DRIVER_PID ]] && kill "$DRIVER_PID" 2>/dev/null && wait "$DRIVER_PID" 2>/dev/null
    (exit "$rc")
    _fuse_cleanup
}
trap _ui_cleanup EXIT

note "workload: 64K writes to busy.dat, a few reads of other.dat, until the test ends"
head -c 1M /dev/urandom >"$M/other.dat"
(
    while :; do
        dd if=/dev/zero of="$M/busy.dat" bs=64k count=32 conv=notrunc oflag=direct status=none
        dd if="$M/other.dat" of=/dev/null bs=4k count=4 iflag=direct status=none
        sleep 0.1
    done
) &
WORKLOAD_PID=$!

PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
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

try:
    call("POST", S + "/url", {"url": f"http://{addr}/#/analytics?stat=fuse.ops&by=file&filter=dataset%3Dtank%2Fweb"})
    wait("the busy file in the breakdown", "return document.querySelector('#rows tr[data-value=\"/busy.dat\"]') !== null")
    # Live: the chart's series and the status line keep changing second by second.
    s1 = wait("a status line", "const t = document.getElementById('status').textContent; return t.includes('live') ? t : null")
    rate = float(wait("a non-zero total rate", "const r = document.getElementById('total').dataset.rate; return r && parseFloat(r) > 0 ? r : null"))
    time.sleep(2.2)
    s2 = js("return document.getElementById('status').textContent")
    assert s1 != s2, f"the page did not update: {s1!r}"
    print(f"live: total {rate:.1f} ops/s; status {s1!r} -> {s2!r}")
    shot("analytics-live")
    # Drill down: click the busy file's row; the page filters on it and breaks down by op.
    row = call("POST", S + "/element", {"using": "css selector", "value": "#rows tr[data-value=\"/busy.dat\"]"})
    eid = list(row.values())[0]
    call("POST", S + f"/element/{eid}/click", {})
    wait("the file filter chip", "return [...document.querySelectorAll('#filters .chip')].some(c => c.textContent === 'file=/busy.dat')")
    assert js("return document.getElementById('by').value") == "op"
    wait("the write row of busy.dat", "return document.querySelector('#rows tr[data-value=\"write\"]') !== null")
    ops = js("return [...document.querySelectorAll('#rows tr')].map(r => r.dataset.value)")
    assert "read" not in ops, f"busy.dat is only written, yet the drill-down shows {ops}"
    wait("the heat map", "return !document.getElementById('heat-box').hidden")
    shot("analytics-drilldown")
    # The dataset page: panels with live data.
    call("POST", S + "/url", {"url": f"http://{addr}/#/dataset/tank%2Fweb"})
    wait("dataset panels", "return document.querySelectorAll('#detail-panels .panel').length >= 4")
    wait("a panel naming busy.dat", "return document.getElementById('detail-panels').innerText.includes('/busy.dat')")
    shot("dataset-page")
    call("POST", S + "/url", {"url": f"http://{addr}/"})
    wait("the overview tables", "return document.getElementById('ov').innerText.includes('tank/web')")
    shot("overview")
    print("ok: live data, drill-down and pages in Chromium")
finally:
    call("DELETE", S)
PY
ls -l "$ARTIFACTS"/*.png >&2
note "ok"
