#!/usr/bin/env bash
# timeout: 180
# Device management on a raidz1 of three files.
# In-place replace (`pool replace POOL OLD`, no NEW): a device file deleted while
# the pool is exported and recreated by the replace, and one deleted and
# recreated empty while the daemon runs, are resilvered at their own paths; the
# old disk still in place (label intact) is refused; afterwards two other
# devices are lost to noise and every byte still reads back, so the in-place
# replacements hold real columns.
# offline/online (persistent across a restart; online resilvers only the blocks
# born while the device was offline, which then read back without d1), attach (single
# -> mirror -> three-way), detach (back to a single device, holding the data),
# and the refusals: a second raidz1 column offline, attach to a raidz, detach
# from a raidz or a single device, the last good device of a mirror, a device
# too small; each refused change leaves the pool as it was.
# Hot spares (`spare PATH` in create): a device failing every I/O (fault
# injection) is FAULTED and the spare takes its place and is resilvered with no
# command; a spare already in use by a pool is refused for another.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

TMP=$(mktmp)
C=$CACHALOT
LEN=$((16 * 1024 * 1024))

wait_resilver() { # POOL
    local i st
    for ((i = 0; i < 300; i++)); do
        st=$("$C" pool status "$1")
        if ! grep -q "resilver in progress" <<<"$st" && ! grep -q RESILVERING <<<"$st"; then
            return 0
        fi
        sleep 0.2
    done
    fail "resilver did not finish in 60 s: $st"
}

start_daemon

note "in-place replace: raidz1 of three, d1 deleted while exported"
D=("$TMP/d0" "$TMP/d1" "$TMP/d2")
assert_ok "$C" pool create -s 96M rz raidz1 "${D[@]}"
assert_ok "$C" create -o compression=off rz/d
o1=$(assert_ok "$C" debug create rz/d)
assert_ok "$C" debug write rz/d "$o1" --seed 31 --len "$LEN"
assert_ok "$C" debug fsync rz/d
assert_ok "$C" pool export rz
rm "${D[1]}"
assert_ok "$C" pool import -d "$TMP" rz
st=$(assert_ok "$C" pool status rz)
assert_eq "$(status_col "$st" d1 2)" "UNAVAIL" "d1 state"

note "no file and no -s: refused, no file made"
assert_fails "$C" pool replace rz "${D[1]}"
assert_contains "$LAST_STDERR" "no such file"
[[ ! -e ${D[1]} ]] || fail "a refused replacement created ${D[1]}"

note "pool replace rz d1 (no NEW): a new file at d1's path, resilvered"
assert_ok "$C" pool replace -s 96M rz "${D[1]}"
wait_resilver rz
st=$(assert_ok "$C" pool status rz)
echo "$st"
assert_eq "$(status_col "$st" d1 2)" "ONLINE" "d1 state after the in-place replace"
assert_contains "$st" "replaced by a new device in place"

note "the old disk still in place is refused, nothing changed"
assert_fails "$C" pool replace rz "${D[0]}"
assert_contains "$LAST_STDERR" "still the same device"
st=$(assert_ok "$C" pool status rz)
assert_eq "$(status_col "$st" d0 2)" "ONLINE" "d0 state after a refused in-place replace"

note "d2 deleted and recreated empty while the daemon runs: replaced in place"
rm "${D[2]}"
truncate -s 96M "${D[2]}"
o2=$(assert_ok "$C" debug create rz/d)
assert_ok "$C" debug write rz/d "$o2" --seed 32 --len "$LEN"
assert_ok "$C" debug fsync rz/d
assert_ok "$C" pool replace rz "${D[2]}"
wait_resilver rz
assert_ok "$C" pool scrub -w rz
st=$(assert_ok "$C" pool status rz)
echo "$st"
assert_contains "$st" "state: ONLINE"
assert_contains "$st" "with 0 errors"

note "the in-place replacements hold real columns: d0 lost to noise"
assert_ok "$C" pool export rz
head -c $((80 * 1024 * 1024)) /dev/urandom | dd of="${D[0]}" bs=1M seek=1 conv=notrunc status=none
assert_ok "$C" pool import -d "$TMP" rz
assert_ok "$C" debug read rz/d "$o1" --seed 31 --len "$LEN" >/dev/null
assert_ok "$C" debug read rz/d "$o2" --seed 32 --len "$LEN" >/dev/null
assert_ok "$C" pool scrub -w rz

