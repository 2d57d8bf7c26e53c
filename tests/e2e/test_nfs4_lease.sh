#!/usr/bin/env bash
# timeout: 300
# Issue 14: a dead client's locks are released when its lease expires. Two QEMU
# guests, each its own NFSv4.1 client, against one share of our daemon (lease
# 15 s, `serve --nfs4-lease`): the holder takes a whole-file lock; the waiter
# sees it held; the host then kills the holder's whole QEMU (no CLOSE, no LOCKU,
# no renewals). The lock must stay held for a while (the lease) and then be
# granted to the waiter once the server expires the dead client; nfs.locks
# shows the expired lease. Guest side: tests/e2e/guest/nfs4_lease.sh.
source "$(dirname "${BASH_SOURCE[0]}")/guest_lib.sh"
guest_private_namespaces "$@"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
guest_lib_init

C=$CACHALOT
LEASE=15
T=$(mktmp)
mkdir -p "$T/results"
chmod 777 "$T/results"
SERVE_ARGS="--nfs 0.0.0.0:2049 --portmap off --nfs4-lease $LEASE"
export SERVE_ARGS
start_daemon
assert_contains "$(cat "$ARTIFACTS/daemon.log")" "lease $LEASE s"
D=$(mktmp)
assert_ok "$C" pool create -s 1G tank "$D/d0" >/dev/null
assert_ok "$C" create -o "sharenfs=rw=127.0.0.1:198.51.100.0/24,no_root_squash" tank/db

note "booting two guests"
run_role() { # role name [runner options]
    guest_role "$1" "$2" "$GUEST_LIB_DIR/guest/nfs4_lease.sh" --timeout 240 "${@:3}" \
        --share "$T/results" --env RESULTS="$T/results" --env NFS_EXPORT=/tank/db
}
start=$(date +%s)
run_role holder guest-holder --tap &
holder_pid=$!
run_role waiter guest-waiter &
waiter_pid=$!
if wait_file "$T/results/conflict" 200 "$waiter_pid"; then
    note "the waiter saw the conflict: killing the holder's guest"
    kill -TERM "$holder_pid"
    wait "$holder_pid" || true
    touch "$T/results/killed"
fi
waiter_rc=0
wait "$waiter_pid" || waiter_rc=$?
note "guests done in $(($(date +%s) - start)) s (waiter exit $waiter_rc)"
cat "$ARTIFACTS/output-holder.log" "$ARTIFACTS/output-waiter.log"
assert_eq "$(cat "$T/results/waiter" 2>/dev/null || echo "waiter FAIL no result")" "waiter ok" \
    "the waiter's verdict"
after=$(cat "$T/results/granted-after")
note "lock granted $after s after the holder's guest died (lease $LEASE s)"
# Not at once (the server must not drop a live-looking client), and not much
# later than a lease after the client's last renewal.
((after >= 2)) || fail "the lock was released $after s after the kill: before the lease ran out"
((after <= LEASE + 10)) || fail "the lock was released only after $after s (lease $LEASE s)"
locks=$("$C" analytics show nfs.locks --by event -H 2>&1 || true)
echo "$locks"
assert_contains "$locks" "expired" "nfs.locks counts the expired lease"
assert_contains "$locks" "conflict" "nfs.locks counts the conflict"
stop_daemon
assert_eq "$DAEMON_EXIT" 0 "clean exit"
echo "NFSv4.1: a dead client's lock released when its lease expired ($after s)"
