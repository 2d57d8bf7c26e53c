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

need_browser
fuse_pool 512M
M=$(mktmp)/web
fuse_mount tank/web "$M"

note "workload: 64K writes to busy.dat, a few reads of other.dat, until the test ends"
head -c 1M /dev/urandom >"$M/other.dat"
(
    while :; do
        dd if=/dev/zero of="$M/busy.dat" bs=64k count=32 conv=notrunc oflag=direct status=none
        dd if="$M/other.dat" of=/dev/null bs=4k count=4 iflag=direct status=none
        sleep 0.1
    done
) &
background $!

browser_python <<'PY'
import json

from webdriver import Browser  # tests/e2e/webdriver.py

with Browser() as b:
    b.open("/#/analytics?stat=fuse.ops&by=file&filter=dataset%3Dtank%2Fweb")
    b.wait("the busy file in the breakdown", "return document.querySelector('#rows tr[data-value=\"/busy.dat\"]') !== null")
    # Live: the chart's series and the status line keep changing second by second.
    s1 = b.wait("a status line", "const t = document.getElementById('status').textContent; return t.includes('live') ? t : null")
    rate = float(b.wait("a non-zero total rate", "const r = document.getElementById('total').dataset.rate; return r && parseFloat(r) > 0 ? r : null"))
    # Wait for the change (a fixed 2.2 s sleep raced with a page slowed by load).
    s2 = b.wait("the page's live update of the status line",
                f"const t = document.getElementById('status').textContent; return t !== {json.dumps(s1)} ? t : null")
    print(f"live: total {rate:.1f} ops/s; status {s1!r} -> {s2!r}")
    b.shot("analytics-live")
    # Drill down: click the busy file's row; the page filters on it and breaks down by op.
    b.click("#rows tr[data-value=\"/busy.dat\"]")
    b.wait("the file filter chip", "return [...document.querySelectorAll('#filters .chip')].some(c => c.textContent === 'file=/busy.dat')")
    assert b.js("return document.getElementById('by').value") == "op"
    b.wait("the write row of busy.dat", "return document.querySelector('#rows tr[data-value=\"write\"]') !== null")
    ops = b.js("return [...document.querySelectorAll('#rows tr')].map(r => r.dataset.value)")
    assert "read" not in ops, f"busy.dat is only written, yet the drill-down shows {ops}"
    b.wait("the heat map", "return !document.getElementById('heat-box').hidden")
    b.shot("analytics-drilldown")
    # The dataset page: panels with live data.
    b.open("/#/dataset/tank%2Fweb")
    b.wait("dataset panels", "return document.querySelectorAll('#detail-panels .panel').length >= 4")
    b.wait("a panel naming busy.dat", "return document.getElementById('detail-panels').innerText.includes('/busy.dat')")
    b.shot("dataset-page")
    b.open("/")
    b.wait("the overview tables", "return document.getElementById('ov').innerText.includes('tank/web')")
    b.shot("overview")
    print("ok: live data, drill-down and pages in Chromium")
PY
note "ok"
