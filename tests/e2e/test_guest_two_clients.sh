#!/usr/bin/env bash
# timeout: 300
# Two QEMU guests at once, each its own NFSv4 client (run-in-guest.sh --name),
# against one NFSv4.1 export of NFS-Ganesha: a lock held by one blocks the other
# until released. The template for two-client tests of our NFSv4.1 server.
source "$(dirname "${BASH_SOURCE[0]}")/guest_lib.sh"
guest_private_namespaces "$@"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
guest_lib_init

T=$(mktmp)
mkdir -p "$T/export" "$T/results"
chmod 777 "$T/results"
start_rpcbind
start_ganesha "$T/export"

note "booting two guests"
run_role() { # role name
    "$GUEST_RUNNER" --timeout 240 --name "$2" --share "$T/results" \
        --env RESULTS="$T/results" --env NFS_EXPORT=/export \
        --console "$ARTIFACTS/console-$1.log" \
        "$GUEST_LIB_DIR/guest/locks.sh" "$1" >"$ARTIFACTS/output-$1.log" 2>&1
}
start=$(date +%s)
run_role holder guest-holder &
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
assert_eq "$holder_rc.$waiter_rc" 0.0 "exit status of the two guests"
echo "two NFSv4.1 clients: lock conflict seen, lock granted after release"
