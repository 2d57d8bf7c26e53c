#!/bin/bash
# Guest side of tests/e2e/test_nfs_mariadb_kernel.sh and test_nfs4_mariadb_kernel.sh:
# MariaDB (the host's binaries, seen through 9p) with its data directory on an NFS
# mount of OUR daemon (vers=3,proto=tcp,hard,nolock, or vers=4.1,proto=tcp,hard).
# Environment: RESULTS (host dir shared read-write), NFS_EXPORT, NFS_PORT, NFS_VERS
# (3 or 4.1), ROWS (sysbench table size), AFTER (inserts to see acknowledged after
# the daemon's restart).
#
# Phases: initialise the data directory on the share, start the server, sysbench
# prepare (1 table); then under load (sysbench oltp_read_write, 2 threads) a writer
# inserts one row per autocommit transaction and appends each id the server
# acknowledged to $RESULTS/acked. The guest asks the host to kill -9 the cachalot
# daemon ($RESULTS/kill-request; the host answers killed, then restarting) and
# keeps loading: the hard mount must recover by itself and the writer must see
# $AFTER more acknowledgements. Then CHECK TABLE, kill -9 of mariadbd too (so
# nothing the client still caches can help), unmount, drop caches, mount again,
# start MariaDB (InnoDB crash recovery from what the daemon stored), CHECK TABLE,
# and the ids present go to $RESULTS/present. "ok" or "FAIL reason" to
# $RESULTS/verdict; timings to stdout.
set -uo pipefail

: "${RESULTS:?}" "${GUEST_HOST:?}" "${NFS_EXPORT:?}" "${NFS_PORT:?}" "${ROWS:?}" "${AFTER:?}"
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
MNT=/mnt/cachalot
# NFS_VERS=4.1: the same run on an NFSv4.1 mount, with real locks (InnoDB locks
# ibdata1), reclaimed in the grace period after the daemon's restart.
case ${NFS_VERS:-3} in
    3) OPTS="vers=3,proto=tcp,hard,nolock,port=$NFS_PORT,mountport=$NFS_PORT,mountproto=tcp" ;;
    4.1) OPTS="vers=4.1,proto=tcp,hard,port=$NFS_PORT" ;;
    *) echo "FAIL NFS_VERS=$NFS_VERS" >"$RESULTS/verdict"; exit 1 ;;
esac
DATADIR=$MNT/mysql
SOCK=/run/mysqld-guest.sock
ERRLOG=$RESULTS/mariadb-error.log
# The server's options. Small redo log and buffer pool (the guest has 1 GiB and
# a 10x slower CPU); no name resolution, no performance schema. Durability
# settings stay at their defaults (flush at every commit, doublewrite on): the
# point is to test them.
MYOPTS=(--no-defaults --user=root --datadir="$DATADIR" --skip-name-resolve
    --innodb-log-file-size=16M --innodb-buffer-pool-size=64M
    --performance-schema=OFF --skip-log-bin)

now() { date +%s.%N; }
T0=$(now)
step() { echo "[nfs-mariadb $(awk -v s="$T0" -v e="$(now)" 'BEGIN { printf "%6.1f", e - s }')] $*"; }
die() {
    echo "FAIL $*" >"$RESULTS/verdict"
    step "FAIL: $*"
    [[ -f $ERRLOG ]] && tail -n 20 "$ERRLOG"
    exit 1
}
sql() { mariadb --no-defaults -S "$SOCK" -uroot -N -B -e "$*"; }
source "$(dirname "${BASH_SOURCE[0]}")/common.sh" # wait_file
server=
start_server() {
    mariadbd "${MYOPTS[@]}" --socket="$SOCK" --pid-file=/run/mysqld-guest.pid \
        --log-error="$ERRLOG" --skip-networking &
    server=$!
    local i
    for ((i = 0; i < 900; i++)); do
        sql 'SELECT 1' >/dev/null 2>&1 && return 0
        kill -0 "$server" 2>/dev/null || die "mariadbd exited while starting"
        sleep 0.2
    done
    die "mariadbd did not answer within 180 s"
}
check_tables() { # TABLES...: every table OK
    local out
    out=$(sql "CHECK TABLE $*" | awk '$3 == "status" { print $4 }' | sort -u)
    [[ $out == OK ]] || die "CHECK TABLE $*: $out"
}

