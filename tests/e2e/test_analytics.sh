#!/usr/bin/env bash
# timeout: 240
# Analytics through the real daemon: fio writes at fixed rates to a table file
# and a redo log on a FUSE mount; the breakdowns must name the busy file and its
# op, the rates must match what fio did (within 10%), innodb.ops must classify
# the files, the HTTP API and /metrics must agree, bad queries must get one-line
# errors (HTTP 400 JSON), and the history must survive a daemon restart.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/e2e/fuse_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/fuse_lib.sh"

command -v fio >/dev/null || fail "fio is not installed"
C=$CACHALOT
fuse_pool 1G
M=$(mktmp)/db
fuse_mount tank/db "$M" recordsize=16K
mkdir -p "$M/shop"

# within PCT ACTUAL EXPECTED: |actual - expected| <= PCT% of expected.
within() {
    python3 -c 'import sys; p, a, e = map(float, sys.argv[1:]); sys.exit(0 if abs(a - e) <= p / 100 * e else 1)' "$@"
}

# Rates fio keeps on a loaded machine: 64 writes/s leave 15.6 ms each, 4.6x the
# mean latency measured under load 16 (2.0-3.4 ms). At 4 MiB/s (3.9 ms each) a
# machine 2x slower falls behind the rate the middle-of-the-run check expects.
note "workload: 1 MiB/s of 16K writes to shop/orders.ibd, 128 KiB/s of 4K writes to ib_logfile0, 12 s"
T0=$(date +%s)
fio --output-format=json --output="$ARTIFACTS/fio.json" --direct=1 --ioengine=psync \
    --time_based --runtime=12 --size=64M \
    --name=table --filename="$M/shop/orders.ibd" --rw=write --bs=16k --rate=1m \
    --name=redo --filename="$M/ib_logfile0" --rw=write --bs=4k --rate=128k ||
    fail "fio failed"
