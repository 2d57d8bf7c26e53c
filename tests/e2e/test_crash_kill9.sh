#!/usr/bin/env bash
# timeout: 600
# kill -9 of the real daemon at random moments under a writer workload (25 cuts).
# Every object whose fsync returned before the kill must read back byte for byte
# after the restart (the daemon re-imports the pool itself); scrub finds nothing.
# Acknowledged objects are never overwritten, so "present with its data" is exact.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

TMP=$(mktmp)
C=$CACHALOT
CYCLES=${CYCLES:-25}
ACKED=$TMP/acked   # lines: OBJ SEED LEN, appended only after fsync returned

start_daemon
assert_ok "$C" pool create -s 256M tank mirror "$TMP/a.img" "$TMP/b.img"
assert_ok "$C" create -o recordsize=16K tank/w
: >"$ACKED"

# writer CYCLE: create objects, write a pattern, fsync, record; sometimes delete an
# acknowledged object (recorded as deleted only after its fsync returned too).
writer() {
    local cycle=$1 i=0 obj seed len
    while true; do
        i=$((i + 1))
        seed=$((cycle * 100000 + i))
        len=$(((RANDOM % 64 + 1) * 4096 + RANDOM % 4096))
        # The first error ends the writer; check_writer_errors says whether the
        # kill explains it (a full pool is allowed at any time).
        obj=$(writer_step "$TMP/werr" "$C" debug create tank/w) || return 0
        writer_step "$TMP/werr" "$C" debug write tank/w "$obj" --seed "$seed" --len "$len" || return 0
        writer_step "$TMP/werr" "$C" debug fsync tank/w || return 0
        echo "$obj $seed $len" >>"$ACKED"
    done
}

for cycle in $(seq "$CYCLES"); do
    writer "$cycle" &
    wpid=$!
    # Cut somewhere between 0.2 and 1.7 s into the workload.
    sleep "0.$((RANDOM % 10 + 2))"
    sleep "$((RANDOM % 2)).$((RANDOM % 10))"
    kill9_daemon
    wait "$wpid" 2>/dev/null || true
    check_writer_errors "$TMP/werr" "cycle $cycle" "out of space"
    rm -f "$TMP/werr"
    start_daemon
    # Every object acknowledged in this cycle, plus a sample of older ones (all of
    # them are checked once more at the end).
    n=0
    { awk -v c="$cycle" '$2 >= c * 100000' "$ACKED"; shuf -n 20 "$ACKED" 2>/dev/null || true; } >"$TMP/check"
    while read -r obj seed len; do
        "$C" debug read tank/w "$obj" --len "$len" --seed "$seed" >/dev/null ||
            fail "cycle $cycle: acknowledged object $obj (seed $seed, $len bytes) is not intact"
        n=$((n + 1))
    done <"$TMP/check"
    note "cycle $cycle: $n acknowledged objects checked, $(wc -l <"$ACKED") in all"
    # Free space now and then: delete the oldest acknowledged objects.
    if ((cycle % 5 == 0)) && ((n > 10)); then
        head -n 5 "$ACKED" | while read -r obj _ _; do assert_ok "$C" debug delete tank/w "$obj"; done
        assert_ok "$C" debug fsync tank/w
        tail -n +6 "$ACKED" >"$TMP/acked.new" && mv "$TMP/acked.new" "$ACKED"
    fi
done
[[ $(wc -l <"$ACKED") -gt 20 ]] || fail "too few acknowledged writes: the workload did not run"
while read -r obj seed len; do
    "$C" debug read tank/w "$obj" --len "$len" --seed "$seed" >/dev/null ||
        fail "end: acknowledged object $obj (seed $seed, $len bytes) is not intact"
done <"$ACKED"
note "all $(wc -l <"$ACKED") acknowledged objects intact"

assert_ok "$C" pool scrub -w tank
status=$(assert_ok "$C" pool status tank)
echo "$status"
assert_contains "$status" "with 0 errors" "scrub after $CYCLES kill -9 cuts"
assert_contains "$status" "No known data errors" "pool status errors line"
stop_daemon
