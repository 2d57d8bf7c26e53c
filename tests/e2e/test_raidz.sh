#!/usr/bin/env bash
# timeout: 240
# raidz2 on five device files: space raw (pool list) and after parity (list);
# noise over a range of one device while the daemon runs: checksummed reads and
# writes go on and the device's CKSUM count shows it; one device deleted: import
# DEGRADED naming it; `pool replace` of both, resilver, scrub with 0 errors,
# ONLINE; then two of the old devices overwritten with noise and every byte still
# reads back, so the replacements carry real columns. Bad input is refused.
# With `serve --allow-fault-injection`: injected I/O errors fault a device while
# the workload goes on, injected corruption is repaired, and the faulted device
# is replaced; without the flag `debug inject` is refused.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

TMP=$(mktmp)
C=$CACHALOT
LEN=$((24 * 1024 * 1024))

noise() { # FILE OFFSET_MIB LEN_MIB
    head -c "$(($3 * 1024 * 1024))" /dev/urandom | dd of="$1" bs=1M seek="$2" conv=notrunc status=none
}

wait_resilver() { # [POOL]
    local i st
    for ((i = 0; i < 300; i++)); do
        st=$("$C" pool status "${1:-rz}")
        if ! grep -q "resilver in progress" <<<"$st" && ! grep -q RESILVERING <<<"$st"; then
            return 0
        fi
        sleep 0.2
    done
    fail "resilver did not finish in 60 s: $st"
}

# The refusal of a third replacement (below) needs the first two still
# resilvering: unthrottled, 48 MiB rebuild in well under a second and on a
# loaded machine the third `pool replace` came after it (a flake). At 8 MiB/s
# each resilver here lasts several seconds; wait_resilver allows 60.
export CACHALOT_SCAN_RATE=$((8 * 1024 * 1024))
start_daemon

assert_fails "$C" debug inject --clear
assert_contains "$LAST_STDERR" "allow-fault-injection"

note "bad vdev specifications"
assert_fails "$C" pool create -s 128M bad raidz2 "$TMP/b0" "$TMP/b1"
assert_contains "$LAST_STDERR" "raidz2 needs at least 3 devices"
assert_fails "$C" pool create -s 128M bad "$TMP/b0" log raidz1 "$TMP/b1" "$TMP/b2"

note "raidz2 of five: raw and usable space"
D=()
for i in 0 1 2 3 4; do D+=("$TMP/d$i"); done
assert_ok "$C" pool create -s 128M rz raidz2 "${D[@]}"
size=$(assert_ok "$C" pool list -Hp | awk '$1 == "rz" { print $2 }')
avail=$(assert_ok "$C" list -Hp -o name,avail | awk '$1 == "rz" { print $2 }')
# Three data columns of five: usable is 3/5 of raw, less slop.
((avail < size * 3 / 5 && avail > size * 3 / 5 * 9 / 10)) ||
    fail "avail $avail is not about 3/5 of the raw size $size"

assert_ok "$C" create -o compression=off rz/d
o1=$(assert_ok "$C" debug create rz/d)
assert_ok "$C" debug write rz/d "$o1" --seed 11 --len "$LEN"
assert_ok "$C" debug fsync rz/d
# fsync only writes the intent log (the object's creation is logged too), so the
# data would still be read from memory: commit it, so the reads below reach the
# devices and meet the noise.
assert_ok "$C" debug call pool.sync '{"name":"rz"}'

note "noise over a range of d4 while the daemon runs: the workload goes on"
noise "${D[4]}" 4 40
assert_ok "$C" debug read rz/d "$o1" --seed 11 --len "$LEN" >/dev/null
o2=$(assert_ok "$C" debug create rz/d)
assert_ok "$C" debug write rz/d "$o2" --seed 12 --len "$LEN"
assert_ok "$C" debug fsync rz/d
assert_ok "$C" debug read rz/d "$o2" --seed 12 --len "$LEN" >/dev/null
# Reads may be served from memory; a scrub reads every column from the devices.
assert_ok "$C" pool scrub rz
for ((i = 0; i < 300; i++)); do
    st=$(assert_ok "$C" pool status rz)
    grep -q "in progress" <<<"$st" || break
    sleep 0.2
done
echo "$st"
ck=$(status_col "$st" d4 5)
[[ -n $ck && $ck != 0 ]] || fail "no CKSUM errors counted on d4"

note "d1 deleted: import DEGRADED, naming it; data reads back"
assert_ok "$C" pool export rz
rm "${D[1]}"
noise "${D[4]}" 4 40 # where the scrub above found (and repaired) o1's columns
assert_ok "$C" pool import -d "$TMP" rz
st=$(assert_ok "$C" pool status rz)
echo "$st"
assert_contains "$st" "state: DEGRADED"
assert_eq "$(status_col "$st" d1 2)" "UNAVAIL" "d1 state"
assert_ok "$C" debug read rz/d "$o1" --seed 11 --len "$LEN" >/dev/null
assert_ok "$C" debug read rz/d "$o2" --seed 12 --len "$LEN" >/dev/null
st=$(assert_ok "$C" pool status rz)
ck=$(status_col "$st" d4 5)
[[ -n $ck && $ck != 0 ]] || fail "no CKSUM errors counted on d4 after import"

