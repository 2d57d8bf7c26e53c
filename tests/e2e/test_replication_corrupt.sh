#!/usr/bin/env bash
# timeout: 180
# A stream corrupted between two appliances is refused, changes nothing, and
# the next cycle succeeds. Two daemons in network namespaces joined by a veth
# pair, A pushing to B through a TCP forwarder in B's namespace
# (flip_proxy.py), which can invert one byte in flight:
# 1. the link flips a byte of the TLS records: B's TLS record check fails, the
#    cycle fails with one line saying the data was corrupted in transit;
# 2. the stream itself carries a wrong byte (A's sender corrupts it before
#    TLS, `debug.repl_corrupt`, which needs `serve --allow-fault-injection`):
#    B's stream checksum refuses it with one line naming the relationship, the
#    target dataset and the snapshot.
# Each time B keeps its last good snapshot (the same list, its files equal to
# the source's) and the next cycle resumes from B's checkpoint and succeeds.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/e2e/repl_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/repl_lib.sh"

repl_link_up
start_node A "$NSA" --allow-fault-injection
start_node B "$NSB" --replication "$TARGET"
assert_ok CA pool create -s 2G tank "$T/a.img"
assert_ok CB pool create -s 2G tank "$T/b.img"
PROXY=$IPB:$((PORT + 1))
ARM=$T/arm
nsenter --net="/run/netns/$NSB" python3 "$(dirname "${BASH_SOURCE[0]}")/flip_proxy.py" \
    "$PROXY" "$TARGET" "$ARM" 2>>"$ARTIFACTS/proxy.log" &
PROXY_PID=$!
stop_proxy() { kill "$PROXY_PID" 2>/dev/null; }
REPL_CLEANUP_HOOKS+=(stop_proxy)
proxy_up() { nsenter --net="/run/netns/$NSB" bash -c "exec 3<>/dev/tcp/${PROXY%:*}/${PROXY#*:}" 2>/dev/null; }
wait_until 10 "the forwarder listens" proxy_up

# A pairs with B and replicates to it through the forwarder.
tok=$(assert_ok CB replication pair)
assert_ok CA replication pair "$PROXY" "$tok" >/dev/null
source_on_a
head -c 8M /dev/urandom >"$SRC/base"
sync
assert_ok CA replication create r1 --source tank/src --target "$PROXY/tank/dst" --keep "" --paused
assert_ok CA replication run r1 >/dev/null
same_as_source base
good=$(CB list -H -t snapshot -o name tank/dst)

# corrupted_cycle WHAT CHECK...: a cycle of r1 over 64 MiB of new data with
# a corruption armed; it must fail with a line containing every CHECK, leave
# B's snapshots as they were, and the next cycle must resume and succeed.
n=0
corrupted_cycle() {
    local what=$1 out
    shift
    n=$((n + 1))
    head -c 64M /dev/urandom >"$SRC/new$n"
    sync
    assert_fails CA replication run r1
    note "$what: $LAST_STDERR"
    for check in "$@"; do assert_contains "$LAST_STDERR" "$check" "$what"; done
    [[ $(wc -l <<<"$LAST_STDERR") == 1 ]] || fail "$what: more than one line: $LAST_STDERR"
    assert_eq "$(CB list -H -t snapshot -o name tank/dst)" "$good" "$what: B's snapshots"
    same_as_source base
    run_until_ok A r1
    assert_contains "$out" "resumed the interrupted transfer" "$what: the next cycle resumes"
    same_as_source base "new$n"
    good=$(CB list -H -t snapshot -o name tank/dst)
}

note "the link flips a byte at 40 MiB into the connection"
echo $((40 << 20)) >"$ARM"
corrupted_cycle "a byte flipped on the link" "replication r1" "corrupted in transit"
[[ -f $ARM.done && ! -f $ARM ]] || fail "the forwarder did not flip a byte"
note "forwarder: $(cat "$ARM.done")"

note "the sender's stream carries a wrong byte at 40 MiB"
assert_ok CA debug call debug.repl_corrupt "{\"offset\": $((40 << 20))}" >/dev/null
corrupted_cycle "a corrupt stream" "replication r1" "tank/dst" "tank/src@repl-r1-" "checksum"

note "without fault injection the hook is refused"
assert_fails CB debug call debug.repl_corrupt '{"offset": 0}'
assert_contains "$LAST_STDERR" "fault injection is off" "hook refused"

stop_node A
stop_node B
