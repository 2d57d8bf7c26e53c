#!/usr/bin/env bash
# timeout: 180
# Recursive replication (`replication create -r`) between two appliances in
# network namespaces over a veth (repl_lib.sh): a tree of three datasets
# (tank/src, tank/src/a, its child tank/src/a/g) is snapshotted at once and
# replicated member by member; a child created between cycles arrives in the
# next one; a kill -9 of the source in the middle of a member's transfer is
# resumed by the next cycle; a child destroyed on the source keeps its copy on
# the target and `replication status` says so. Every file's sha256 is
# compared on both sides.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/e2e/repl_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/repl_lib.sh"

repl_push_nodes
repl_pair

# mount_src FS: mount A's FS under $T/m/FS and write a file in it.
mount_src() {
    mkdir -p "$T/m/$1"
    assert_ok CA mount "$1" "$T/m/$1"
    head -c 1M /dev/urandom >"$T/m/$1/f"
}
MEMBERS=(tank/src tank/src/a tank/src/a/g)
for fs in "${MEMBERS[@]}"; do
    assert_ok CA create "$fs"
    mount_src "$fs"
done
sync

# all_same FS...: each member's newest replicated snapshot equals the source's.
all_same() {
    local fs
    for fs in "$@"; do
        SRC=$T/m/$fs REPL_DST=tank/dst${fs#tank/src} same_as_source f
    done
}

assert_fails CA replication create bad -r --mysql-socket /x.sock --source tank/src --target "$TARGET/tank/dst"
assert_ok CA replication create r1 -r --source tank/src --target "$TARGET/tank/dst" \
    --schedule 1h --keep "1h:every 5m" --bwlimit 20M --paused
note "a full cycle of the tree"
assert_ok CA replication run r1 >/dev/null
all_same "${MEMBERS[@]}"
snaps=$(CA list -H -t snapshot -o name -r tank/src | grep -c "@repl-r1-")
assert_eq "$snaps" 3 "one snapshot of each member"
assert_eq "$(CA list -H -t snapshot -o name -r tank/src | sed 's/.*@//' | sort -u | wc -l)" 1 \
    "all at the same point (one name)"
assert_contains "$(CA replication list -H r1 | cut -f2)" "tank/src (-r, 3 datasets)" "listed once with its members"

note "a child created between cycles"
assert_ok CA create tank/src/b
mount_src tank/src/b
MEMBERS+=(tank/src/b)
sync
assert_ok CA replication run r1 >/dev/null
all_same "${MEMBERS[@]}"
assert_eq "$(CA replication status -H r1 | wc -l)" 4 "status: a row per member"

note "kill -9 of the source in the middle of a member's transfer"
head -c 96M /dev/urandom >"$T/m/tank/src/a/f"
sync
REPL_DST=tank/dst/a kill_mid_transfer A 0.3
run_until_ok A r1
assert_contains "$out" "resumed the interrupted transfer" "resumed after the kill -9"
all_same "${MEMBERS[@]}"

note "a child destroyed on the source stays on the target"
assert_ok CA unmount tank/src/b
# The relationship holds its newest snapshot (its next increment needs it): a
# destroy is refused with the command that releases it, which the admin runs.
held=$(CA list -H -t snapshot -o name tank/src/b | tail -n 1)
assert_fails CA destroy -r tank/src/b
assert_contains "$LAST_STDERR" "cachalot release repl:r1 $held" "the refusal names the release command"
assert_contains "$LAST_STDERR" "replication relationship 'r1''s newest snapshot in common" \
    "the refusal says what the hold is for"
assert_ok CA release repl:r1 "$held"
assert_ok CA destroy -r tank/src/b
assert_ok CA replication run r1 >/dev/null
assert_ok CB list tank/dst/b >/dev/null
st=$(CA replication status -H r1)
assert_contains "$(grep tank/src/b <<<"$st")" "gone (kept on target)" "status names the gone member"
assert_contains "$(CA replication list -H -v r1)" "member 'tank/src/b' was destroyed on the source" "list -v says so"

note "an error names the member"
assert_ok CB snapshot tank/dst/a/g@mine
assert_fails CA replication run r1
assert_contains "$LAST_STDERR" "member 'tank/src/a/g'" "the refusal names the member"

for fs in tank/src/a/g tank/src/a tank/src; do assert_ok CA unmount "$fs"; done
stop_node A
stop_node B
echo PASS