note "refused replacements change nothing"
assert_fails "$C" pool replace -s 40M rz "${D[1]}" "$TMP/small"
assert_contains "$LAST_STDERR" "too small"
[[ ! -e $TMP/small ]] || fail "a refused replacement left $TMP/small behind"
assert_fails "$C" pool replace -s 128M rz "$TMP/nothere" "$TMP/n9"
assert_fails "$C" pool replace rz "${D[1]}" "${D[2]}"

note "replace both, resilver, scrub clean, ONLINE"
assert_ok "$C" pool replace -s 128M rz "${D[1]}" "$TMP/n1"
assert_ok "$C" pool replace -s 128M rz "${D[4]}" "$TMP/n4"
# Two columns are being rebuilt: a third replacement would lose data.
assert_fails "$C" pool replace -s 128M rz "${D[0]}" "$TMP/n0"
assert_contains "$LAST_STDERR" "would lose data"
wait_resilver
st=$(assert_ok "$C" pool status rz)
echo "$st"
assert_contains "$st" "resilvered"
assert_ok "$C" pool scrub -w rz
st=$(assert_ok "$C" pool status rz)
echo "$st"
assert_contains "$st" "with 0 errors"
assert_contains "$st" "state: ONLINE"
assert_ok "$C" debug read rz/d "$o1" --seed 11 --len "$LEN" >/dev/null
assert_ok "$C" debug read rz/d "$o2" --seed 12 --len "$LEN" >/dev/null

note "the replacements hold real columns: two old devices lost to noise"
assert_ok "$C" pool export rz
rm "${D[4]}"
noise "${D[0]}" 1 120
noise "${D[2]}" 1 120
assert_ok "$C" pool import -d "$TMP" rz
assert_ok "$C" debug read rz/d "$o1" --seed 11 --len "$LEN" >/dev/null
assert_ok "$C" debug read rz/d "$o2" --seed 12 --len "$LEN" >/dev/null
assert_ok "$C" pool scrub -w rz
st=$(assert_ok "$C" pool status rz)
echo "$st"
assert_contains "$st" "No known data errors"
assert_ok "$C" pool destroy rz
stop_daemon

note "fault injection: a device failing every I/O is FAULTED, the workload goes on"
DAEMON_ARGS=(--allow-fault-injection)
start_daemon
F=()
for i in 0 1 2 3; do F+=("$TMP/f$i"); done
assert_ok "$C" pool create -s 128M fz raidz2 "${F[@]}"
assert_ok "$C" create -o compression=off fz/d
o1=$(assert_ok "$C" debug create fz/d)
assert_ok "$C" debug write fz/d "$o1" --seed 21 --len "$LEN"
assert_ok "$C" debug fsync fz/d
assert_fails "$C" debug inject fz nosuch all eio
assert_ok "$C" debug inject fz f1 all eio
# Reads that miss the ARC: export and import drop it (the injection goes too:
# inject again after the import).
assert_ok "$C" pool export fz
assert_ok "$C" pool import -d "$TMP" fz
assert_ok "$C" debug inject fz f1 all eio
assert_ok "$C" debug read fz/d "$o1" --seed 21 --len "$LEN" >/dev/null
o2=$(assert_ok "$C" debug create fz/d)
assert_ok "$C" debug write fz/d "$o2" --seed 22 --len "$LEN"
assert_ok "$C" debug fsync fz/d
st=$(assert_ok "$C" pool status fz)
echo "$st"
assert_eq "$(status_col "$st" f1 2)" "FAULTED" "f1 state"
assert_contains "$st" "state: DEGRADED"
note "injected corruption on a second device: found and repaired"
assert_ok "$C" pool export fz
assert_ok "$C" pool import -d "$TMP" fz
assert_ok "$C" debug inject fz f1 all eio
assert_ok "$C" debug inject fz f2 read corrupt --rate 50
assert_ok "$C" debug read fz/d "$o1" --seed 21 --len "$LEN" >/dev/null
assert_ok "$C" debug read fz/d "$o2" --seed 22 --len "$LEN" >/dev/null
st=$(assert_ok "$C" pool status fz)
echo "$st"
ck=$(status_col "$st" f2 5)
[[ -n $ck && $ck != 0 ]] || fail "no CKSUM errors counted on f2"
assert_ok "$C" debug inject --clear
note "the faulted device replaced: ONLINE, scrub clean"
assert_ok "$C" pool replace -s 128M fz "${F[1]}" "$TMP/g1"
wait_resilver fz
assert_ok "$C" pool scrub -w fz
st=$(assert_ok "$C" pool status fz)
echo "$st"
assert_contains "$st" "state: ONLINE"
assert_contains "$st" "with 0 errors"
assert_ok "$C" debug read fz/d "$o1" --seed 21 --len "$LEN" >/dev/null
assert_ok "$C" debug read fz/d "$o2" --seed 22 --len "$LEN" >/dev/null
stop_daemon
