#!/usr/bin/env bash
# timeout: 420
# Issue 13's MariaDB over NFS: in the QEMU guest, the Linux kernel's NFSv3 client
# mounts a share of OUR daemon (vers=3,proto=tcp,hard,nolock; NFS_VERS=4.1 runs
# the same over vers=4.1,proto=tcp,hard, see test_nfs4_mariadb_kernel.sh) and MariaDB (the
# host's binaries over 9p) initialises its data directory on it, prepares a
# sysbench table and runs oltp_read_write while a writer records every insert the
# server acknowledged (tests/e2e/guest/nfs_mariadb.sh). Mid-load the host kills the
# cachalot daemon with SIGKILL and restarts it on the same port: the hard mount
# recovers by itself and the load goes on. The guest then kills mariadbd too,
# remounts (no client cache) and restarts it: CHECK TABLE is clean and every
# acknowledged insert is present. lib.sh fails the test if the daemon panics or
# does not stop cleanly. One guest boot.
source "$(dirname "${BASH_SOURCE[0]}")/guest_lib.sh"
guest_private_namespaces "$@"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
guest_lib_init

for tool in mariadbd sysbench mariadb-install-db; do
    command -v "$tool" >/dev/null || fail "$tool not installed (scripts/install-deps.sh test)"
done
C=$CACHALOT
# A private network namespace: the standard port is ours alone.
NFS_PORT=2049
SERVE_ARGS="--nfs 127.0.0.1:$NFS_PORT --portmap off"
# NFS_VERS=4.1 (test_nfs4_mariadb_kernel.sh): a short lease, so the grace period
# after the restart (one lease) does not dominate the run.
NFS_VERS=${NFS_VERS:-3}
[[ $NFS_VERS == 4.1 ]] && SERVE_ARGS+=" --nfs4-lease 15"
export SERVE_ARGS

T=$(mktmp)
mkdir -p "$T/results"
chmod 777 "$T/results"

start_daemon
D=$(mktmp)
assert_ok "$C" pool create -s 2G tank "$D/d0" >/dev/null
# The guest's connections arrive through QEMU user networking, from 127.0.0.1.
# recordsize 16K: InnoDB's page size, as the recommended data layout says.
assert_ok "$C" create -o recordsize=16K -o "sharenfs=rw=127.0.0.1,no_root_squash" tank/db

note "booting the guest"
guest_start=$(date +%s)
guest_run --timeout 360 --mem 1024 --share "$T/results" \
    --env RESULTS="$T/results" --env NFS_EXPORT=/tank/db --env NFS_PORT="$NFS_PORT" \
    --env NFS_VERS="$NFS_VERS" \
    --env ROWS="${ROWS:-2000}" --env AFTER="${AFTER:-5}" \
    "$GUEST_LIB_DIR/guest/nfs_mariadb.sh" &
guest_pid=$!
if wait_file "$T/results/kill-request" 330 "$guest_pid"; then
    kill9_daemon
    touch "$T/results/killed"
    sleep 2
    touch "$T/results/restarting"
    start_daemon
    note "daemon killed and restarted $(($(date +%s) - guest_start)) s after the guest started"
fi
guest_rc=0
wait "$guest_pid" || guest_rc=$?
note "guest run: exit $guest_rc in $(($(date +%s) - guest_start)) s"
[[ -f $T/results/mariadb-error.log ]] && cp "$T/results/mariadb-error.log" "$ARTIFACTS/"

verdict=$(cat "$T/results/verdict" 2>/dev/null || echo "FAIL no verdict (guest exit $guest_rc)")
[[ $verdict == ok ]] || fail "guest: $verdict (guest output: $ARTIFACTS/guest-output.log)"
[[ $guest_rc -eq 0 ]] || fail "the guest script exited with $guest_rc"
n_acked=$(wc -l <"$T/results/acked")
((n_acked >= 10)) || fail "only $n_acked inserts acknowledged"
missing=$(comm -23 <(sort "$T/results/acked") <(sort "$T/results/present") | head -5)
[[ -z $missing ]] || fail "acknowledged inserts lost: $missing"
echo "all $n_acked acknowledged inserts present after kill -9 of the daemon and of mariadbd"

# The load went through our server: InnoDB's files show up in the NFS analytics.
ops=$(assert_ok "$C" analytics show nfs.ops --by op --last 600s)
echo "$ops"
assert_contains "$ops" "commit" "InnoDB's fsyncs arrive as NFS COMMITs"
if [[ $NFS_VERS == 4.1 ]]; then
    # InnoDB holds an fcntl lock on ibdata1: the restarted daemon saw the client
    # reclaim it (and the open) in its grace period, not take a new one.
    locks=$(assert_ok "$C" analytics show nfs.locks --by event --last 600s)
    echo "$locks"
    assert_contains "$locks" "reclaim" "InnoDB's lock was reclaimed after the restart"
fi
stop_daemon
assert_eq "$DAEMON_EXIT" 0 "clean exit"
echo "MariaDB on a kernel NFSv$NFS_VERS mount of cachalot: kill -9 recovery ok"
