#!/usr/bin/env bash
# Resilver rate against a raw copy of the same bytes, in one run, on the same disk.
#
# A raidz1 pool of three sparse files gets SIZE MiB of incompressible data
# (recordsize 128K, compression off, written through FUSE). One device is then
# `pool replace`d by a new file (the old one stays until the resilver ends, as
# a disk swapped in before the failing one is pulled); the time to the end of
# the resilver is set against dd copying the same bytes: the resilver reads 2/3
# of the allocated bytes (the two surviving columns) and writes 1/3 (the
# rebuilt column), so the raw copy reads alloc/3 from each survivor and writes
# alloc/3 to a new file (fsync'd, as the resilver flushes). Both go through the
# page cache.
#
# Timing: with the data in the page cache a resilver of 1.5 GiB takes about a
# second, too short to be stable (one run gave 1.33x, 0.42x, 0.89x). A longer
# run needs no more disk: each measured run repeats the pair (resilver, raw
# copy), alternating, until the resilvers add up to MIN_SECS, and sets the sums
# against each other. The disk holds at most about 2 x SIZE MiB (the pool's
# 1.5 x SIZE, plus the new device or the copy: alloc/3 each, one at a time).
#
#   scripts/bench-resilver.sh [OUT_DIR]   (needs target/ci/cachalot, FUSE)
#   SIZE=MiB (default 2048), MIN_SECS (default 5), RUNS=N (default 3, the
#   median is printed)
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
C=${CACHALOT:-$REPO/target/ci/cachalot}
OUT=${1:-$(mktemp -d /tmp/bench-resilver.XXXXXX)}
SIZE=${SIZE:-2048}
MIN_SECS=${MIN_SECS:-5}
RUNS=${RUNS:-3}
mkdir -p "$OUT"
WORK=$(mktemp -d /var/tmp/bench-resilver.XXXXXX)
DPID=
cleanup() {
    fusermount3 -u "$WORK/mnt" 2>/dev/null || true
    [[ -n $DPID ]] && kill "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT

# shellcheck source=scripts/bench_daemon.sh
source "$(dirname "$0")/bench_daemon.sh"
start_bench_daemon

DEV=$((SIZE * 2 + 256))M
"$C" pool create -s "$DEV" brs raidz1 "$WORK/r0" "$WORK/r1" "$WORK/r2" >/dev/null
"$C" create -o recordsize=128K -o compression=off brs/d >/dev/null
"$C" mount brs/d "$WORK/mnt" >/dev/null
# 64 MiB of random bytes, written SIZE/64 times (no dedup: every copy is stored).
head -c 64M /dev/urandom >"$WORK/seed"
for i in $(seq $((SIZE / 64))); do cat "$WORK/seed" >"$WORK/mnt/f$i"; done
sync -f "$WORK/mnt/f1"
rm -f "$WORK/seed"
fusermount3 -u "$WORK/mnt"
"$C" pool export brs >/dev/null
"$C" pool import -d "$WORK" brs >/dev/null
alloc=$("$C" pool list -Hp brs | awk '{ print $3 }')
per=$((alloc / 3 / 1048576))

# now: seconds since the epoch, with nanoseconds.
now() { date +%s.%N; }
# add SUM START END: SUM + (END - START).
add() { python3 -c "print($1 + $3 - $2)"; }

# One pair: a resilver (the device replaced by the next new file), then the
# raw copy of as many bytes. Adds the durations to rs and cs.
leg=0
pair() {
    local new t0 t1 t2 t3 f
    leg=$((leg + 1))
    new="$WORK/r1.$leg"
    t0=$(now)
    "$C" pool replace -s "$DEV" brs "$(ls -d "$WORK"/r1*)" "$new" >/dev/null
    while "$C" pool status brs | grep -q "resilver in progress\|RESILVERING"; do sleep 0.05; done
    t1=$(now)
    # The old device file goes (it is detached); the next pair replaces the new one.
    for f in "$WORK"/r1*; do [[ $f == "$new" ]] || rm -f "$f"; done
    t2=$(now)
    dd if="$WORK/r0" of=/dev/null bs=1M count="$per" skip=1 status=none
    dd if="$WORK/r2" of="$WORK/copy" bs=1M count="$per" skip=1 conv=fsync status=none
    t3=$(now)
    rm -f "$WORK/copy"
    rs=$(add "$rs" "$t0" "$t1")
    cs=$(add "$cs" "$t2" "$t3")
}

results=()
for run in $(seq "$RUNS"); do
    rs=0 cs=0 n=0
    while ((n == 0)) || python3 -c "import sys; sys.exit(0 if $rs < $MIN_SECS else 1)"; do
        pair
        n=$((n + 1))
    done
    results+=("$(python3 -c "
a, n, rs, cs = $alloc, $n, $rs, $cs
r = a * n / rs / 2**20; c = a * n / cs / 2**20
print(f'{r / c:.3f} {rs:.2f} {r:.1f} {cs:.2f} {c:.1f} {n}')")")
    echo "run $run: ratio, resilver s, MiB/s, copy s, MiB/s, pairs: ${results[-1]}" | tee -a "$OUT/runs.txt"
done
printf '%s\n' "${results[@]}" | sort -n | python3 -c "
import sys
rows = [l.split() for l in sys.stdin]
m = rows[len(rows) // 2]
print(f'resilver of {$alloc / 2**20:.0f} MiB allocated (raidz1 of 3), {m[5]} times: {m[1]} s, '
      f'{m[2]} MiB/s; raw copy of the same bytes as often: {m[3]} s, {m[4]} MiB/s; '
      f'ratio {float(m[0]):.2f}x (median of {len(rows)} runs)')" | tee "$OUT/result.txt"
"$C" pool status brs >"$OUT/status.txt" 2>&1 || true
echo "outputs in $OUT"
