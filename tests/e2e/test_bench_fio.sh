#!/usr/bin/env bash
# timeout: 180
# `cachalot bench fio`: every job (16K random read/write, 4K write+fdatasync,
# 1M sequential read/write) on a host directory and a loop-device ext4 baseline;
# outputs hold positive figures for both targets, and nothing is left behind.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/e2e/bench_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench_lib.sh"

bench_setup
OUT=$ARTIFACTS/fio
rm -rf "$OUT"

note "fio jobs: host directory and ext4 baseline"
stdout=$(assert_ok "$CACHALOT" bench fio --target host="$TARGET" \
    --baseline ext4:1G --baseline-dir "$IMGDIR" \
    --size 64M --runtime 2 --ramp 1 --out "$OUT")
echo "$stdout"
assert_contains "$stdout" "| target | 16K randread qd16 IOPS" "main table on stdout"
assert_bench_outputs "$OUT"
for p in fio_iops fio_bandwidth fio_fdatasync_latency; do
    [[ -s $OUT/$p.svg && -s $OUT/$p.png ]] || fail "plot $p missing"
done
assert_bench_clean
note "ok"
