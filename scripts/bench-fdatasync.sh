#!/usr/bin/env bash
# Group commit: fio 4K write + fdatasync with 1 and with 16 writers (numjobs,
# one file each, same dataset), ext4 on a loop device (direct I/O, same backing
# disk) against a cachalot FUSE mount, alternating targets in each of ROUNDS
# rounds; medians of IOPS and of the fdatasync latency p50/p99. Not part of the
# test suite: figures are reported, never asserted.
#
#   scripts/bench-fdatasync.sh              (needs target/ci/cachalot, root, fio)
#   ROUNDS=1 RUNTIME=10 JOBS="1 16" scripts/bench-fdatasync.sh
#   BACKING=/dev/shm scripts/bench-fdatasync.sh   (images on a tmpfs, see below)
#   CACHALOT=/tmp/old-cachalot scripts/bench-fdatasync.sh   (another binary)
#
# Results: test-artifacts/bench-fdatasync/results.txt
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../tests/e2e/lib.sh"
# shellcheck source=tests/e2e/fuse_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../tests/e2e/fuse_lib.sh"

JOBS=${JOBS:-1 16}
ROUNDS=${ROUNDS:-3}
RUNTIME=${RUNTIME:-15}
RESULTS=$ARTIFACTS/results.txt
ROWS=$ARTIFACTS/rows.tsv
: >"$RESULTS"
: >"$ROWS"

LOOP=
_sync_cleanup() {
    local rc=$?
    set +e
    # The loop device first: the common cleanup exits when it is done.
    if [[ -n $LOOP ]]; then
        umount "$W/ext4"
        losetup -d "$LOOP"
    fi
    [[ -n ${BACKING:-} && -n ${IMG:-} ]] && rm -rf "$IMG"
    (exit "$rc")
    _fuse_cleanup
}
trap _sync_cleanup EXIT

start_daemon
W=$(mktmp)
# BACKING: where the pool file and the ext4 image go (default: the disk under
# /tmp). A tmpfs (/dev/shm) takes the device's flush latency, and the noise of
# whoever else uses the disk, out: what is left is the software's scaling.
if [[ -n ${BACKING:-} ]]; then
    IMG=$(mktemp -d "$BACKING/bench-fdatasync.XXXXXX")
else
    IMG=$W
fi
assert_ok "$CACHALOT" pool create -s 4G tank "$IMG/disk0.img"
fuse_mount tank/sync "$W/cachalot"
truncate -s 4G "$IMG/ext4.img"
LOOP=$(losetup --direct-io=on -f --show "$IMG/ext4.img")
mkfs.ext4 -q "$LOOP"
mkdir -p "$W/ext4"
mount "$LOOP" "$W/ext4"

# Rows of rows.tsv: round target jobs iops sync_p50_us sync_p99_us.
for round in $(seq "$ROUNDS"); do
    for n in $JOBS; do
        for target in ext4 cachalot; do
            out=$ARTIFACTS/fio-$target-$n-$round.json
            fio --output-format=json --output="$out" --directory="$W/$target" \
                --name=sync --rw=write --bs=4k --size=32M --fdatasync=1 --ioengine=psync \
                --numjobs="$n" --group_reporting --time_based --runtime="$RUNTIME" \
                --ramp_time=2 || fail "fio failed on $target"
            python3 - "$out" "$round" "$target" "$n" >>"$ROWS" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
p = j["sync"]["lat_ns"]["percentile"]
print(*sys.argv[2:5], round(j["write"]["iops"]), p["50.000000"] / 1000, p["99.000000"] / 1000, sep="\t")
PY
            note "round $round $target $n writers: $(tail -n1 "$ROWS")"
        done
    done
done

result() { echo "$*" | tee -a "$RESULTS" >&2; }
result "# 4K write+fdatasync, medians of $ROUNDS rounds of ${RUNTIME} s ($(basename "$CACHALOT"), $(date -u '+%F %T') UTC)"
python3 - "$ROWS" <<'PY' | tee -a "$RESULTS"
import statistics, sys
from collections import defaultdict
rows = defaultdict(list)
for line in open(sys.argv[1]):
    _, target, n, iops, p50, p99 = line.split("\t")
    rows[(target, int(n))].append((int(iops), float(p50), float(p99)))
med = {k: [statistics.median(c) for c in zip(*v)] for k, v in rows.items()}
print("| target | writers | IOPS | x one writer | fdatasync p50 us | p99 us |")
print("|---|---:|---:|---:|---:|---:|")
for (target, n), (iops, p50, p99) in sorted(med.items()):
    one = med.get((target, 1), [0])[0]
    scale = f"{iops / one:.2f}x" if one else "-"
    print(f"| {target} | {n} | {iops:.0f} | {scale} | {p50:.0f} | {p99:.0f} |")
PY
umount "$W/ext4" && losetup -d "$LOOP" && LOOP=
stop_daemon
cat "$RESULTS"
