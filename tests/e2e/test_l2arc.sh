#!/usr/bin/env bash
# timeout: 240
# The L2ARC on a cache device (`cache PATH` in create and add), with an 8 MiB ARC
# and a 48 MiB working set: reading it twice is served by the cache device (hits
# in `pool status` and in arc.accesses by level); after a daemon restart the
# hits go on at once (persistent L2ARC: the index is rebuilt from the device);
# the cache file overwritten with noise: every read still returns the right
# bytes, the checksum errors are counted on the cache device; the cache file
# deleted: the pool stays ONLINE, the device UNAVAIL with a notice, also after
# a restart. `pool remove` takes a cache device out online (reads then come
# from the pool, the file is free for another pool and can be deleted) and
# refuses unknown and data devices. `secondarycache=none` keeps a dataset's
# blocks off the cache device (=all puts them back). And the refusals: `cache` with no device,
# a cache device in use.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

TMP=$(mktmp)
C=$CACHALOT
LEN=$((16 * 1024 * 1024))
DAEMON_ARGS=(--arc-max 8M)

# field N of the cache device's row (name state read write cksum size S used U
# hits H misses M).
c0_col() { status_col "$("$C" pool status tank)" c0 "$1"; }
c0_hits() { c0_col 11; }

# write_three DS SEED IDS: three objects of LEN bytes in DS (pattern seeds
# SEED, SEED+1, SEED+2), fsynced; their ids into the array named IDS.
write_three() {
    local ds=$1 seed=$2 i
    local -n ids=$3
    ids=()
    for i in 0 1 2; do
        ids+=("$(assert_ok "$C" debug create "$ds")")
        assert_ok "$C" debug write "$ds" "${ids[i]}" --seed $((seed + i)) --len "$LEN"
    done
    assert_ok "$C" debug fsync "$ds"
}

# read_three DS SEED IDS: read back (and check) what write_three wrote.
read_three() {
    local ds=$1 seed=$2 i
    local -n ids=$3
    for i in 0 1 2; do
        assert_ok "$C" debug read "$ds" "${ids[i]}" --seed $((seed + i)) --len "$LEN" >/dev/null
    done
}

read_all() { read_three tank/d 40 OBJ; }

# fed DEV: the bytes the L2ARC holds on cache device DEV (a path's last part).
fed() {
    "$C" debug call pool.status '{"name":"tank"}' |
        jq -r --arg d "/$1" '.[0].devices[] | select(.name | endswith($d)) | .cache.used'
}
# feeder_done DEV: DEV's fill stays the same over 0.3 s: the feeder has written
# what the reads gave it (it writes every 200 ms; a fixed 0.5 s sleep raced
# with it on a loaded machine).
feeder_done() {
    local a
    a=$(fed "$1")
    sleep 0.3
    [[ -n $a && $(fed "$1") == "$a" ]]
}

start_daemon

note "bad input: 'cache' needs devices; nothing is created"
assert_fails "$C" pool create -s 128M tank "$TMP/d0" cache
assert_contains "$LAST_STDERR" "'cache' must be followed by devices"
[[ ! -e $TMP/d0 ]] || fail "a refused create made $TMP/d0"

note "pool create tank d0 cache c0"
assert_ok "$C" pool create -s 128M tank "$TMP/d0" cache "$TMP/c0"
st=$(assert_ok "$C" pool status tank)
echo "$st" >&2
assert_contains "$st" $'\tcache\n' "a cache section"
assert_eq "$(c0_col 2)" ONLINE "c0 state"
assert_eq "$(c0_col 6)" size "c0 row shows its size"

note "a cache device in use is refused for another pool"
assert_fails "$C" pool create -s 64M other "$TMP/e0" cache "$TMP/c0"
assert_contains "$LAST_STDERR" "in use by pool 'tank'"

note "48 MiB written (the ARC holds 8), then read twice"
assert_ok "$C" create -o compression=off tank/d
write_three tank/d 40 OBJ
# The start of a second that no earlier read falls in: analytics count whole
# seconds, so a check "from T" must not share T with what came before it.
fresh_second() {
    local t
    t=$(date +%s)
    while (($(date +%s) <= t)); do sleep 0.1; done
    date +%s
}
T0=$(date +%s)
read_all
read_all
h=$(c0_hits)
note "cache device hits after two reads: $h"
((h > 200)) || fail "the cache device served $h reads of 2 x 384 records"
# Ask once the analytics sampler has stored the second the reads ended in (so
# also once that second is past: a range from T0 to now is never empty). A wait
# for the next second alone could ask ~2 ms before its sampling.
ended=$(date +%s)
wait_until 30 "the analytics sampler stores second $ended" analytics_stored "$ended"
out=$(assert_ok "$C" analytics show arc.accesses --by level --from "$T0" -H -p)
echo "$out" >&2
l2=$(awk '$1 == "l2arc" { print $2 }' <<<"$out")
[[ -n $l2 ]] || fail "no level=l2arc in arc.accesses: $out"
addr=$(cat "$HOME_DIR/http.addr")
metrics=$(curl -sf "http://$addr/metrics")
assert_contains "$metrics" 'level="l2arc"' "/metrics has the level dimension"

note "restart: the index comes back from the device, hits at once"
stop_daemon
start_daemon
assert_eq "$(c0_hits)" 0 "counters start at 0"
read_all
h=$(c0_hits)
note "cache device hits after the restart, one read: $h"
((h > 200)) || fail "after a restart the cache device served only $h reads"
assert_eq "$(c0_col 5)" 0 "no checksum errors yet"

