#!/usr/bin/env bash
# L2ARC benchmark (issue 17): sysbench oltp_read_only on MariaDB with its data
# about 4x the ARC (--arc-max 64M, see bench_daemon.sh), on two pools of one
# daemon, measured in the same run, alternating (`cachalot bench mysql`):
#   cache:   data device on the disk, cache device a tmpfs file (stands in for flash)
#   nocache: the same data device kind, no cache device
# A data device is a loop device over a file on the disk with direct I/O to its
# file, and its block-device page cache is dropped every 0.1 s while the bench
# runs (the pool reads block devices through the page cache; FileDevice has no
# O_DIRECT): so a read the ARC and the L2ARC miss goes to the disk, not to RAM.
# This VM's disk is not slow (fio 16K randread O_DIRECT: ~20000 IOPS at 50 us,
# the host caches it), so the daemon runs in a blkio cgroup that caps its
# reads of the data devices at READ_IOPS (a slow medium: a hard disk does
# 100-200, a small cloud volume a few thousand); the tmpfs cache device is not
# capped. MariaDB gets a small buffer pool, so its reads go to the pool.
#
#   scripts/bench-l2arc.sh [OUT_DIR]     (needs root, target/ci/cachalot, FUSE)
#
# Environment: TABLES (8), ROWS (125000 per table: ~260 MiB), THREADS (8),
# TIME (60 s per point), PASSES (3), WARMUP (60 s per target, unmeasured; the
# L2ARC fills as early as the prepare: its fill is logged every 10 s in
# OUT/l2arc-fill.log),
# BUFFER_POOL (32M), READ_IOPS (1000; 0: no cap).
# Prints each target's TPS, the ratio, and the cache device's hit rate.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
C=${CACHALOT:-$REPO/target/ci/cachalot}
OUT=${1:-$(mktemp -d /tmp/bench-l2arc.XXXXXX)}
mkdir -p "$OUT"
WORK=$(mktemp -d /var/tmp/bench-l2arc.XXXXXX)
SHM=$(mktemp -d /dev/shm/bench-l2arc.XXXXXX)
DPID=
CG=
LOOPS=()
BG=()
cleanup() {
    set +e
    for p in "${BG[@]}"; do kill "$p" 2>/dev/null; done
    for p in cache nocache; do "$C" unmount -f "l$p/db" 2>/dev/null; done
    [[ -n $DPID ]] && kill "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null
    [[ -n $CG ]] && rmdir "$CG"
    for l in "${LOOPS[@]}"; do losetup -d "$l"; done
    rm -rf "$WORK" "$SHM"
}
trap cleanup EXIT

# shellcheck source=scripts/bench_daemon.sh
source "$(dirname "$0")/bench_daemon.sh"
start_bench_daemon

# data_dev NAME: a 2 GiB loop device over a file on the disk, direct I/O to
# it, appended to LOOPS.
data_dev() {
    truncate -s 2G "$WORK/$1.img"
    LOOPS+=("$(losetup --direct-io=on -f --show "$WORK/$1.img")")
}
data_dev cache
data_dev nocache
DEV_CACHE=${LOOPS[0]}
DEV_NOCACHE=${LOOPS[1]}
if ((${READ_IOPS:-1000} > 0)); then
    CG=/sys/fs/cgroup/blkio/bench-l2arc.$$
    mkdir "$CG"
    for l in "${LOOPS[@]}"; do
        echo "$(lsblk -no MAJ:MIN "$l" | tr -d ' ') ${READ_IOPS:-1000}" >"$CG/blkio.throttle.read_iops_device"
    done
    # Its threads, and those it starts later, are in the cgroup.
    echo "$DPID" >"$CG/cgroup.procs"
fi
truncate -s 1G "$SHM/c0"
"$C" pool create lcache "$DEV_CACHE" cache "$SHM/c0" >/dev/null
"$C" pool create lnocache "$DEV_NOCACHE" >/dev/null
for p in cache nocache; do
    "$C" create -o recordsize=16K -o compression=off "l$p/db" >/dev/null
    mkdir -p "$WORK/mnt/$p"
    "$C" mount "l$p/db" "$WORK/mnt/$p" >/dev/null
done

# Reads that miss the ARC (and the L2ARC) reach the disk: drop the data
# devices' page cache all along.
(while :; do for l in "${LOOPS[@]}"; do blockdev --flushbufs "$l"; done; sleep 0.1; done) &
BG+=($!)

# c0 FIELD: the cache device's row in `pool status` (name state read write
# cksum size S used U hits H misses M): 9 used, 11 hits, 13 misses.
c0() { "$C" pool status lcache | awk -v n="$1" '$1 ~ /(^|\/)c0$/ { print $n; exit }'; }
(while :; do echo "$(date +%T) used $(c0 9) hits $(c0 11) misses $(c0 13)"; sleep 10; done) \
    >"$OUT/l2arc-fill.log" 2>&1 &
BG+=($!)

T0=$(date +%s)
"$C" bench mysql --target "cache=$WORK/mnt/cache" --target "nocache=$WORK/mnt/nocache" \
    --dataset cache=lcache/db --dataset nocache=lnocache/db \
    --workload oltp_read_only --threads "${THREADS:-8}" --time "${TIME:-60}" \
    --warmup "${WARMUP:-60}" --tables "${TABLES:-8}" --table-size "${ROWS:-125000}" \
    --buffer-pool "${BUFFER_POOL:-32M}" --passes "${PASSES:-3}" --out "$OUT/mysql"
sleep 1
"$C" pool status lcache >"$OUT/pool-status.txt"
"$C" analytics show arc.accesses --by level --from "$T0" -H -p >"$OUT/arc-accesses.txt" || true
python3 - "$OUT/mysql/results.json" "$(c0 11)" "$(c0 13)" "$(c0 9)" <<'PY' | tee "$OUT/summary.txt"
import json, sys
r = json.load(open(sys.argv[1]))
hits, misses, used = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
tps = {p["target"]: p["tps"] for p in r["summary"]}
runs = {}
for p in r["runs"]:
    runs.setdefault(p["target"], []).append(f'{p["tps"]:.0f}')
for t in ("cache", "nocache"):
    print(f"{t:8} TPS {tps[t]:8.1f} (median; passes: {', '.join(runs[t])})")
print(f"ratio cache/nocache: {tps['cache'] / tps['nocache']:.2f}x")
total = hits + misses
rate = f"{100 * hits / total:.1f}%" if total else "n/a"
print(f"cache device over the whole run: used {used}, hits {hits}, misses {misses}, hit rate {rate}")
PY
echo "ARC accesses by level since the start (analytics):"
cat "$OUT/arc-accesses.txt"
echo "outputs in $OUT"
