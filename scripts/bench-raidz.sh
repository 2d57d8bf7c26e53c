#!/usr/bin/env bash
# Redundancy benchmark, one run, same kind of files for every layout: pools of
# sparse files on the same disk (single, 2-way mirror, raidz1 of 3, raidz2 of 4),
# one dataset each (recordsize 16K, compression off) mounted through FUSE, and
# fio (psync, one job) on a file in each: 16K random write and read, 1 MiB
# sequential write and read. The ARC is small (--arc-max 64M) and the file 4x
# that, so reads reach the devices. Then the resilver rate: a raidz1 device
# replaced, its allocated data resilvered, against a raw copy (dd) of the same
# number of bytes on the same disk.
#
#   scripts/bench-raidz.sh [OUT_DIR]      (needs target/ci/cachalot, fio, FUSE)
#
# Prints a markdown table with each layout's figure and its ratio to single.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
C=${CACHALOT:-$REPO/target/ci/cachalot}
OUT=${1:-$(mktemp -d /tmp/bench-raidz.XXXXXX)}
SIZE=${SIZE:-256}        # MiB per fio file
RUNTIME=${RUNTIME:-10}   # seconds per row
mkdir -p "$OUT"
WORK=$(mktemp -d /var/tmp/bench-raidz.XXXXXX)
DPID=
cleanup() {
    for m in "$WORK"/mnt/*; do fusermount3 -u "$m" 2>/dev/null || umount "$m" 2>/dev/null || true; done
    [[ -n $DPID ]] && kill "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT

# shellcheck source=scripts/bench_daemon.sh
source "$(dirname "$0")/bench_daemon.sh"
start_bench_daemon

DEV=$((SIZE * 3))M
declare -A SPEC=(
    [single]="$WORK/s0"
    [mirror]="mirror $WORK/m0 $WORK/m1"
    [raidz1]="raidz1 $WORK/r0 $WORK/r1 $WORK/r2"
    [raidz2]="raidz2 $WORK/z0 $WORK/z1 $WORK/z2 $WORK/z3"
)
LAYOUTS=(single mirror raidz1 raidz2)
for l in "${LAYOUTS[@]}"; do
    # shellcheck disable=SC2086
    # Pool names: the layout words are reserved.
    "$C" pool create -s "$DEV" "b$l" ${SPEC[$l]} >/dev/null
    "$C" create -o recordsize=16K -o compression=off "b$l/fio" >/dev/null
    mkdir -p "$WORK/mnt/$l"
    "$C" mount "b$l/fio" "$WORK/mnt/$l" >/dev/null
done

# fio ROW LAYOUT -> IOPS (16K rows) or MiB/s (1M rows)
run_fio() {
    local rw=$1 bs=$2 l=$3
    fio --name="$rw-$bs" --filename="$WORK/mnt/$l/f" --size="${SIZE}M" --rw="$rw" \
        --bs="$bs" --ioengine=psync --numjobs=1 --time_based --runtime="$RUNTIME" \
        --end_fsync=1 --output-format=json >"$OUT/fio-$l-$rw-$bs.json" 2>"$OUT/fio-$l-$rw-$bs.err"
    python3 - "$OUT/fio-$l-$rw-$bs.json" "$bs" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
op = j["write"] if j["write"]["io_bytes"] > 0 else j["read"]
print(f'{op["iops"]:.0f}' if sys.argv[2] == "16k" else f'{op["bw"] / 1024:.1f}')
PY
}

# Lay the files out first (sequential write), so reads find data everywhere.
for l in "${LAYOUTS[@]}"; do
    dd if=/dev/urandom of="$WORK/mnt/$l/f" bs=1M count="$SIZE" conv=fsync status=none
done

declare -A R
ROWS=("randwrite 16k" "randread 16k" "write 1M" "read 1M")
for row in "${ROWS[@]}"; do
    read -r rw bs <<<"$row"
    for l in "${LAYOUTS[@]}"; do
        R[$row,$l]=$(run_fio "$rw" "$bs" "$l")
    done
done

{
    echo "| row | unit | single | mirror | raidz1 | raidz2 |"
    echo "|---|---|---|---|---|---|"
    for row in "${ROWS[@]}"; do
        unit=IOPS
        [[ $row == *1M ]] && unit=MiB/s
        line="| $row | $unit | ${R[$row,single]}"
        for l in mirror raidz1 raidz2; do
            ratio=$(python3 -c "print(f'{float(\"${R[$row,$l]}\") / max(float(\"${R[$row,single]}\"), 1e-9):.2f}')")
            line+=" | ${R[$row,$l]} (${ratio}x)"
        done
        echo "$line |"
    done
} | tee "$OUT/table.md"

# Resilver rate against a raw copy of the same bytes.
fusermount3 -u "$WORK/mnt/raidz1" 2>/dev/null || true
"$C" pool export braidz1 >/dev/null
rm "$WORK/r1"
"$C" pool import -d "$WORK" braidz1 >/dev/null
t0=$(date +%s.%N)
"$C" pool replace -s "$DEV" braidz1 "$WORK/r1" "$WORK/r1n" >/dev/null
while "$C" pool status braidz1 | grep -q "resilver in progress\|RESILVERING"; do sleep 0.1; done
t1=$(date +%s.%N)
alloc=$("$C" pool list -Hp braidz1 | awk '{ print $3 }')
# One column of three is rebuilt: the new device receives alloc/3 bytes; the
# resilver reads the two others (2/3 of alloc). Raw copy: read alloc*2/3 and
# write alloc/3 with dd, on the same disk.
per=$((alloc / 3 / 1048576))
t2=$(date +%s.%N)
dd if="$WORK/r0" of=/dev/null bs=1M count="$per" skip=1 status=none iflag=direct
dd if="$WORK/r2" of="$WORK/copy" bs=1M count="$per" skip=1 conv=fsync status=none
t3=$(date +%s.%N)
python3 - "$alloc" "$t0" "$t1" "$t2" "$t3" <<'PY' | tee -a "$OUT/table.md"
import sys
alloc, t0, t1, t2, t3 = int(sys.argv[1]), *map(float, sys.argv[2:])
r = alloc / (t1 - t0) / 2**20
c = alloc / (t3 - t2) / 2**20
print(f"\nresilver of {alloc / 2**20:.0f} MiB allocated (raidz1 of 3): {t1 - t0:.2f} s, "
      f"{r:.1f} MiB/s; raw copy of the same bytes: {t3 - t2:.2f} s, {c:.1f} MiB/s; "
      f"ratio {r / c:.2f}x")
PY
echo "outputs in $OUT"