note "noise over the cache device's ring: reads right, errors counted"
dd if=/dev/urandom of="$TMP/c0" bs=1M seek=1 count=120 conv=notrunc status=none
read_all
errs=$(c0_col 5)
note "cache device checksum errors: $errs"
((errs > 100)) || fail "only $errs checksum errors on a cache device full of noise"
st=$(assert_ok "$C" pool status tank)
assert_contains "$st" "state: ONLINE" "pool ONLINE"

note "the cache file deleted: ONLINE, c0 UNAVAIL with a notice"
rm "$TMP/c0"
for ((i = 0; i < 50; i++)); do
    [[ $(c0_col 2) == UNAVAIL ]] && break
    sleep 0.2
done
st=$(assert_ok "$C" pool status tank)
echo "$st" >&2
assert_eq "$(c0_col 2)" UNAVAIL "c0 state after rm"
assert_contains "$st" "state: ONLINE" "pool ONLINE without its cache"
assert_contains "$st" "cache device $TMP/c0 was removed" "a notice"
read_all

note "restart without the cache file: imported ONLINE, c0 UNAVAIL"
stop_daemon
start_daemon
st=$(assert_ok "$C" pool status tank)
echo "$st" >&2
assert_contains "$st" "state: ONLINE" "pool ONLINE after a restart"
assert_eq "$(c0_col 2)" UNAVAIL "c0 state after the restart"
assert_contains "$st" "cache device $TMP/c0 is missing" "a notice"
read_all

note "pool add tank cache c1"
assert_ok "$C" pool add -s 64M tank cache "$TMP/c1"
st=$(assert_ok "$C" pool status tank)
assert_eq "$(status_col "$st" c1 2)" ONLINE "c1 state"

note "secondarycache=none: tank/n's blocks are kept off the cache device"
assert_ok "$C" create -o compression=off -o secondarycache=none tank/n
write_three tank/n 50 NOBJ
read_n() { read_three tank/n 50 NOBJ; }
# c1 may already have served a pool metadata block (fed since it was added)
# during the create and writes above: only hits from here on are tank/n's.
c1_before=$(status_col "$(assert_ok "$C" pool status tank)" c1 11)
T2=$(fresh_second)
read_n
wait_until 30 "the feeder done with tank/n's blocks" feeder_done c1
read_n
ended=$(date +%s)
wait_until 30 "the analytics sampler stores second $ended" analytics_stored "$ended"
out=$(assert_ok "$C" analytics show arc.accesses --by level --from "$T2" -H -p)
echo "$out" >&2
[[ $out != *l2arc* ]] || fail "secondarycache=none, yet the L2ARC served reads: $out"
c1_after=$(status_col "$(assert_ok "$C" pool status tank)" c1 11)
assert_eq "$((c1_after - c1_before))" 0 "c1 hits during the reads of tank/n with secondarycache=none"

note "secondarycache=all on tank/n: the same reads are then served by c1"
assert_ok "$C" set secondarycache=all tank/n
read_n
wait_until 30 "the feeder done with tank/n's blocks" feeder_done c1
read_n
h=$(status_col "$(assert_ok "$C" pool status tank)" c1 11)
note "c1 hits with secondarycache=all: $h"
((h > 200)) || fail "secondarycache=all: the cache device served only $h reads"
read_all
read_all
h=$(status_col "$(assert_ok "$C" pool status tank)" c1 11)
((h > 0)) || fail "an added cache device served no reads"

note "pool remove: refused for an unknown device and the last data device"
assert_fails "$C" pool remove tank "$TMP/nope"
assert_contains "$LAST_STDERR" "no such spare or cache device in pool 'tank'"
assert_fails "$C" pool remove tank "$TMP/d0"
assert_contains "$LAST_STDERR" "in use in the pool, in its last data vdev, which cannot be removed"
assert_eq "$(status_col "$(assert_ok "$C" pool status tank)" c1 2)" ONLINE "c1 kept"

note "pool remove tank c1 (online) and the missing c0: reads go to the pool"
assert_ok "$C" pool remove tank "$TMP/c1"
assert_ok "$C" pool remove tank "$TMP/c0"
st=$(assert_ok "$C" pool status tank)
echo "$st" >&2
assert_contains "$st" "state: ONLINE" "pool ONLINE after removing its cache devices"
[[ $st != *$'\tcache\n'* ]] || fail "a cache section without cache devices"
assert_eq "$(status_col "$st" c1 2)$(status_col "$st" c0 2)" "" "no row for c0 or c1"
assert_contains "$st" "cache device $TMP/c1 removed" "a notice"
T1=$(fresh_second)
read_all
ended=$(date +%s)
wait_until 30 "the analytics sampler stores second $ended" analytics_stored "$ended"
out=$(assert_ok "$C" analytics show arc.accesses --by level --from "$T1" -H -p)
echo "$out" >&2
assert_contains "$out" pool "reads after the removal come from the pool"
[[ $out != *l2arc* ]] || fail "the L2ARC still served reads after its device was removed: $out"

note "the removed device is free: another pool takes it without -f, then it is deleted"
assert_ok "$C" pool create other "$TMP/c1"
assert_ok "$C" pool destroy other
rm "$TMP/c1"
read_all

note "pool remove of a data device that is not the last: refused"
assert_ok "$C" pool add -s 128M tank "$TMP/d1"
assert_fails "$C" pool remove tank "$TMP/d1"
assert_contains "$LAST_STDERR" "in use in the pool, in a data vdev (a data device"

note "restart: the removed cache devices stay gone"
stop_daemon
start_daemon
st=$(assert_ok "$C" pool status tank)
echo "$st" >&2
assert_contains "$st" "state: ONLINE" "pool ONLINE after a restart"
[[ $st != *$'\tcache\n'* ]] || fail "a removed cache device came back after a restart"
read_all
stop_daemon
