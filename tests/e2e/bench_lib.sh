# shellcheck shell=bash
# Helpers for the tests/e2e/test_bench_*.sh scripts (source after lib.sh).
#
#   bench_setup                 TMPDIR, a target dir and a baseline dir in the test root
#   assert_bench_outputs DIR    report.md, results.json and SVG+PNG plots, with
#                               positive figures for every target (python3 check)
#   assert_bench_clean          no server, sysbench/fio, loop device, mount or
#                               work directory of ours is left
#   bench_track PID             a bench running in the background: if the test
#                               ends early it gets SIGINT (and time to clean up)
#                               before lib.sh removes the temp root

# bench_setup: exports TMPDIR (the bench's private run dir goes there), and sets
# TARGET (a plain directory target) and IMGDIR (baseline images).
bench_setup() {
    TMPDIR=$(mktmp)
    export TMPDIR
    TARGET=$(mktmp)
    IMGDIR=$(mktmp)
}

# assert_bench_outputs DIR: the study in DIR wrote everything, complete, with
# positive figures for every target (and variant, thread count, fio job).
assert_bench_outputs() {
    local dir=$1 f
    for f in report.md results.json; do
        [[ -s $dir/$f ]] || fail "$dir/$f missing or empty"
    done
    local svgs=("$dir"/*.svg) pngs=("$dir"/*.png)
    [[ -e ${svgs[0]} ]] || fail "no SVG plot in $dir"
    [[ -e ${pngs[0]} ]] || fail "no PNG plot in $dir"
    for f in "${svgs[@]}"; do
        grep -q '<svg' "$f" || fail "$f is not an SVG"
        [[ -e ${f%.svg}.png ]] || fail "${f%.svg}.png missing (every plot comes as SVG and PNG)"
    done
    for f in "${pngs[@]}"; do
        [[ $(head -c 8 "$f" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]] || fail "$f is not a PNG"
        (($(stat -c %s "$f") > 2000)) || fail "$f is suspiciously small"
    done
    python3 - "$dir" <<'PY' || fail "results.json check failed for $dir"
import json, sys, os
d = sys.argv[1]
r = json.load(open(os.path.join(d, "results.json")))
report = open(os.path.join(d, "report.md")).read()
assert r["complete"] is True, f"incomplete: {r['error']}"
targets = [t["name"] for t in r["targets"]]
assert targets, "no targets"
for k in ("machine", "settings", "runs", "summary"):
    assert k in r, f"missing {k}"
assert r["machine"]["cpus"] >= 1 and r["machine"]["memory_bytes"] > 0
summary = r["summary"]
if r["study"] == "mysql":
    assert "mariadbd" in r["machine"]["versions"] and "sysbench" in r["machine"]["versions"]
    variants = [v["name"] for v in r["variants"]]
    for t in targets:
        for v in variants:
            for th in r["settings"]["threads"]:
                rows = [p for p in summary if p["target"] == t and p["variant"] == v and p["threads"] == th]
                assert len(rows) == 1, f"{t}/{v}/{th}: {len(rows)} summary rows"
                p = rows[0]
                for f in ("tps", "qps", "lat_min_ms", "lat_avg_ms", "lat_p95_ms", "lat_max_ms"):
                    assert p[f] > 0, f"{t}/{v}/{th}: {f}={p[f]}"
                assert p["lat_min_ms"] <= p["lat_avg_ms"] <= p["lat_max_ms"]
    assert len(r["runs"]) == len(targets) * len(variants) * len(r["settings"]["threads"]) * r["settings"]["passes"]
    for s in r["servers"]:
        assert int(s["effective"]["innodb_buffer_pool_size"]) > 0
    head = "| target |"
else:
    assert "fio" in r["machine"]["versions"]
    jobs = r["settings"]["jobs"]
    assert len(jobs) == 5
    for t in targets:
        for j in jobs:
            rows = [p for p in summary if p["target"] == t and p["job"] == j["id"]]
            assert len(rows) == 1, f"{t}/{j['id']}: {len(rows)} rows"
            p = rows[0]
            assert p["iops"] > 0 and p["bw_mib_s"] > 0, f"{t}/{j['id']}: {p}"
            if j["fdatasync"]:
                assert p["sync_p50_us"] > 0 and p["sync_p99_us"] >= p["sync_p50_us"], f"{t}: {p}"
    head = "| target | 16K randread qd16 IOPS"
assert "## Main table" in report and head in report, "report.md has no main table"
for t in targets:
    assert f"| {t} |" in report, f"report.md has no row for {t}"
print("results ok:", d, targets)
PY
}

# assert_bench_clean: nothing of ours is left running, attached or mounted.
assert_bench_clean() {
    local left
    left=$(pgrep -af -- "$TMPDIR" || true)
    [[ -z $left ]] || fail "processes left running: $left"
    left=$(losetup -a | grep -F -- "$IMGDIR" || true)
    [[ -z $left ]] || fail "loop devices left attached: $left"
    left=$(grep -F -- "$TMPDIR" /proc/mounts || true)
    [[ -z $left ]] || fail "mounts left: $left"
    left=$(find "$IMGDIR" "$TMPDIR" -mindepth 1 -maxdepth 1 2>/dev/null || true)
    [[ -z $left ]] || fail "files left in the image or run directory: $left"
    left=$(find "$TARGET" -mindepth 1 -maxdepth 1 -name 'cachalot-bench*' || true)
    [[ -z $left ]] || fail "work directories left in the target: $left"
}

BENCH_PID=
# bench_track PID: see above.
bench_track() { BENCH_PID=$1; }

_bench_exit() {
    local rc=$? i
    set +e
    if _alive "$BENCH_PID"; then
        kill -INT "$BENCH_PID" 2>/dev/null
        for ((i = 0; i < 600; i++)); do
            _alive "$BENCH_PID" || break
            sleep 0.1
        done
        kill -KILL "$BENCH_PID" 2>/dev/null
        wait "$BENCH_PID" 2>/dev/null
    fi
    (exit "$rc")
    _e2e_cleanup
}
trap _bench_exit EXIT
