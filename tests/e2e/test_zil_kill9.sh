#!/usr/bin/env bash
# timeout: 400
# Intent log through the real daemon: a pool with a separate log device, four
# concurrent writers appending records to existing objects with an fsync after each
# (the log path, not a full commit), the daemon killed with -9 at random moments;
# after each restart every record whose fsync returned is intact. Then the log
# device disappears between a crash and the restart: the pool comes back with what
# the main vdev committed, and `pool status` says what happened.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

TMP=$(mktmp)
C=$CACHALOT
CYCLES=${CYCLES:-10}
REC=16384

start_daemon
assert_ok "$C" pool create -s 256M tank "$TMP/data.img" log "$TMP/slog.img"
st=$(assert_ok "$C" pool status tank)
echo "$st"
assert_contains "$st" "logs" "status shows the log section"
assert_ok "$C" create -o recordsize=16K tank/w
objs=()
for w in 0 1 2 3; do
    objs+=("$(assert_ok "$C" debug create tank/w)")
    : >"$TMP/acked.$w"
done
assert_ok "$C" pool sync tank

# writer W CYCLE: append records (seed = W*1e6 + index) with fsync; record acks.
writer() {
    local w=$1 obj=$2 i
    i=$(wc -l <"$TMP/acked.$w")
    while true; do
        "$C" debug write tank/w "$obj" --off $((i * REC)) --seed $((w * 1000000 + i)) --len $REC 2>>"$TMP/werr" || return 0
        "$C" debug fsync tank/w 2>>"$TMP/werr" || return 0
        echo "$i" >>"$TMP/acked.$w"
        i=$((i + 1))
    done
}

verify() {
    local w i
    for w in 0 1 2 3; do
        while read -r i; do
            "$C" debug read tank/w "${objs[$w]}" --off $((i * REC)) --len $REC --seed $((w * 1000000 + i)) >/dev/null ||
                fail "$1: writer $w record $i was acknowledged but is not intact"
        done <"$TMP/acked.$w"
    done
}

for cycle in $(seq "$CYCLES"); do
    pids=()
    for w in 0 1 2 3; do
        writer "$w" "${objs[$w]}" &
        pids+=($!)
    done
    sleep "0.$((RANDOM % 8 + 2))"
    kill9_daemon
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    start_daemon
    verify "cycle $cycle"
    note "cycle $cycle: $(cat "$TMP"/acked.* | wc -l) acknowledged records intact"
done
total=$(cat "$TMP"/acked.* | wc -l)
((total > 40)) || fail "too few acknowledged writes ($total): the workload did not run"
# Lost connections are expected (the daemon is killed under the writers);
# anything else is not.
bad=$(grep -v "^[[:space:]]*$" "$TMP/werr" 2>/dev/null | grep -iv "connect\|connection\|broken pipe\|reset by peer\|eof\|closed" || true)
[[ -z $bad ]] || fail "writers saw unexpected errors: $(head -3 <<<"$bad")"

note "the log device disappears between a crash and the restart"
for w in 0 1 2 3; do writer "$w" "${objs[$w]}" & done
sleep 0.5
kill9_daemon
wait 2>/dev/null || true
mv "$TMP/slog.img" "$TMP/slog.gone"
start_daemon
st=$(assert_ok "$C" pool status tank)
echo "$st"
assert_contains "$st" "log device" "status explains the missing log device"
# Records committed by a txg are there; writes keep working (logged to the main vdev).
obj=$(assert_ok "$C" debug create tank/w)
assert_ok "$C" debug fsync tank/w
assert_ok "$C" debug write tank/w "$obj" --seed 5 --len 100000
assert_ok "$C" debug fsync tank/w
assert_ok "$C" debug read tank/w "$obj" --seed 5 --len 100000 >/dev/null
assert_ok "$C" pool scrub -w tank
st=$(assert_ok "$C" pool status tank)
assert_contains "$st" "No known data errors" "scrub after losing the log device"
stop_daemon
