#!/usr/bin/env bash
# timeout: 180
# Replication fault soak: REPL_SOAK=N cycles (default 3 here; e.g. 100 by
# hand) of a relationship between two appliances in network namespaces over a
# veth (repl_lib.sh). Each cycle rewrites one of three 48 MiB files on the
# source (a resume checkpoint comes every 32 MiB) and runs a cycle with a fault
# in the middle of its transfer, in turn:
# kill -9 of the sender, kill -9 of the receiver, the veth set down (and up).
# Then cycles are run again, without any manual fix, until one succeeds; the
# target's newest snapshot must equal the source's (sha256 of every file), and
# the relationship must show no last error. (Created paused: cycles by hand.)
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/e2e/repl_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/repl_lib.sh"

N=${REPL_SOAK:-3}
repl_push_nodes
repl_pair
assert_ok CA create tank/src
SRC=$T/src
mkdir -p "$SRC"
assert_ok CA mount tank/src "$SRC"
FILES=(f0 f1 f2)
for f in "${FILES[@]}"; do head -c 4M /dev/urandom >"$SRC/$f"; done
sync
# A bandwidth limit keeps each transfer long enough to be cut in its middle.
assert_ok CA replication create r1 --source tank/src --target "$TARGET/tank/dst" \
    --schedule 1h --keep "1h:every 5m" --bwlimit 20M --paused
assert_ok CA replication run r1 >/dev/null

# link_cut_mid_transfer: a cycle whose link goes down after a checkpoint.
link_cut_mid_transfer() {
    local run_pid
    CA replication run r1 >/dev/null 2>&1 &
    run_pid=$!
    wait_token
    ip -n "$NSA" link set "vA$$" down
    wait "$run_pid" 2>/dev/null && fail "a cycle over a cut link succeeded"
    ip -n "$NSA" link set "vA$$" up
}

faults=(sender receiver link)
for ((c = 1; c <= N; c++)); do
    fault=${faults[$(((c - 1) % 3))]}
    f=${FILES[$((c % 3))]}
    head -c 48M /dev/urandom >"$SRC/$f"
    sync
    case $fault in
    sender) kill_mid_transfer A 0.3 ;;
    receiver) kill_mid_transfer B 0.3 ;;
    link) link_cut_mid_transfer ;;
    esac
    # The receiver notices a cut link within its timeout; until then a cycle
    # is refused and changes nothing. No manual fix in between.
    note "cycle $c ($fault): runs until one succeeds"
    run_until_ok A r1
    same_as_source "${FILES[@]}"
    assert_eq "$(CA debug call repl.list '{"name":"r1"}' | jq -r '.[0].last_error')" null \
        "last error after cycle $c"
    note "cycle $c/$N ($fault) at ${SECONDS}s: $out"
done

assert_ok CA unmount tank/src
stop_node A
stop_node B
echo PASS
