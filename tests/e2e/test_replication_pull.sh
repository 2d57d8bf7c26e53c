#!/usr/bin/env bash
# timeout: 180
# Pull replication (`replication create --pull`, kept on the target B, which
# starts each cycle against the source A's listener), between two appliances
# in network namespaces over a veth (repl_lib.sh): refused while B is not
# paired with A, for a name A pushes, and into a target with no snapshot in
# common (nothing changed; resync too); a full cycle and a later write replicate (sha256);
# a kill -9 of the source, then of the target, in the middle of a transfer:
# the next cycle resumes from B's token and the files match. The source lists
# the pull it serves ("pulled-by B", last sync, the snapshot it holds; also in
# GET /api/v1/replication) and
# forgets it, releasing that hold, with `replication destroy`. A recursive pull
# (-r --pull) replicates a tree member by member, a child created between
# cycles included; both sides show each member's status and hold each
# member's newest snapshot; destroy on either side releases every member's.
# resync and reverse run on B, which keeps the pull: after `break` and a
# write on B, resync lists what it destroys and refuses without -f, -f rolls
# B back and cycles resume; after another break, reverse lists A's own
# snapshot and refuses without -f; -f rolls A back, A forgets the pull, and B
# keeps p1 as a push toward A's listener, whose cycle brings B's write to A.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/e2e/repl_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/repl_lib.sh"

SOURCE=$IPA:$PORT
REPL_REL=p1
REPL_RUNNER=B
repl_link_up
start_node A "$NSA" --replication "$SOURCE" --http 127.0.0.1:0
start_node B "$NSB"
assert_ok CA pool create -s 2G tank "$T/a.img"
assert_ok CB pool create -s 2G tank "$T/b.img"
source_on_a
FILES=(f0 f1)
for f in "${FILES[@]}"; do head -c 4M /dev/urandom >"$SRC/$f"; done
sync

note "refusals: not paired; a pushed name; no common snapshot"
# A bandwidth limit keeps each transfer long enough to be cut in its middle.
assert_ok CB replication create p1 --pull --source "$SOURCE/tank/src" --target tank/dst \
    --schedule 1h --keep "1h:every 5m" --bwlimit 20M --paused
assert_eq "$(CB replication list -H p1 | cut -f2,3)" "$SOURCE/tank/src	tank/dst" "pull listed"
assert_fails CB replication run p1
assert_contains "$LAST_STDERR" "not paired with $SOURCE" "unpaired source"
tok=$(assert_ok CA replication pair)
assert_ok CB replication pair "$SOURCE" "$tok" >/dev/null
assert_ok CA create tank/other
assert_ok CA replication create p1 --source tank/other --target "$IPB:$PORT/tank/x" --paused
assert_fails CB replication run p1
assert_contains "$LAST_STDERR" "replication p1: this appliance has a push relationship of that name" \
    "pushed name"
assert_ok CA replication destroy p1
[[ -z $(CA replication list -H) ]] || fail "a refused pull is listed on the source: $(CA replication list -H)"
assert_ok CB create tank/lone
assert_ok CB snapshot tank/lone@mine
assert_ok CB replication create p2 --pull --source "$SOURCE/tank/src" --target tank/lone --paused
assert_fails CB replication run p2
assert_contains "$LAST_STDERR" "no snapshot in common with 'tank/src'" "no common snapshot"
assert_contains "$LAST_STDERR" "target $IPB/tank/lone" "the refusal names the target"
assert_fails CB replication resync -f p2
assert_contains "$LAST_STDERR" "'tank/lone' has no snapshot in common with the source $SOURCE/tank/src" \
    "resync of a pull without a common snapshot"
assert_eq "$(CB list -H -t snapshot -o name tank/lone)" "tank/lone@mine" "target unchanged"
assert_eq "$(CA list -H -t snapshot -o name tank/src | grep -c repl-p2 || true)" 0 \
    "no source snapshot for a refused pull"

