#!/usr/bin/env bash
# timeout: 240
# Cascade A -> B -> C: three daemons (A and C in one network namespace, B in
# another, joined by a veth pair). B receives tank/dst from A (r1) and relays
# it to C (r2) without a snapshot of its own, so A's next cycle still applies
# on B; C reads A's data back (sha256); a kill -9 of B in the middle of its
# transfer to C resumes from C's token at B's next cycle, and the chain then
# goes on; relaying a tree is refused with one line, changing nothing.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/e2e/repl_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/repl_lib.sh"

repl_link_up
start_node A "$NSA"
start_node B "$NSB" --replication "$TARGET"
TARGET_C=$IPA:$((PORT + 2))
start_node C "$NSA" --replication "$TARGET_C"
CC() { cli C "$@"; }
assert_ok CA pool create -s 2G tank "$T/a.img"
assert_ok CB pool create -s 2G tank "$T/b.img"
assert_ok CC pool create -s 2G tank "$T/c.img"
repl_pair
tok=$(assert_ok CC replication pair)
assert_ok CB replication pair "$TARGET_C" "$tok" >/dev/null

source_on_a
mkdir -p "$T/c"
head -c 16M /dev/urandom >"$SRC/f0"
sync
assert_ok CA replication create r1 --source tank/src --target "$TARGET/tank/dst" --keep "1h:every 1s" --paused
assert_ok CA replication run r1 >/dev/null
# C keeps one snapshot an hour of what A sends (and the newest, held).
assert_ok CB replication create r2 --source tank/dst --target "$TARGET_C/tank/relay" --keep "1h:every 1h" \
    --bwlimit 20M --paused

# same_on_c FILE...: C's newest snapshot is A's newest, and its FILEs and
# listing equal A's (sha256).
same_on_c() {
    local snap
    snap=$(CC list -H -t snapshot -o name tank/relay | tail -n 1)
    snap=${snap#*@}
    assert_eq "$snap" "$(CA list -H -t snapshot -o name tank/src | tail -n 1 | cut -d@ -f2)" "C's newest snapshot is A's"
    assert_ok CC mount tank/relay "$T/c"
    diff <(cd "$SRC/.cachalot/snapshot/$snap" && ls -l && sha256sum -- "$@") \
        <(cd "$T/c/.cachalot/snapshot/$snap" && ls -l && sha256sum -- "$@") ||
        fail "C's $snap differs from A's"
    assert_ok CC unmount tank/relay
    note "C's $snap matches A's (sha256)"
}

note "B relays what it received: no snapshot of its own, A's next cycle still applies"
assert_ok CB replication run r2 >/dev/null
same_on_c f0
[[ $(CB list -H -t snapshot -o name tank/dst) != *repl-r2-* ]] || fail "B took a snapshot of its own"
for i in 1 2; do
    head -c 8M /dev/urandom >"$SRC/f$i"
    sync
    assert_ok CA replication run r1 >/dev/null
    assert_ok CB replication run r2 >/dev/null
    same_on_c f0 "f$i"
done
out=$(assert_ok CB replication run r2 2>&1)
assert_contains "$out" "nothing new from upstream" "a cycle with nothing new"
assert_eq "$(CB holds -H "$(CB list -H -t snapshot -o name tank/dst | tail -n 1)" | cut -f2 | sort | tr '\n' ' ')" \
    "repl:r1 repl:r2 " "B's newest snapshot held by both relationships"

note "kill -9 of B in the middle of its transfer to C"
head -c 96M /dev/urandom >"$SRC/big"
sync
assert_ok CA replication run r1 >/dev/null
token_c() { CC get -H -o value receive_resume_token tank/relay 2>/dev/null || true; }
has_token_c() { [[ $(token_c) == 1-* ]]; }
CB replication run r2 >/dev/null 2>&1 &
run_pid=$!
wait_until 30 "a checkpoint on C" has_token_c
sleep 1
kill9_node B
wait "$run_pid" 2>/dev/null || true
restart_node B
run_until_ok B r2
assert_contains "$out" "resumed the interrupted transfer" "B's next cycle resumes"
assert_eq "$(token_c)" "-" "no token on C after the resumed cycle"
same_on_c f0 big
head -c 4M /dev/urandom >"$SRC/after"
sync
assert_ok CA replication run r1 >/dev/null
assert_ok CB replication run r2 >/dev/null
same_on_c f0 big after

note "C's retention keeps A's snapshots by r2's grid (one an hour), A's by r1's (all)"
nc=$(CC list -H -t snapshot -o name tank/relay | wc -l)
na=$(CA list -H -t snapshot -o name tank/src | wc -l)
note "snapshots: A $na, C $nc"
((na >= 5 && nc >= 1 && nc <= 3)) || fail "C keeps $nc snapshots, A $na (expected A >= 5, C 1 to 3)"

note "relaying a tree is refused with one line; nothing changes"
assert_ok CB replication create r3 --source tank/dst --target "$TARGET_C/tank/tree" -r --paused
before=$(CB list -H -t snapshot -o name tank/dst)
assert_fails CB replication run r3
assert_contains "$LAST_STDERR" "replication r3" "tree relay"
assert_contains "$LAST_STDERR" "a cascade relays one filesystem" "tree relay"
assert_eq "$(CB list -H -t snapshot -o name tank/dst)" "$before" "B unchanged"
assert_fails CC list tank/tree

stop_node A
stop_node B
stop_node C
