#!/usr/bin/env bash
# timeout: 240
# `cachalot bench mysql`: a tiny thread sweep with real MariaDB and sysbench
# against a directory on the host and a loop-device ext4 baseline; report.md,
# results.json and SVG+PNG plots hold positive figures for both targets, the main
# table goes to stdout, and no server, loop device or mount is left behind.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/e2e/bench_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench_lib.sh"

bench_setup
OUT=$ARTIFACTS/mysql
rm -rf "$OUT"

note "thread sweep: host directory and ext4 baseline"
stdout=$(assert_ok "$CACHALOT" bench mysql --target host="$TARGET" \
    --baseline ext4:1G --baseline-dir "$IMGDIR" \
    --threads 1,2 --time 5 --warmup 2 --tables 2 --table-size 1000 \
    --buffer-pool 64M --log-file-size 48M --out "$OUT")
echo "$stdout"
assert_contains "$stdout" "| target | 1 thr | 2 thr |" "main table on stdout"
assert_contains "$stdout" "| host |" "host row on stdout"
assert_contains "$stdout" "| ext4 |" "ext4 row on stdout"
assert_contains "$stdout" "$OUT/report.md" "report path on stdout"
assert_bench_outputs "$OUT"
for p in tps_by_threads qps_by_threads p95_by_threads; do
    [[ -s $OUT/$p.svg && -s $OUT/$p.png ]] || fail "plot $p missing"
done
report=$(cat "$OUT/report.md")
assert_contains "$report" "| threads | QPS | TPS | lat min | lat avg | lat p95 | lat max | load |" "published layout"
assert_contains "$report" "ext4 on /dev/loop" "baseline described"
[[ -s $OUT/logs/mariadb-host.err && -s $OUT/logs/sysbench-ext4.log ]] || fail "server and sysbench logs missing"
python3 - "$OUT/results.json" <<'PY' || fail "settings not recorded"
import json, sys
r = json.load(open(sys.argv[1]))
s = r["settings"]
assert s["threads"] == [1, 2] and s["time_s"] == 5 and s["warmup_s"] == 2, s
assert s["workload"]["tables"] == 2 and s["workload"]["table_size"] == 1000
assert s["server"]["innodb_buffer_pool_size"] == 64 << 20
b = [t for t in r["targets"] if t["name"] == "ext4"][0]
assert b["baseline"]["fs"] == "ext4" and b["baseline"]["loop_direct_io"] is True, b
assert b["fs_type"] == "ext4"
for srv in r["servers"]:
    assert srv["effective"]["innodb_buffer_pool_size"] == str(64 << 20), srv
    assert srv["effective"]["innodb_flush_method"] == "O_DIRECT", srv
PY
assert_bench_clean
note "ok"