note "a full cycle, then a later write"
assert_ok CB replication run p1 >/dev/null
same_as_source "${FILES[@]}"
echo later >"$SRC/f2"
FILES+=(f2)
sync
assert_ok CB replication run p1 >/dev/null
same_as_source "${FILES[@]}"
newest=$(CB list -H -t snapshot -o name tank/dst | tail -n 1)
assert_eq "$(CB holds -H "$newest" | cut -f2)" "repl:p1" "target hold"
assert_eq "$(CA holds -H "tank/src@${newest#*@}" | cut -f2)" "repl:p1" "source hold"

note "the source lists the pull it serves, with the snapshot it holds"
row=$(CA replication list -H p1)
IFS=$'\t' read -r name src dst state _lag last _bytes _rate role <<<"$row"
assert_eq "$name|$src|$dst|$state|$role" "p1|tank/src|$IPB/tank/dst|idle|pulled-by $IPB" "source's row"
[[ $last != - ]] || fail "the source's row has no last sync: $row"
assert_eq "$(CA debug call repl.list '{"name":"p1"}' | jq -r '.[0].held')" \
    "tank/src@${newest#*@}" "the snapshot the source holds for it"
rest=$(nsenter --net="/run/netns/$NSA" curl -sSf "http://$(cat "$(node_home A)/http.addr")/api/v1/replication") ||
    fail "GET /api/v1/replication on A failed"
assert_eq "$(jq -r '.[] | select(.name == "p1") | [.role, .source, .target, .held, .state] | @tsv' <<<"$rest")" \
    "pulled-by $IPB	tank/src	$IPB/tank/dst	tank/src@${newest#*@}	idle" "the REST list's row of the served pull"
assert_fails CA replication run p1
assert_contains "$LAST_STDERR" "pulled by $IPB, which starts and manages its cycles" "run on the source"
assert_fails CA replication create p1 --source tank/other --target "$IPB:$PORT/tank/x"
assert_contains "$LAST_STDERR" "'p1' is the name of a pull of 'tank/src' by $IPB served here" \
    "a push may not take a served pull's name"

# kill9_resume NODE: a cycle cut by a kill -9 of NODE after a checkpoint; the
# next cycle resumes the transfer and the target equals the source.
kill9_resume() {
    head -c 96M /dev/urandom >"$SRC/f0"
    sync
    kill_mid_transfer "$1" 0.3
    run_until_ok B p1
    assert_contains "$out" "resumed the interrupted transfer" "resumed after a kill -9 of $1"
    same_as_source "${FILES[@]}"
    assert_eq "$(CB debug call repl.list '{"name":"p1"}' | jq -r '.[0].last_error')" null \
        "last error after the kill -9 of $1"
}
note "kill -9 of the source mid-transfer"
kill9_resume A
note "kill -9 of the target mid-transfer"
kill9_resume B

note "break and resync of the pull, on B: B's own snapshot is listed, destroyed only with -f"
out=$(assert_ok CB replication break p1)
assert_contains "$out" "broken off: tank/dst is no longer updated" "break names the target here"
assert_eq "$(CB replication list -H p1 | cut -f4)" "broken" "state after break"
assert_fails CB replication run p1
assert_contains "$LAST_STDERR" "broken off" "run of a broken pull"
mkdir -p "$T/dst"
assert_ok CB mount tank/dst "$T/dst"
echo "written on B after the break" >"$T/dst/on-b"
assert_ok CB unmount tank/dst
assert_ok CB snapshot tank/dst@after-break
assert_fails CB replication resync p1
assert_contains "$LAST_STDERR" "tank/dst@after-break" "resync names what it would destroy"
assert_contains "$LAST_STDERR" "resync -f p1" "resync names the command that would"
assert_contains "$(CB list -H -t snapshot -o name tank/dst)" "tank/dst@after-break" "refused resync kept it"
out=$(assert_ok CB replication resync -f p1)
assert_contains "$out" "destroyed: tank/dst@after-break" "resync -f"
[[ $(CB list -H -t snapshot -o name tank/dst) != *after-break* ]] || fail "resync -f kept tank/dst@after-break"
assert_ok CB replication run p1 >/dev/null
same_as_source "${FILES[@]}"

note "the source forgets the pull: its hold goes; the next pull records it again"
held=$(CA debug call repl.list '{"name":"p1"}' | jq -r '.[0].held')
assert_ok CA replication destroy p1
assert_fails CA replication list p1
assert_eq "$(CA holds -H "$held")" "" "hold released by destroy on the source"
assert_ok CB replication run p1 >/dev/null
assert_eq "$(CA replication list -H p1 | cut -f9)" "pulled-by $IPB" "listed again after a pull"

note "a recursive pull (-r --pull): the tree under A's tank/tree into B's tank/tcopy"
TREE=(tank/tree tank/tree/a tank/tree/a/g)
for fs in "${TREE[@]}"; do
    assert_ok CA create "$fs"
    mkdir -p "$T/m/$fs"
    assert_ok CA mount "$fs" "$T/m/$fs"
    head -c 1M /dev/urandom >"$T/m/$fs/f"
done
sync
# tree_same FS...: each member's newest snapshot on B equals A's (sha256).
tree_same() {
    local fs
    for fs in "$@"; do
        SRC=$T/m/$fs REPL_DST=tank/tcopy${fs#tank/tree} same_as_source f
    done
}
assert_ok CB replication create pt -r --pull --source "$SOURCE/tank/tree" --target tank/tcopy \
    --schedule 1h --keep "1h:every 5m" --paused
assert_ok CB replication run pt >/dev/null
tree_same "${TREE[@]}"
assert_ok CA create tank/tree/b
mkdir -p "$T/m/tank/tree/b"
assert_ok CA mount tank/tree/b "$T/m/tank/tree/b"
echo new >"$T/m/tank/tree/b/f"
TREE+=(tank/tree/b)
sync
assert_ok CB replication run pt >/dev/null
tree_same "${TREE[@]}"
newest=$(CB list -H -t snapshot -o name tank/tcopy | tail -n 1)
for fs in "${TREE[@]}"; do
    assert_eq "$(CA holds -H "$fs@${newest#*@}" | cut -f2)" "repl:pt" "source hold of $fs"
    assert_eq "$(CB holds -H "tank/tcopy${fs#tank/tree}@${newest#*@}" | cut -f2)" "repl:pt" \
        "target hold of the copy of $fs"
done
# Each member's status on both sides: the puller's and the source's record.
members="tank/tree	tank/tcopy	ok
tank/tree/a	tank/tcopy/a	ok
tank/tree/a/g	tank/tcopy/a/g	ok
tank/tree/b	tank/tcopy/b	ok"
assert_eq "$(CB replication status -H pt | cut -f1-3)" "$members" "members on the target"
assert_eq "$(CA replication status -H pt | cut -f1-3)" "$members" "members on the source"
assert_eq "$(CA replication list -H pt | cut -f9)" "pulled-by $IPB" "the source lists the recursive pull"
assert_eq "$(CA debug call repl.list '{"name":"pt"}' | jq -r '.[0].recursive')" true \
    "the source's record is recursive"
assert_ok CA replication destroy pt
for fs in "${TREE[@]}"; do
    assert_eq "$(CA holds -H "$fs@${newest#*@}")" "" "forgetting the pull released $fs's hold"
done
assert_ok CB replication destroy pt
assert_eq "$(CB holds -H "tank/tcopy/a/g@${newest#*@}")" "" "destroying the pull released the copies' holds"
for ((i = ${#TREE[@]} - 1; i >= 0; i--)); do assert_ok CA unmount "${TREE[$i]}"; done

note "break and reverse of the pull, on B: A rolled back only with -f; B pushes p1 to A's listener"
assert_ok CB replication break p1
diverge_for_failback
assert_fails CB replication reverse --address "$IPB:$PORT" p1
assert_contains "$LAST_STDERR" "reversed toward the listener it pulls from ($SOURCE)" "reverse with another address"
assert_fails CB replication reverse p1
assert_contains "$LAST_STDERR" "reverse would destroy on $SOURCE: tank/src@mine-a" "reverse names what A would lose"
assert_eq "$(CB replication list -H p1 | cut -f9)" "pull" "a refused reverse keeps B's pull"
assert_eq "$(CA replication list -H p1 | cut -f9)" "pulled-by $IPB" "a refused reverse keeps A's served pull"
assert_contains "$(CA list -H -t snapshot -o name tank/src)" "tank/src@mine-a" "a refused reverse kept A's snapshot"
out=$(assert_ok CB replication reverse -f p1)
assert_contains "$out" "destroyed: tank/src@mine-a" "reverse -f lists what it destroyed"
assert_contains "$out" "tank/dst now replicates to $SOURCE/tank/src" "reverse -f"
assert_eq "$(CB replication list -H p1 | cut -f2,3,9)" "tank/dst	$SOURCE/tank/src	push" "B pushes p1 after the reverse"
assert_fails CA replication list p1
assert_ok CB replication run p1 >/dev/null
assert_ok CA mount tank/src "$SRC"
assert_eq "$(cat "$SRC/failback")" "written on B after the failover" "B's write reached A"
[[ ! -e $SRC/lost ]] || fail "A's own write survived the rollback"
newest=$(CB list -H -t snapshot -o name tank/dst | tail -n 1)
assert_eq "$(CA holds -H "tank/src@${newest#*@}" | cut -f2)" "repl:p1" "A holds the reversed cycle's snapshot"

assert_ok CA unmount tank/src
stop_node A
stop_node B
echo PASS
