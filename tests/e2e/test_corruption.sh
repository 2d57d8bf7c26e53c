#!/usr/bin/env bash
# timeout: 300
# Random bytes written over a device file: scrub finds them and counts them per
# device in `pool status`; reads fail rather than return wrong data; in a mirror
# the bad copy is rewritten from the good one (the healed side alone reads back).
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

TMP=$(mktmp)
C=$CACHALOT
LEN=$((8 * 1024 * 1024))

garbage() { # FILE OFFSET_MIB LEN_MIB
    head -c "$(($3 * 1024 * 1024))" /dev/urandom | dd of="$1" bs=1M seek="$2" conv=notrunc status=none
}

start_daemon

note "single device: corruption is detected and never returned"
assert_ok "$C" pool create -s 128M solo "$TMP/solo.img"
assert_ok "$C" create -o compression=off solo/d
obj=$(assert_ok "$C" debug create solo/d)
assert_ok "$C" debug write solo/d "$obj" --seed 7 --len "$LEN"
assert_ok "$C" debug fsync solo/d
assert_ok "$C" debug read solo/d "$obj" --seed 7 --len "$LEN" >/dev/null
assert_ok "$C" pool export solo
garbage "$TMP/solo.img" 2 4
assert_ok "$C" pool import -d "$TMP" solo
if "$C" debug read solo/d "$obj" --seed 7 --len "$LEN" >"$TMP/out" 2>"$TMP/err"; then
    fail "read of corrupted data succeeded (and matched?!): $(cat "$TMP/out")"
fi
grep -qi "checksum\|corrupt" "$TMP/err" || fail "read error does not say checksum/corrupt: $(cat "$TMP/err")"
# A read of a pattern we did not write must also fail (wrong data is never returned).
assert_ok "$C" pool scrub -w solo
st=$(assert_ok "$C" pool status solo)
echo "$st"
ck=$(status_col "$st" solo.img 5)
[[ -n $ck && $ck != 0 ]] || fail "pool status shows no CKSUM errors on solo.img"
grep -q "errors: No known data errors" <<<"$st" && fail "status claims no data errors"
assert_ok "$C" pool destroy solo

note "mirror: the bad copy is found and rewritten from the good one"
assert_ok "$C" pool create -s 128M mir mirror "$TMP/m0.img" "$TMP/m1.img"
assert_ok "$C" create -o compression=off mir/d
obj=$(assert_ok "$C" debug create mir/d)
assert_ok "$C" debug write mir/d "$obj" --seed 9 --len "$LEN"
assert_ok "$C" debug fsync mir/d
assert_ok "$C" pool export mir
garbage "$TMP/m1.img" 1 6
assert_ok "$C" pool import -d "$TMP" mir
assert_ok "$C" debug read mir/d "$obj" --seed 9 --len "$LEN" >/dev/null
assert_ok "$C" pool scrub -w mir
st=$(assert_ok "$C" pool status mir)
echo "$st"
ck=$(status_col "$st" m1.img 5)
[[ -n $ck && $ck != 0 ]] || fail "pool status shows no CKSUM errors on m1.img"
ck0=$(status_col "$st" m0.img 5)
assert_eq "$ck0" "0" "the good side has no checksum errors"
assert_contains "$st" "No known data errors" "mirror keeps all data"
assert_ok "$C" pool export mir
# Only the healed side: it must hold every block.
mkdir "$TMP/only"
mv "$TMP/m1.img" "$TMP/only/"
assert_ok "$C" pool import -d "$TMP/only" mir
assert_ok "$C" debug read mir/d "$obj" --seed 9 --len "$LEN" >/dev/null
assert_ok "$C" pool scrub -w mir
st=$(assert_ok "$C" pool status mir)
echo "$st"
assert_contains "$st" "with 0 errors" "healed side scrubs clean"
stop_daemon
