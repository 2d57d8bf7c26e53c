#!/usr/bin/env bash
# timeout: 480
# Issue 14: two MariaDB servers must not open one data directory over NFSv4.1.
# Two QEMU guests, each its own NFSv4.1 client, mount one share of our daemon
# (lease 15 s). The first runs MariaDB there; a second MariaDB started on the same
# data directory from the other client is refused (InnoDB's and Aria's locks are
# NFSv4 locks held by the first client). The host kills the first guest's whole
# QEMU: once its lease expires the server drops its locks, and the second
# MariaDB starts, recovers what the first left, and CHECK TABLE is clean.
# Guest side: tests/e2e/guest/nfs4_mariadb_lock.sh.
source "$(dirname "${BASH_SOURCE[0]}")/guest_lib.sh"
guest_private_namespaces "$@"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
guest_lib_init

for tool in mariadbd mariadb-install-db; do
    command -v "$tool" >/dev/null || fail "$tool not installed (scripts/install-deps.sh test)"
done
C=$CACHALOT
LEASE=15
T=$(mktmp)
mkdir -p "$T/results"
chmod 777 "$T/results"
SERVE_ARGS="--nfs 0.0.0.0:2049 --portmap off --nfs4-lease $LEASE"
export SERVE_ARGS
start_daemon
D=$(mktmp)
assert_ok "$C" pool create -s 2G tank "$D/d0" >/dev/null
assert_ok "$C" create -o recordsize=16K -o "sharenfs=rw=127.0.0.1:198.51.100.0/24,no_root_squash" tank/db

note "booting two guests"
run_role() { # role name [runner options]
    guest_role "$1" "$2" "$GUEST_LIB_DIR/guest/nfs4_mariadb_lock.sh" --timeout 420 --mem 1024 \
        "${@:3}" --share "$T/results" --env RESULTS="$T/results" --env NFS_EXPORT=/tank/db
}
start=$(date +%s)
run_role first guest-first --tap &
first_pid=$!
run_role second guest-second &
second_pid=$!
if wait_file "$T/results/refused" 400 "$second_pid"; then
    note "the second MariaDB was refused: killing the first guest"
    kill -TERM "$first_pid"
    wait "$first_pid" || true
    touch "$T/results/killed"
fi
second_rc=0
wait "$second_pid" || second_rc=$?
kill -TERM "$first_pid" 2>/dev/null || true
note "guests done in $(($(date +%s) - start)) s (second exit $second_rc)"
cat "$ARTIFACTS/output-first.log" "$ARTIFACTS/output-second.log"
cp "$T"/results/*-error.log "$ARTIFACTS/" 2>/dev/null || true
assert_eq "$(cat "$T/results/second" 2>/dev/null || echo "second FAIL no result")" "second ok" \
    "the second guest's verdict"
echo "refused with: $(cat "$T/results/refusal")"
note "second MariaDB started $(cat "$T/results/started-after") s after the first guest died (lease $LEASE s)"
locks=$(assert_ok "$C" analytics show nfs.locks --by event --last 600s)
echo "$locks"
assert_contains "$locks" "conflict" "nfs.locks counts the refused lock"
assert_contains "$locks" "expired" "nfs.locks counts the dead client's expired lease"
stop_daemon
assert_eq "$DAEMON_EXIT" 0 "clean exit"
echo "NFSv4.1: a second MariaDB refused while the first client lived, started after its lease expired"