mkdir -p "$MNT"
step "mount -o $OPTS $GUEST_HOST:$NFS_EXPORT"
mount -t nfs -o "$OPTS" "$GUEST_HOST:$NFS_EXPORT" "$MNT" || die "mount failed"
mkdir -p "$DATADIR" || die "mkdir $DATADIR"

step "mariadb-install-db on the share"
mariadb-install-db "${MYOPTS[@]}" --auth-root-authentication-method=normal \
    --skip-test-db >/run/install.log 2>&1 || { tail -n 20 /run/install.log; die "mariadb-install-db failed"; }
step "data directory initialised ($(find "$DATADIR" -type f | wc -l) files)"
start_server
step "server up"
sql 'CREATE DATABASE sbtest; CREATE DATABASE ack;
     CREATE TABLE ack.t (id INT PRIMARY KEY, pad VARCHAR(200)) ENGINE=InnoDB' || die "create failed"
SB=(sysbench oltp_read_write --db-driver=mysql --mysql-socket="$SOCK" --mysql-user=root
    --mysql-db=sbtest --tables=1 --table-size="$ROWS")
"${SB[@]}" prepare >/run/sb-prepare.log 2>&1 || { tail /run/sb-prepare.log; die "sysbench prepare failed"; }
step "sysbench prepared 1 x $ROWS rows"

"${SB[@]}" --threads=2 --time=600 run >/run/sb-run.log 2>&1 &
sb=$!
# One autocommit insert per client process; an id goes to acked only after the
# server said OK, so every id in acked was a durable commit.
: >"$RESULTS/acked"
(
    i=0 after=0
    while ((after < AFTER)); do
        i=$((i + 1))
        sql "INSERT INTO ack.t VALUES ($i, REPEAT('a', 200))" || { echo "insert $i failed" >"$RESULTS/writer-note"; exit 1; }
        echo "$i" >>"$RESULTS/acked"
        ((i == 5)) && touch "$RESULTS/kill-request"
        [[ -e $RESULTS/restarting ]] && after=$((after + 1))
        ((i < 100000)) || exit 1
    done
) &
writer=$!
wait_file "$RESULTS/killed" 120 || die "the host did not kill the daemon"
kill -0 "$writer" 2>/dev/null || die "the writer stopped before the daemon was killed: $(cat "$RESULTS/writer-note" 2>/dev/null)"
step "daemon killed at $(wc -l <"$RESULTS/acked") acknowledged inserts; load goes on"
wrc=0
wait "$writer" || wrc=$?
[[ $wrc -eq 0 ]] || die "the writer failed across the restart: $(cat "$RESULTS/writer-note" 2>/dev/null)"
step "writer saw $AFTER acknowledgements after the restart ($(wc -l <"$RESULTS/acked") in all)"
kill -0 "$sb" 2>/dev/null || { tail -n 20 /run/sb-run.log; die "sysbench died across the restart"; }
kill -KILL "$sb" 2>/dev/null
wait "$sb" 2>/dev/null
check_tables sbtest.sbtest1, ack.t
step "CHECK TABLE clean after the daemon's restart"

step "kill -9 of mariadbd, unmount, drop caches, mount again, crash recovery"
kill -KILL "$server"
wait "$server" 2>/dev/null
umount "$MNT" || die "umount failed"
echo 3 >/proc/sys/vm/drop_caches
mount -t nfs -o "$OPTS" "$GUEST_HOST:$NFS_EXPORT" "$MNT" || die "remount failed"
start_server
step "server up after crash recovery"
check_tables sbtest.sbtest1, ack.t
sql 'SELECT id FROM ack.t ORDER BY id' >"$RESULTS/present" || die "select failed"
step "CHECK TABLE clean; $(wc -l <"$RESULTS/present") rows in ack.t"
mariadb-admin --no-defaults -S "$SOCK" -uroot shutdown || die "shutdown failed"
wait "$server"
umount "$MNT" || die "final umount failed"
echo ok >"$RESULTS/verdict"
step "ok"