note "offline: refused for a second raidz1 column; kept across a restart"
assert_ok "$C" pool offline rz "${D[0]}"
assert_fails "$C" pool offline rz "${D[1]}"
assert_contains "$LAST_STDERR" "survives at most 1"
st=$(assert_ok "$C" pool status rz)
echo "$st"
assert_eq "$(status_col "$st" d0 2)" "OFFLINE" "d0 state"
assert_eq "$(status_col "$st" d1 2)" "ONLINE" "d1 state after a refused offline"
assert_contains "$st" "state: DEGRADED"
o3=$(assert_ok "$C" debug create rz/d)
assert_ok "$C" debug write rz/d "$o3" --seed 33 --len "$LEN"
assert_ok "$C" debug fsync rz/d
stop_daemon
start_daemon
st=$(assert_ok "$C" pool status rz)
assert_eq "$(status_col "$st" d0 2)" "OFFLINE" "d0 state after a restart"
note "online: d0 is resilvered (only what was written while it was offline), then d1 lost to noise and o3 still reads back"
assert_ok "$C" pool online rz "${D[0]}"
wait_resilver rz
st=$(assert_ok "$C" pool status rz)
echo "$st"
assert_contains "$st" "blocks born since txg"
# o3 is a third of the data: the resilver examined about that, not the pool.
ex=$(sed -n 's/.*resilvered [0-9]* columns (\([^ ]*\) examined.*/\1/p' <<<"$st")
alloc=$("$C" pool list -Hp rz | awk '{ print $3 }')
python3 - "$ex" "$alloc" <<'PY' || fail "the resilver after online examined $ex of $alloc allocated"
import sys
units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
e, a = sys.argv[1], int(sys.argv[2])
n = float(e[:-1]) * units[e[-1]] if e[-1] in units else float(e.rstrip("B"))
sys.exit(0 if a / 5 < n < a / 2 else 1)
PY
assert_ok "$C" pool scrub -w rz
st=$(assert_ok "$C" pool status rz)
echo "$st"
assert_contains "$st" "state: ONLINE"
assert_contains "$st" "with 0 errors"
assert_ok "$C" pool export rz
head -c $((80 * 1024 * 1024)) /dev/urandom | dd of="${D[1]}" bs=1M seek=1 conv=notrunc status=none
assert_ok "$C" pool import -d "$TMP" rz
assert_ok "$C" debug read rz/d "$o3" --seed 33 --len "$LEN" >/dev/null
assert_ok "$C" debug read rz/d "$o1" --seed 31 --len "$LEN" >/dev/null

note "attach to a raidz, detach from a raidz: refused"
assert_fails "$C" pool attach -s 96M rz "${D[0]}" "$TMP/x0"
assert_contains "$LAST_STDERR" "cannot attach"
[[ ! -e $TMP/x0 ]] || fail "a refused attach left $TMP/x0 behind"
assert_fails "$C" pool detach rz "${D[0]}"
assert_contains "$LAST_STDERR" "only a mirror"
assert_ok "$C" pool destroy rz

note "attach: a single device becomes a mirror, then a three-way mirror"
M=$(mktmp)
S=("$M/s0" "$M/s1" "$M/s2")
assert_ok "$C" pool create -s 96M mp "${S[0]}"
assert_ok "$C" create -o compression=off mp/d
o4=$(assert_ok "$C" debug create mp/d)
assert_ok "$C" debug write mp/d "$o4" --seed 34 --len "$LEN"
assert_ok "$C" debug fsync mp/d
assert_fails "$C" pool detach mp "${S[0]}"
assert_fails "$C" pool offline mp "${S[0]}"
assert_contains "$LAST_STDERR" "single-device"
assert_fails "$C" pool attach -s 40M mp "${S[0]}" "$M/tiny"
assert_contains "$LAST_STDERR" "too small"
[[ ! -e $M/tiny ]] || fail "a refused attach left $M/tiny behind"
assert_ok "$C" pool attach -s 96M mp "${S[0]}" "${S[1]}"
wait_resilver mp
assert_ok "$C" pool attach -s 96M mp "${S[1]}" "${S[2]}"
wait_resilver mp
st=$(assert_ok "$C" pool status mp)
echo "$st"
assert_contains "$st" "mirror-0"
assert_eq "$(status_col "$st" s2 2)" "ONLINE" "s2 state"
note "the last good device of a mirror cannot go"
assert_ok "$C" pool offline mp "${S[1]}"
assert_ok "$C" pool offline mp "${S[2]}"
assert_fails "$C" pool detach mp "${S[0]}"
assert_contains "$LAST_STDERR" "last good device"
assert_fails "$C" pool offline mp "${S[0]}"
assert_ok "$C" pool online mp "${S[1]}"
assert_ok "$C" pool online mp "${S[2]}"
wait_resilver mp
note "detach s0 and s1: s2 alone holds the data"
assert_ok "$C" pool detach mp "${S[0]}"
assert_ok "$C" pool detach mp "${S[1]}"
st=$(assert_ok "$C" pool status mp)
echo "$st"
[[ $st != *mirror-0* ]] || fail "a mirror of one is left: $st"
assert_ok "$C" pool export mp
assert_fails "$C" pool import -d "${S[0]}" mp
assert_ok "$C" pool import -d "$M" mp
assert_ok "$C" debug read mp/d "$o4" --seed 34 --len "$LEN" >/dev/null
assert_ok "$C" pool scrub -w mp
st=$(assert_ok "$C" pool status mp)
assert_contains "$st" "with 0 errors"
assert_ok "$C" pool destroy mp
stop_daemon