T1=$(( $(date +%s) + 1 ))
wait_until 30 "the analytics sampler stores second $((T1 - 1))" analytics_stored $((T1 - 1))
# FIO_START: the second the writes began (the report's time less the run's),
# which on a loaded machine was 5 s after T0 (fio's own start-up).
read -r TABLE_BYTES REDO_BYTES FIO_START < <(python3 -c '
import json, sys
report = json.load(open(sys.argv[1]))
jobs = {j["jobname"]: j for j in report["jobs"]}
start = (report["timestamp_ms"] - jobs["table"]["job_runtime"]) // 1000
print(jobs["table"]["write"]["io_bytes"], jobs["redo"]["write"]["io_bytes"], start)' "$ARTIFACTS/fio.json")
note "fio wrote $TABLE_BYTES bytes to the table file, $REDO_BYTES to the redo log, from $((FIO_START - T0)) s after T0"

note "breakdown by file names the busy file first, and its op"
out=$(assert_ok "$C" analytics show fuse.bytes --by file --filter dataset=tank/db --from "$T0" --to "$T1" -H -p)
echo "$out" >&2
first=$(head -n1 <<<"$out" | cut -f1)
assert_eq "$first" "/shop/orders.ibd" "busiest file"
secs=$((T1 - T0))
got=$(awk -F'\t' -v s="$secs" '$1 == "/shop/orders.ibd" { printf "%.0f", $3 * s }' <<<"$out")
within 10 "$got" "$TABLE_BYTES" || fail "bytes of orders.ibd: analytics $got, fio $TABLE_BYTES"
got=$(awk -F'\t' -v s="$secs" '$1 == "/ib_logfile0" { printf "%.0f", $3 * s }' <<<"$out")
within 10 "$got" "$REDO_BYTES" || fail "bytes of ib_logfile0: analytics $got, fio $REDO_BYTES"
out=$(assert_ok "$C" analytics show fuse.ops --by op --filter file=/shop/orders.ibd --from "$T0" --to "$T1" -H)
assert_eq "$(head -n1 <<<"$out" | cut -f1)" "write" "top op on the busy file"

note "rates in the middle of the run match fio's rate limits (within 10%)"
# Seconds 3 to 9 of the writes (not of T0: fio may start late).
out=$(assert_ok "$C" analytics show fuse.ops --by file --filter op=write --from $((FIO_START + 3)) --to $((FIO_START + 9)) -H -p)
echo "$out" >&2
rate=$(awk -F'\t' '$1 == "/shop/orders.ibd" { print $3 }' <<<"$out")
within 10 "$rate" 1048576 || fail "write rate of orders.ibd: $rate B/s, fio ran at 1 MiB/s"
ops=$(awk -F'\t' '$1 == "/shop/orders.ibd" { print $2 }' <<<"$out")
within 10 "$ops" 64 || fail "write ops of orders.ibd: $ops/s, fio did 64/s"
rate=$(awk -F'\t' '$1 == "/ib_logfile0" { print $3 }' <<<"$out")
within 10 "$rate" 131072 || fail "write rate of ib_logfile0: $rate B/s, fio ran at 128 KiB/s"

note "innodb.ops classifies files by kind and table"
out=$(assert_ok "$C" analytics show innodb.ops --by kind --from "$T0" --to "$T1" -H)
echo "$out" >&2
assert_eq "$(cut -f1 <<<"$out" | sort | tr '\n' ' ')" "redo table " "kinds"
out=$(assert_ok "$C" analytics show innodb.ops --by table --filter kind=table --from "$T0" --to "$T1" -H)
assert_eq "$(head -n1 <<<"$out" | cut -f1)" "shop.orders" "table of orders.ibd"

note "heat maps: write latency and size"
out=$(assert_ok "$C" analytics heatmap fuse.ops --by size --filter op=write --from "$T0" --to "$T1" --json)
python3 -c '
import json, sys
h = json.loads(sys.argv[1])
sizes = {b[0]: sum(row[i] for row in h["counts"]) for i, b in enumerate(h["buckets"])}
assert sizes.get(16384, 0) > 0 and sizes.get(4096, 0) > 0, sizes
assert h["resolution"] == "second" and len(h["times"]) == len(h["counts"])' "$out" ||
    fail "size heat map: $out"
assert_ok "$C" analytics heatmap fuse.ops --by latency --last 60s >&2
out=$(assert_ok "$C" analytics show disk.bytes --by op --from "$T0" --to "$T1" -H)
assert_contains "$out" "write" "disk.bytes sees the pool writes"
out=$(assert_ok "$C" analytics show txg.commits --by pool --from "$T0" --to "$T1" -H)
assert_contains "$out" "tank" "txg.commits per pool"
out=$(assert_ok "$C" analytics list -H)
for s in fuse.ops fuse.bytes nfs.ops arc.accesses disk.ops disk.bytes txg.commits zil.commits innodb.ops; do
    grep -q "^$s	" <<<"$out" || fail "analytics list lacks $s"
done

note "bad queries: one-line errors"
assert_fails "$C" analytics show nosuch.stat
assert_contains "$LAST_STDERR" "unknown statistic"
assert_fails "$C" analytics show fuse.ops --by colour
assert_contains "$LAST_STDERR" "no dimension 'colour'"
assert_fails "$C" analytics show fuse.ops --filter colour=red
assert_fails "$C" analytics show fuse.ops --filter op
assert_fails "$C" analytics show fuse.ops --last 0s
assert_fails "$C" analytics show fuse.ops --last 400d
assert_contains "$LAST_STDERR" "longer than"
assert_fails "$C" analytics show fuse.ops --from "$T1" --to "$T0"
assert_fails "$C" analytics show fuse.ops --from 4000000000
assert_fails "$C" analytics show fuse.ops --last soon
assert_fails "$C" analytics heatmap fuse.ops --by op
assert_fails "$C" analytics heatmap arc.accesses --by latency

note "HTTP: same answers as JSON, errors are 400 JSON, /metrics, OpenAPI"
dd if=/dev/zero of="$M/sync.dat" bs=4k count=10 oflag=dsync status=none # intent log commits
ADDR=$(cat "$HOME_DIR/http.addr")
python3 - "$ADDR" "$T0" "$T1" "$REPO/docs/grafana/cachalot.json" <<'PY'
import json, re, sys, urllib.request, urllib.error
addr, t0, t1, grafana = sys.argv[1:5]
def get(path):
    try:
        with urllib.request.urlopen(f"http://{addr}{path}", timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
st, body = get(f"/api/analytics/show?stat=fuse.ops&by=file&filter=dataset%3Dtank%2Fdb&filter=op%3Dwrite&from={t0}&to={t1}&top=1")
assert st == 200, (st, body)
b = json.loads(body)
assert [r["value"] for r in b["rows"]] == ["/shop/orders.ibd"], b
st, body = get(f"/api/analytics/series?stat=fuse.bytes&by=file&from={t0}&to={t1}")
s = json.loads(body)
assert st == 200 and s["lines"][0]["value"] == "/shop/orders.ibd" and len(s["times"]) == int(t1) - int(t0), s
for bad in ["stat=nope", "stat=fuse.ops&by=colour", "stat=fuse.ops&last=99999d", "stat=fuse.ops&colour=1",
            "stat=fuse.ops&from=20&to=10", "stat=fuse.ops&top=0"]:
    st, body = get("/api/analytics/show?" + bad)
    assert st == 400, (bad, st, body)
    err = json.loads(body)["error"]
    assert err and "\n" not in err, (bad, err)
st, body = get("/metrics")
text = body.decode()
assert st == 200 and 'cachalot_fuse_ops_total{op="write",dataset="tank/db"}' in text, text[:2000]
assert "cachalot_disk_bytes_total" in text and "cachalot_fuse_ops_latency_seconds_bucket" in text
assert "file=" not in text
# Every metric the example Grafana dashboard queries is exported.
dash = json.load(open(grafana))
exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
for name in set(re.findall(r"cachalot_[a-z_]+", " ".join(exprs))):
    assert re.search(rf"^{name}[{{ ]", text, re.M), f"grafana queries {name}, /metrics lacks it"
st, body = get("/api/analytics/openapi.json")
assert st == 200 and "/api/analytics/show" in json.loads(body)["paths"]
st, body = get("/")
assert st == 200 and b"/ui/app.js" in body and b"tank" in body
st, body = get("/ui/app.js")
assert st == 200 and b"drawSeries" in body
PY

note "history survives a daemon restart"
before=$(assert_ok "$C" analytics show fuse.bytes --by file --from "$T0" --to "$T1" -H -p)
stop_daemon
start_daemon
after=$(assert_ok "$C" analytics show fuse.bytes --by file --from "$T0" --to "$T1" -H -p)
assert_eq "$after" "$before" "per-second history after restart"
before_min=$(assert_ok "$C" analytics show fuse.bytes --by file --last 1d -H -p | head -n1 | cut -f1)
assert_eq "$before_min" "/shop/orders.ibd" "per-minute history after restart"
usage=$(python3 -c 'import json,sys,urllib.request; print(json.load(urllib.request.urlopen(sys.argv[1]))["disk_bytes"])' \
    "http://$(cat "$HOME_DIR/http.addr")/api/analytics/usage")
((usage > 0)) || fail "no analytics data on disk"
ls -l "$HOME_DIR/analytics" >&2
note "ok"
