#!/usr/bin/env bash
# timeout: 240
# Presets of `cachalot bench mysql`: flush-method runs fsync, O_DSYNC and O_DIRECT
# (each server reports the method it was asked for) and plots bars per variant;
# compression sets off, lz4 and zstd on the target's Cachalot dataset through the
# daemon before each fresh data set and records the dataset's compressratio.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/e2e/bench_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench_lib.sh"

bench_setup
TINY=(--threads 1 --time 3 --warmup 1 --tables 2 --table-size 500
    --buffer-pool 32M --log-file-size 32M)

note "preset flush-method"
OUT=$ARTIFACTS/flush-method
rm -rf "$OUT"
stdout=$(assert_ok "$CACHALOT" bench mysql --preset flush-method --target host="$TARGET" "${TINY[@]}" --out "$OUT")
echo "$stdout"
assert_contains "$stdout" "| target | fsync | O_DSYNC | O_DIRECT |" "variants as columns"
assert_bench_outputs "$OUT"
[[ -s $OUT/tps_by_innodb-flush-method_1thr.svg && -s $OUT/tps_by_innodb-flush-method_1thr.png ]] ||
    fail "bar plot per variant missing"
python3 - "$OUT/results.json" <<'PY' || fail "flush methods not applied"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["settings"]["preset"] == "flush-method"
assert [v["name"] for v in r["variants"]] == ["fsync", "O_DSYNC", "O_DIRECT"]
got = {s["variant"]: s["effective"]["innodb_flush_method"] for s in r["servers"]}
assert got == {"fsync": "fsync", "O_DSYNC": "O_DSYNC", "O_DIRECT": "O_DIRECT"}, got
PY
assert_bench_clean

note "preset compression on a Cachalot dataset"
start_daemon
assert_ok "$CACHALOT" pool create -s 256M tank "$(mktmp)/d.img"
assert_ok "$CACHALOT" create tank/db
OUT=$ARTIFACTS/compression
rm -rf "$OUT"
assert_fails "$CACHALOT" bench mysql --preset compression --target host="$TARGET" "${TINY[@]}" --out "$OUT"
assert_contains "$LAST_STDERR" "--dataset host=POOL/FS" "compression needs a dataset"
assert_fails "$CACHALOT" bench mysql --preset compression --target host="$TARGET" \
    --dataset host=tank/nope "${TINY[@]}" --out "$OUT"
assert_contains "$LAST_STDERR" "tank/nope" "unknown dataset named"
[[ ! -e $OUT ]] || fail "a refused run created its output directory"
stdout=$(assert_ok "$CACHALOT" bench mysql --preset compression --target host="$TARGET" \
    --dataset host=tank/db "${TINY[@]}" --out "$OUT")
echo "$stdout"
assert_contains "$stdout" "| target | off | lz4 | zstd |" "variants as columns"
assert_bench_outputs "$OUT"
python3 - "$OUT/results.json" <<'PY' || fail "compression variants not recorded"
import json, sys
r = json.load(open(sys.argv[1]))
assert [v["compression"] for v in r["variants"]] == ["off", "lz4", "zstd"]
assert [s["variant"] for s in r["servers"]] == ["off", "lz4", "zstd"], r["servers"]
for s in r["servers"]:
    assert s["prepare_s"] is not None and float(s["compressratio"]) >= 1.0, s
assert r["targets"][0]["dataset"] == "tank/db"
PY
comp=$("$CACHALOT" get -H -p -o value compression tank/db)
[[ $comp == zstd* ]] || fail "the last variant's compression (zstd) was not set: $comp"
assert_bench_clean
note "ok"
