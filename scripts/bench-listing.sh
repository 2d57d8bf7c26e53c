#!/usr/bin/env bash
# Directory listing: `ls -la` and `find -ls` of a directory of N empty files,
# ext4 on a loop device (direct I/O, same backing disk) against a cachalot FUSE
# mount, cold (after `echo 3 > /proc/sys/vm/drop_caches`, which empties the
# kernel's dentry, inode and page caches; the daemon's ARC stays warm) and warm
# (the same command again at once). Targets alternate within each round; figures
# are medians of ROUNDS rounds. Then one counting pass: FUSE requests per entry,
# by op (`cachalot analytics show fuse.ops`), for a cold and a warm listing.
# Not part of the test suite: timings are reported, never asserted.
#
#   scripts/bench-listing.sh                (needs target/ci/cachalot, root)
#   SIZES="4000" ROUNDS=1 scripts/bench-listing.sh
#   CACHALOT=/tmp/old-cachalot scripts/bench-listing.sh   (another binary)
#
# Results: test-artifacts/bench-listing/results.txt
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../tests/e2e/lib.sh"
# shellcheck source=tests/e2e/fuse_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../tests/e2e/fuse_lib.sh"

SIZES=${SIZES:-4000 100000}
ROUNDS=${ROUNDS:-3}
RESULTS=$ARTIFACTS/results.txt
TIMES=$ARTIFACTS/times.tsv
: >"$RESULTS"
: >"$TIMES"
result() { echo "$*" | tee -a "$RESULTS" >&2; }

LOOP=
_listing_cleanup() {
    local rc=$?
    set +e
    # The loop device first: the common cleanup exits when it is done.
    if [[ -n $LOOP ]]; then
        umount "$W/ext4"
        losetup -d "$LOOP"
    fi
    (exit "$rc")
    _fuse_cleanup
}
trap _listing_cleanup EXIT

fuse_pool 4G
W=$(mktmp)
fuse_mount tank/list "$W/cachalot"
truncate -s 4G "$W/ext4.img"
LOOP=$(losetup --direct-io=on -f --show "$W/ext4.img")
mkfs.ext4 -q "$LOOP"
mkdir -p "$W/ext4"
mount "$LOOP" "$W/ext4"

# populate DIR N: N empty files with names like those of a busy directory.
populate() {
    python3 - "$1" "$2" <<'PY'
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
os.makedirs(d)
for i in range(n):
    os.close(os.open(os.path.join(d, f"file-{i:07d}.dat"), os.O_CREAT | os.O_WRONLY, 0o644))
PY
}

drop_caches() {
    sync
    echo 3 >/proc/sys/vm/drop_caches
}

# ms CMD...: run CMD in the current directory, print its wall time in ms.
ms() {
    local t0 t1
    t0=$(date +%s%N)
    "$@" >/dev/null
    t1=$(date +%s%N)
    echo $(((t1 - t0) / 1000000))
}

for n in $SIZES; do
    for target in ext4 cachalot; do
        t0=$(date +%s%N)
        populate "$W/$target/d$n" "$n"
        note "$target: $n files created in $((($(date +%s%N) - t0) / 1000000)) ms"
    done
done

# Rows of times.tsv: round target n command cold|warm ms.
for round in $(seq "$ROUNDS"); do
    for n in $SIZES; do
        for target in ext4 cachalot; do
            cd "$W/$target/d$n"
            for cmd in "ls -la" "find -ls"; do
                drop_caches
                # shellcheck disable=SC2086 # the command's words
                cold=$(ms $cmd)
                # shellcheck disable=SC2086
                warm=$(ms $cmd)
                printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$target" "$n" "$cmd" cold "$cold" >>"$TIMES"
                printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$target" "$n" "$cmd" warm "$warm" >>"$TIMES"
                note "round $round $target n=$n $cmd: cold $cold ms, warm $warm ms"
            done
            cd /
        done
    done
done

result "# ls -la and find -ls, median of $ROUNDS rounds, ms ($(basename "$CACHALOT"), $(date -u '+%F %T') UTC)"
python3 - "$TIMES" <<'PY' | tee -a "$RESULTS"
import statistics, sys
from collections import defaultdict
t = defaultdict(list)
for line in open(sys.argv[1]):
    _, target, n, cmd, state, ms = line.rstrip("\n").split("\t")
    t[(target, int(n), cmd, state)].append(int(ms))
print("| entries | command | cache | ext4 ms | cachalot ms | ratio |")
print("|---:|---|---|---:|---:|---:|")
for (target, n, cmd, state) in sorted(k for k in t if k[0] == "ext4"):
    e = statistics.median(t[("ext4", n, cmd, state)])
    c = statistics.median(t[("cachalot", n, cmd, state)])
    print(f"| {n} | {cmd} | {state} | {e:.0f} | {c:.0f} | {c / max(e, 1):.2f}x |")
PY

# count_ops N CMD: FUSE requests per entry, by op, for CMD on the cachalot
# directory of N entries, cold and then warm at once. Analytics are per second:
# each run starts on a second boundary, and the sampler has stored the last
# second two seconds later. Totals are exact; past the analytics key cap
# (10,000 op/file pairs, which a big directory exceeds) requests are counted
# under the op "(other)".
count_ops() {
    local n=$1 cmd=$2 t
    cd "$W/cachalot/d$n"
    drop_caches
    t[0]=$(next_second)
    # shellcheck disable=SC2086 # the command's words
    $cmd >/dev/null
    t[1]=$(next_second)
    # shellcheck disable=SC2086
    $cmd >/dev/null
    t[2]=$(next_second)
    sleep 2
    for i in 0 1; do
        "$CACHALOT" analytics show fuse.ops --by op --from "${t[i]}" --to "${t[i + 1]}" -H -p |
            awk -F'\t' -v s=$((t[i + 1] - t[i])) -v n="$n" -v what="$cmd $([[ $i == 0 ]] && echo cold || echo warm)" '
                { c = $2 * s; total += c; ops = ops sprintf(" %s %.0f (%.3f/entry)", $1, c, c / n) }
                END { printf "n=%d %s: %.0f requests (%.3f per entry):%s\n", n, what, total, total / n, ops }'
    done
    cd /
}

# next_second: sleep until the next whole second, print it.
next_second() {
    local now
    now=$(date +%s.%N)
    sleep "$(echo "1 - ${now#*.} / 1000000000" | bc -l)"
    echo $((${now%.*} + 1))
}

result "# FUSE requests, cachalot"
for n in $SIZES; do
    for cmd in "ls -la" "find -ls"; do
        count_ops "$n" "$cmd" | tee -a "$RESULTS"
    done
done

umount "$W/ext4" && losetup -d "$LOOP" && LOOP=
stop_daemon
cat "$RESULTS"
