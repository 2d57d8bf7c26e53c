#!/usr/bin/env bash
# timeout: 300
# Two QEMU guests at once, each its own NFSv4 client (run-in-guest.sh --name),
# against one NFSv4.1 export of NFS-Ganesha: a lock held by one blocks the other
# until released. The holder uses a tap (--tap: its own address, seen by the
# server), the waiter QEMU's user networking (seen as 127.0.0.1). The template for
# two-client tests of our NFSv4.1 server.
source "$(dirname "${BASH_SOURCE[0]}")/guest_lib.sh"
guest_private_namespaces "$@"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
guest_lib_init

T=$(mktmp)
mkdir -p "$T/export" "$T/results"
chmod 777 "$T/results"
start_rpcbind
start_ganesha "$T/export" 2049 20048 0.0.0.0

note "booting two guests"
run_role() { # role name [runner options]
    guest_role "$1" "$2" "$GUEST_LIB_DIR/guest/locks.sh" --timeout 240 "${@:3}" \
        --share "$T/results" --env RESULTS="$T/results" --env NFS_EXPORT=/export
}
start=$(date +%s)
run_role holder guest-holder --tap &
holder_pid=$!
run_role waiter guest-waiter &
waiter_pid=$!
holder_rc=0 waiter_rc=0
wait "$holder_pid" || holder_rc=$?
wait "$waiter_pid" || waiter_rc=$?
note "both guests done in $(($(date +%s) - start)) s (exit $holder_rc, $waiter_rc)"
cat "$ARTIFACTS/output-holder.log" "$ARTIFACTS/output-waiter.log"

for role in holder waiter; do
    assert_eq "$(cat "$T/results/$role" 2>/dev/null || echo "$role FAIL no result")" "$role ok" \
        "the $role guest's verdict"
done
[[ -e $T/results/conflict ]] || fail "the waiter never saw the conflict"
# The holder came over its tap (its own address), the waiter through user networking.
assert_contains "$(cat "$T/results/holder-address")" "198.51.100." "the holder's address"
assert_eq "$(cat "$T/results/waiter-address")" 10.0.2.15 "the waiter's address"
[[ -z $(ip -o link show | grep cgtap) ]] || fail "a tap device was left behind"
assert_eq "$holder_rc.$waiter_rc" 0.0 "exit status of the two guests"
echo "two NFSv4.1 clients: lock conflict seen, lock granted after release"
