#!/usr/bin/env bash
# timeout: 180
# kill -9 of the daemon mid-resilver: after the restart the resilver continues
# from the position saved in the labels (status says "resumed at" a non-zero
# size, and its first progress is already past it), then completes; scrub finds
# 0 errors, the pool is ONLINE and the data reads back, also with another
# device lost to noise (so the replacement holds real columns).
# The same for the resilver after `pool online`, which covers only the blocks
# written while the device was offline: it resumes with the same txg bound, and
# then the device holds them (read back with the replacement lost to noise).
# The resilver is slowed with CACHALOT_SCAN_RATE so the kill lands mid-way.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

TMP=$(mktmp)
C=$CACHALOT
LEN=$((24 * 1024 * 1024))

# pct STATUS: the resilver's "N.N% done" as an integer, or -1.
pct() { sed -n 's/.*resilver in progress, \([0-9]*\)\.[0-9]*% done.*/\1/p' <<<"$1" | grep . || echo -1; }

export CACHALOT_SCAN_RATE=$((10 * 1024 * 1024))
start_daemon

# restart_slow: start the daemon again after a kill -9 with the resilver paced
# at 3 MiB/s, so the resumed run is still in progress when status is first
# asked. (At 10 MiB/s the rest of a run took 4-5 s, and on a loaded CI machine
# the daemon's start and the scan's collection of block pointers used all of
# it: the resilver had finished before status could say "resumed at".)
restart_slow() {
    export CACHALOT_SCAN_RATE=$((3 * 1024 * 1024))
    start_daemon
    export CACHALOT_SCAN_RATE=$((10 * 1024 * 1024))
}

D=("$TMP/d0" "$TMP/d1" "$TMP/d2")
assert_ok "$C" pool create -s 256M rz raidz1 "${D[@]}"
assert_ok "$C" create -o compression=off rz/d
objs=()
for seed in 41 42 43; do
    o=$(assert_ok "$C" debug create rz/d)
    assert_ok "$C" debug write rz/d "$o" --seed "$seed" --len "$LEN"
    objs+=("$o:$seed")
done
assert_ok "$C" debug fsync rz/d
assert_ok "$C" pool export rz
rm "${D[1]}"
assert_ok "$C" pool import -d "$TMP" rz

# Poll `pool status rz` until the resilver is at least $1% through (20 s at
# most); leaves the last status in st and its percentage in p.
wait_resilver_at() {
    p=-1
    for ((i = 0; i < 200; i++)); do
        st=$(assert_ok "$C" pool status rz)
        p=$(pct "$st")
        ((p >= $1)) && break
        sleep 0.1
    done
}

note "replace d1, kill -9 once the resilver is about 40% through"
assert_ok "$C" pool replace -s 256M rz "${D[1]}" "$TMP/n1"
wait_resilver_at 40
echo "$st"
((p >= 40 && p < 95)) || fail "resilver not caught mid-way (at $p%)"
kill9_daemon

note "restart: the resilver continues from the saved position"
restart_slow
# The resumed scan first collects the block pointers, then skips what is done.
for ((i = 0; i < 100; i++)); do
    st=$(assert_ok "$C" pool status rz)
    grep -q "resumed at" <<<"$st" && break
    sleep 0.1
done
echo "$st"
assert_contains "$st" "resilver in progress"
assert_contains "$st" "resumed at"
p2=$(pct "$st")
((p2 >= 20)) || fail "the resumed resilver starts at $p2%, not near where it was cut ($p%)"
for ((i = 0; i < 300; i++)); do
    st=$("$C" pool status rz)
    grep -q "resilver in progress\|RESILVERING" <<<"$st" || break
    sleep 0.2
done
echo "$st"
assert_contains "$st" "resilvered"
assert_ok "$C" pool scrub -w rz
st=$(assert_ok "$C" pool status rz)
echo "$st"
assert_contains "$st" "state: ONLINE"
assert_contains "$st" "with 0 errors"

note "the replacement holds real columns: d0 lost to noise"
assert_ok "$C" pool export rz
head -c $((200 * 1024 * 1024)) /dev/urandom | dd of="${D[0]}" bs=1M seek=1 conv=notrunc status=none
assert_ok "$C" pool import -d "$TMP" rz
for os in "${objs[@]}"; do
    assert_ok "$C" debug read rz/d "${os%%:*}" --seed "${os##*:}" --len "$LEN" >/dev/null
done

note "offline d2, write 48 MiB, online: kill -9 mid-resilver, which resumes with the same txg bound"
assert_ok "$C" pool scrub -w rz
assert_ok "$C" pool offline rz "${D[2]}"
for seed in 44 45; do
    o=$(assert_ok "$C" debug create rz/d)
    assert_ok "$C" debug write rz/d "$o" --seed "$seed" --len "$LEN"
    objs+=("$o:$seed")
done
assert_ok "$C" debug fsync rz/d
assert_ok "$C" pool online rz "${D[2]}"
# At least 45%: the third of six 12 MiB batches (with parity). The position is
# saved at most once a second, when a batch is delivered, after its progress
# is counted: at 33% (the second batch) the first save could still be under
# way, and a kill then left nothing to resume (status never said "resumed at").
wait_resilver_at 45
echo "$st"
((p >= 45 && p < 95)) || fail "resilver after online not caught mid-way (at $p%)"
since=$(sed -n 's/.*blocks born since txg \([0-9]*\).*/\1/p' <<<"$st")
[[ -n $since ]] || fail "the resilver after online is not bounded by a txg"
kill9_daemon
restart_slow
for ((i = 0; i < 100; i++)); do
    st=$(assert_ok "$C" pool status rz)
    grep -q "resumed at" <<<"$st" && break
    sleep 0.1
done
echo "$st"
assert_contains "$st" "resumed at"
assert_contains "$st" "blocks born since txg $since,"
for ((i = 0; i < 300; i++)); do
    st=$("$C" pool status rz)
    grep -q "resilver in progress\|RESILVERING" <<<"$st" || break
    sleep 0.2
done
assert_ok "$C" pool scrub -w rz
st=$(assert_ok "$C" pool status rz)
echo "$st"
assert_contains "$st" "state: ONLINE"
assert_contains "$st" "with 0 errors"
note "d2 holds what was written while it was offline: n1 lost to noise"
assert_ok "$C" pool export rz
head -c $((200 * 1024 * 1024)) /dev/urandom | dd of="$TMP/n1" bs=1M seek=1 conv=notrunc status=none
assert_ok "$C" pool import -d "$TMP" rz
for os in "${objs[@]}"; do
    assert_ok "$C" debug read rz/d "${os%%:*}" --seed "${os##*:}" --len "$LEN" >/dev/null
done
assert_ok "$C" pool destroy rz
stop_daemon
