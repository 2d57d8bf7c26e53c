#!/usr/bin/env bash
# timeout: 240
# A resilver's progress, rate and time left where an operator looks: `pool
# status` (its scan line), /metrics (pool health and scan gauges) and the web
# UI's pools table (which follows it without a reload); the three agree with
# each other, and all say it ended once it has. The resilver is paced with
# CACHALOT_SCAN_RATE (2 MiB/s) so it lasts about 36 s: the browser, started
# 4 s in, saw it move about 9 s in on a loaded machine, a quarter of the way (at
# 4 MiB/s, 18 s, a machine 2x slower would have seen it end first).
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

TMP=$(mktmp)
C=$CACHALOT
LEN=$((16 * 1024 * 1024))
export CACHALOT_SCAN_RATE=$((2 * 1024 * 1024))
start_daemon
addr=$(cat "$HOME_DIR/http.addr")
metrics() { curl -sf "http://$addr/metrics"; }
# gauge NAME: the value of rz's series of the gauge NAME (empty if none).
gauge() { awk -v n="$1" 'index($1, n "{pool=\"rz\"") == 1 { print $2 }' <<<"$m"; }

D=("$TMP/d0" "$TMP/d1" "$TMP/d2")
assert_ok "$C" pool create -s 128M rz raidz1 "${D[@]}"
assert_ok "$C" create -o compression=off rz/d
for seed in 51 52 53; do
    o=$(assert_ok "$C" debug create rz/d)
    assert_ok "$C" debug write rz/d "$o" --seed "$seed" --len "$LEN"
done
assert_ok "$C" debug fsync rz/d
assert_ok "$C" debug call pool.sync '{"name":"rz"}'
m=$(metrics)
assert_eq "$(awk '$1 == "cachalot_pool_health{pool=\"rz\",state=\"ONLINE\"}" { print $2 }' <<<"$m")" 1 "ONLINE gauge"
assert_eq "$(gauge cachalot_pool_scan_in_progress)" 0 "no scan yet"

note "d1 deleted, replaced: the resilver runs at about 2 MiB/s"
assert_ok "$C" pool export rz
rm "${D[1]}"
assert_ok "$C" pool import -d "$TMP" rz
assert_ok "$C" pool replace -s 128M rz "${D[1]}" "$TMP/n1"
sleep 3

note "pool status: progress, rate and time left"
st=$(assert_ok "$C" pool status rz)
echo "$st"
line=$(grep "resilver in progress" <<<"$st") || fail "no resilver in progress: $st"
rate=$(sed -n 's/.*% done, \([0-9.]*[KM]\)\/s, .*/\1/p' <<<"$line")
eta=$(sed -n 's/.*\/s, \([0-9:]*\) to go.*/\1/p' <<<"$line")
[[ -n $rate && -n $eta ]] || fail "no rate or time left in: $line"
[[ $eta != 00:00:00 ]] || fail "the time left is 0 with the resilver far from done: $line"

note "/metrics: DEGRADED, the scan gauges consistent with one another"
m=$(metrics)
grep '^cachalot_pool_' <<<"$m" >&2
assert_eq "$(awk '$1 == "cachalot_pool_health{pool=\"rz\",state=\"DEGRADED\"}" { print $2 }' <<<"$m")" 1 "DEGRADED gauge"
assert_eq "$(gauge cachalot_pool_scan_in_progress)" 1 "scan in progress"
ex=$(gauge cachalot_pool_scan_examined_bytes)
tot=$(gauge cachalot_pool_scan_total_bytes)
r=$(gauge cachalot_pool_scan_rate_bytes_per_second)
left=$(gauge cachalot_pool_scan_eta_seconds)
[[ -n $ex && -n $tot && -n $r && -n $left ]] || fail "scan gauges missing"
# Paced at 2 MiB/s: the rate is of that order (batches of 8 MiB, 12 with parity,
# counted when delivered, make it lumpy: about 4 MiB/s 3 s in).
((r > 1024 * 1024 && r < 24 * 1024 * 1024)) || fail "rate $r B/s, paced at 2 MiB/s"
((ex < tot && left > 0)) || fail "examined $ex of $tot, $left s left"
# The time left is what is left at that rate (the status may be a second apart).
exp=$(((tot - ex) / r))
((left >= exp - 2 && left <= exp + 2)) || fail "$left s left, but $((tot - ex)) B at $r B/s is $exp s"

note "web UI: the pools table shows the resilver and follows it"
browser_python <<'PY'
from webdriver import Browser

with Browser() as b:
    b.open("/#/manage")
    table = "return document.getElementById('m-pools').innerText"
    b.wait("the resilver in the pools table", table + ".includes('resilver in progress')")
    first = b.js(table)
    assert "/s, " in first and " to go" in first, first
    b.shot("resilver-progress")
    # The table is read again while the scan runs, without a reload.
    b.wait("the progress moving on", f"return document.getElementById('m-pools').innerText != {first!r}"
           " && document.getElementById('m-pools').innerText.includes('resilver in progress')")
    b.wait("the end of the resilver", table + ".includes('rz') && !" + table[7:] + ".includes('in progress')",
           timeout=90)
PY

note "ended: status, /metrics and the UI (above) agree"
st=$(assert_ok "$C" pool status rz)
echo "$st"
assert_contains "$st" "resilvered"
m=$(metrics)
assert_eq "$(gauge cachalot_pool_scan_in_progress)" 0 "scan over"
assert_eq "$(gauge cachalot_pool_scan_rate_bytes_per_second)" "" "no rate after the end"
assert_eq "$(awk '$1 == "cachalot_pool_health{pool=\"rz\",state=\"ONLINE\"}" { print $2 }' <<<"$m")" 1 "ONLINE again"
assert_ok "$C" pool destroy rz
stop_daemon