note "hot spare: takes over a device that fails every I/O, without a command"
DAEMON_ARGS=(--allow-fault-injection)
start_daemon
H=$(mktmp)
assert_ok "$C" pool create -s 96M sp raidz1 "$H/a" "$H/b" "$H/c" spare "$H/s0"
st=$(assert_ok "$C" pool status sp)
echo "$st"
assert_contains "$st" "spares"
assert_eq "$(status_col "$st" s0 2)" "AVAIL" "spare state"
note "a spare in use elsewhere is refused, nothing made"
assert_fails "$C" pool create -s 96M other "$H/x0" spare "$H/s0"
assert_contains "$LAST_STDERR" "in use by pool 'sp'"
assert_fails "$C" pool list other
[[ ! -e $H/x0 ]] || fail "a refused create left $H/x0 behind"
assert_fails "$C" pool add sp spare "$H/a"
assert_contains "$LAST_STDERR" "in use by pool 'sp'"
note "pool remove: an available spare leaves, its labels erased; a member is refused"
assert_ok "$C" pool add -s 96M sp spare "$H/s1"
assert_eq "$(status_col "$(assert_ok "$C" pool status sp)" s1 2)" "AVAIL" "added spare"
assert_fails "$C" pool remove sp "$H/a"
assert_contains "$LAST_STDERR" "in use in the pool, in its last data vdev, which cannot be removed"
assert_ok "$C" pool remove sp "$H/s1"
assert_eq "$(status_col "$(assert_ok "$C" pool status sp)" s1 2)" "" "removed spare"
# Its labels are erased: another pool takes it without -f.
assert_ok "$C" pool create -s 96M other "$H/s1"
assert_ok "$C" pool destroy other
assert_ok "$C" create -o compression=off sp/d
o5=$(assert_ok "$C" debug create sp/d)
assert_ok "$C" debug write sp/d "$o5" --seed 35 --len "$LEN"
assert_ok "$C" debug fsync sp/d
# Reads that miss the ARC: export and import drop it.
assert_ok "$C" pool export sp
assert_ok "$C" pool import -d "$H" sp
assert_ok "$C" debug inject sp b all eio
assert_ok "$C" debug read sp/d "$o5" --seed 35 --len "$LEN" >/dev/null
o6=$(assert_ok "$C" debug create sp/d)
assert_ok "$C" debug write sp/d "$o6" --seed 36 --len "$LEN"
assert_ok "$C" debug fsync sp/d
for ((i = 0; i < 100; i++)); do
    st=$(assert_ok "$C" pool status sp)
    [[ $st == *"hot spare"* ]] && break
    sleep 0.1
done
echo "$st"
assert_contains "$st" "hot spare"
[[ -z $(status_col "$st" b 2) ]] || fail "the faulted b is still in the pool: $st"
assert_ok "$C" debug inject --clear
wait_resilver sp
assert_ok "$C" pool scrub -w sp
st=$(assert_ok "$C" pool status sp)
echo "$st"
assert_contains "$st" "state: ONLINE"
assert_contains "$st" "with 0 errors"
assert_eq "$(status_col "$st" s0 2)" "ONLINE" "the spare in place"
[[ $st != *spares* ]] || fail "the spare in use is still listed as available"
assert_fails "$C" pool remove sp "$H/s0"
assert_contains "$LAST_STDERR" "in use in the pool"
note "the spare holds real columns: a lost to noise"
assert_ok "$C" pool export sp
head -c $((80 * 1024 * 1024)) /dev/urandom | dd of="$H/a" bs=1M seek=1 conv=notrunc status=none
assert_ok "$C" pool import -d "$H" sp
assert_ok "$C" debug read sp/d "$o5" --seed 35 --len "$LEN" >/dev/null
assert_ok "$C" debug read sp/d "$o6" --seed 36 --len "$LEN" >/dev/null
assert_ok "$C" pool destroy sp
stop_daemon
