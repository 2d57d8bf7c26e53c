#!/usr/bin/env bash
# timeout: 300
# Issue 14: two QEMU guests at once, each its own NFSv4.1 client (run-in-guest.sh
# --name), against one share of OUR daemon: a whole-file lock (flock(1), sent by
# the Linux client as a byte-range LOCK) held by one blocks the other until it is
# released, then the other gets it. Guest side: tests/e2e/guest/locks.sh (the same
# script test_guest_two_clients.sh runs against NFS-Ganesha). The holder comes
# over a tap (its own address), the waiter through QEMU's user networking.
source "$(dirname "${BASH_SOURCE[0]}")/guest_lib.sh"
guest_private_namespaces "$@"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
guest_lib_init

C=$CACHALOT
T=$(mktmp)
mkdir -p "$T/results"
chmod 777 "$T/results"
# 0.0.0.0: the holder's tap reaches the host side of its own /30.
SERVE_ARGS="--nfs 0.0.0.0:2049 --portmap off"
export SERVE_ARGS
start_daemon
D=$(mktmp)
assert_ok "$C" pool create -s 1G tank "$D/d0" >/dev/null
assert_ok "$C" create -o "sharenfs=rw=127.0.0.1:198.51.100.0/24,no_root_squash" tank/export

note "booting two guests"
run_role() { # role name [runner options]
    guest_role "$1" "$2" "$GUEST_LIB_DIR/guest/locks.sh" --timeout 240 "${@:3}" \
        --share "$T/results" --env RESULTS="$T/results" --env NFS_EXPORT=/tank/export
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
assert_contains "$(cat "$T/results/holder-address")" "198.51.100." "the holder's address"
# The server counted the conflict and the grants (nfs.locks).
locks=$("$C" analytics show nfs.locks --by event -H 2>&1 || true)
echo "$locks"
assert_contains "$locks" "conflict" "nfs.locks counts the conflict"
assert_contains "$locks" "grant" "nfs.locks counts grants"
stop_daemon
assert_eq "$DAEMON_EXIT" 0 "clean exit"
assert_eq "$holder_rc.$waiter_rc" 0.0 "exit status of the two guests"
echo "two NFSv4.1 clients against cachalot: lock conflict seen, lock granted after release"
