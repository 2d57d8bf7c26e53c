#!/usr/bin/env bash
# The first-run story: a file-backed pool in ./demo, the daemon, MySQL-style
# datasets (data on recordsize=16K, redo and binary logs on recordsize=128K)
# mounted over FUSE, a private MariaDB on them (127.0.0.1, its own port and
# socket) with a sysbench table loaded. Ctrl-C stops MariaDB, unmounts, stops the
# daemon (which exports the pool) and leaves everything in ./demo for the next run.
# MariaDB and the daemon run in their own sessions: Ctrl-C reaches only this
# script, which stops them in that order.
#
# The cleanup must finish even when nobody reads our output any more: with
# `make demo | tee demo.log`, Ctrl-C kills tee too, and the cleanup's first message
# would kill this script by SIGPIPE, leaving MariaDB, the mounts and the daemon
# running. So the cleanup ignores SIGPIPE (and further Ctrl-Cs), writes its messages
# to $DEMO/cleanup.log and, as far as they still work, to stdout or stderr.
#
# Settings (environment; the defaults are the demo's):
#   CACHALOT_DEMO_DIR         pool files, daemon home, mounts (./demo)
#   CACHALOT_BIN              the cachalot binary (target/release/cachalot)
#   CACHALOT_DEMO_HTTP        web UI address (127.0.0.1:7470)
#   CACHALOT_DEMO_MYSQL_PORT  MariaDB's TCP port (3307)
#   CACHALOT_DEMO_ROWS        rows of the sysbench table (100000)
# tests/e2e/test_demo_interrupt.sh runs this script with a small table.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${CACHALOT_BIN:-$PWD/target/release/cachalot}
DEMO=${CACHALOT_DEMO_DIR:-$PWD/demo}
HOME_DIR=$DEMO/home
export CACHALOT_SOCKET=$HOME_DIR/cachalot.sock
HTTP=${CACHALOT_DEMO_HTTP:-127.0.0.1:7470}
MY_PORT=${CACHALOT_DEMO_MYSQL_PORT:-3307}
ROWS=${CACHALOT_DEMO_ROWS:-100000}
MNT=$DEMO/mysql
RUN=$DEMO/run
MY_CNF=$RUN/my.cnf
MY_SOCK=$RUN/mysqld.sock
CLEANUP_LOG=$DEMO/cleanup.log
MARIADB_PID=
WORKLOAD_PID=

mkdir -p "$DEMO" "$HOME_DIR"
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

setsid "$BIN" serve --home "$HOME_DIR" --socket "$CACHALOT_SOCKET" --http "$HTTP" >"$DEMO/daemon.log" 2>&1 &
DAEMON=$!
# cleanup_say MSG: a cleanup message that cannot kill the cleanup: to the log, then
# to stdout if it still has a reader, else to stderr, else nowhere.
cleanup_say() {
    printf '%s %s\n' "$(date '+%F %T')" "$*" >>"$CLEANUP_LOG" 2>/dev/null
    say "$*" 2>/dev/null || printf '== %s\n' "$*" >&2 2>/dev/null
    return 0
}
cleanup() {
    set +e
    # Nothing may interrupt the cleanup: not a dead pipe, not a second Ctrl-C (the
    # children started from here inherit both dispositions).
    trap '' PIPE INT TERM HUP
    if [[ -n $WORKLOAD_PID ]]; then
        kill -TERM "$WORKLOAD_PID" 2>/dev/null
        wait "$WORKLOAD_PID" 2>/dev/null
    fi
    if [[ -n $MARIADB_PID ]] && kill -0 "$MARIADB_PID" 2>/dev/null; then
        cleanup_say "stopping MariaDB"
        kill -TERM "$MARIADB_PID"
        for _ in $(seq 600); do kill -0 "$MARIADB_PID" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$MARIADB_PID" 2>/dev/null
        wait "$MARIADB_PID" 2>/dev/null
    fi
    cleanup_say "unmounting and stopping the daemon (exports the pool cleanly)"
    "$BIN" unmount tank/mysql/data >>"$CLEANUP_LOG" 2>&1
    "$BIN" unmount tank/mysql/log >>"$CLEANUP_LOG" 2>&1
    kill -TERM "$DAEMON" 2>/dev/null
    wait "$DAEMON" 2>/dev/null
    cleanup_say "stopped; pool files kept in $DEMO; run 'make demo' again to re-import them"
}
trap cleanup EXIT
trap 'exit 0' INT TERM HUP

for _ in $(seq 100); do
    "$BIN" pool list >/dev/null 2>&1 && break
    kill -0 "$DAEMON" 2>/dev/null || { cat "$DEMO/daemon.log"; exit 1; }
    sleep 0.2
done

if ! "$BIN" pool list -H tank >/dev/null 2>&1; then
    say "creating pool 'tank' on a mirror of two 1G sparse files in $DEMO"
    "$BIN" pool create -s 1G tank mirror "$DEMO/disk0.img" "$DEMO/disk1.img"
    "$BIN" create -p -o recordsize=16K -o compression=lz4 -o primarycache=all tank/mysql/data
    "$BIN" create -o recordsize=128K -o logbias=throughput tank/mysql/log
    "$BIN" set com.cachalot:role=innodb-tablespaces tank/mysql/data
else
    say "pool 'tank' re-imported from $DEMO"
fi

say "pool list"
"$BIN" pool list
say "datasets"
"$BIN" list -r -o name,used,avail,refer,recordsize,compression,mountpoint tank
say "properties of tank/mysql/data"
"$BIN" get recordsize,compression,checksum,sync,logbias,primarycache,quota,used,compressratio tank/mysql/data
say "scrub"
"$BIN" pool scrub -w tank
"$BIN" pool status tank

say "mounting tank/mysql/data and tank/mysql/log under $MNT"
mkdir -p "$MNT/data" "$MNT/log" "$RUN"
for ds in data log; do
    if ! "$BIN" mount | grep -q "^tank/mysql/$ds	"; then
        "$BIN" mount "tank/mysql/$ds" "$MNT/$ds"
    fi
done
"$BIN" mount
df -h "$MNT/data" "$MNT/log"

# mysqld runs as 'mysql' when that user can reach ./demo, else as root.
MY_USER=root
if id mysql >/dev/null 2>&1 && runuser -u mysql -- test -x "$MNT"; then
    MY_USER=mysql
    chown mysql:mysql "$MNT/data" "$MNT/log" "$RUN"
fi
cat >"$MY_CNF" <<CNF
[mysqld]
datadir=$MNT/data
innodb_log_group_home_dir=$MNT/log
log-bin=$MNT/log/binlog
server-id=1
bind-address=127.0.0.1
port=$MY_PORT
socket=$MY_SOCK
pid-file=$RUN/mysqld.pid
log-error=$RUN/mariadb-error.log
user=$MY_USER
innodb_buffer_pool_size=128M
innodb_log_file_size=64M
innodb_flush_log_at_trx_commit=1
sync_binlog=1
CNF
if [[ ! -d $MNT/data/mysql ]]; then
    say "initialising a MariaDB data directory on tank/mysql/data"
    mariadb-install-db --defaults-file="$MY_CNF" --skip-test-db \
        --auth-root-authentication-method=normal >"$RUN/install-db.log" 2>&1 || {
        tail -n 20 "$RUN/install-db.log"
        exit 1
    }
fi
say "starting MariaDB on 127.0.0.1:$MY_PORT (socket $MY_SOCK)"
setsid mariadbd --defaults-file="$MY_CNF" >>"$RUN/mariadbd.out" 2>&1 &
MARIADB_PID=$!
for _ in $(seq 240); do
    mariadb -S "$MY_SOCK" -uroot -e "select 1" >/dev/null 2>&1 && break
    kill -0 "$MARIADB_PID" 2>/dev/null || { tail -n 20 "$RUN/mariadb-error.log"; exit 1; }
    sleep 0.25
done
if ! mariadb -S "$MY_SOCK" -uroot -N -e "select 1 from information_schema.tables where table_schema='sbtest' and table_name='sbtest1'" | grep -q 1; then
    say "loading a sysbench table (sbtest.sbtest1, $ROWS rows)"
    mariadb -S "$MY_SOCK" -uroot -e "create database if not exists sbtest"
    sysbench oltp_read_write --mysql-socket="$MY_SOCK" --mysql-user=root \
        --tables=1 --table-size="$ROWS" prepare >"$RUN/sysbench-prepare.log" 2>&1
fi
mariadb -S "$MY_SOCK" -uroot -e "select count(*) as sbtest1_rows from sbtest.sbtest1"
say "space and compression after loading"
"$BIN" list -r -o name,used,refer,recordsize,compressratio,mountpoint tank/mysql

say "sharing tank/mysql over NFSv3 (inherited by data and log)"
"$BIN" set sharenfs='rw=127.0.0.0/8,no_root_squash' tank/mysql
"$BIN" share list
NFS_ADDR=$(cat "$HOME_DIR/nfs.addr" 2>/dev/null || echo "not serving: see $DEMO/daemon.log")
NFS_PORT=${NFS_ADDR##*:}

ADDR=$(cat "$HOME_DIR/http.addr" 2>/dev/null || echo "$HTTP")
say "light workload for the analytics: sysbench oltp_read_write, 2 threads, 20 tx/s"
setsid sysbench oltp_read_write --mysql-socket="$MY_SOCK" --mysql-user=root \
    --tables=1 --table-size="$ROWS" --threads=2 --rate=20 --time=0 --report-interval=0 \
    run >"$RUN/sysbench-demo.log" 2>&1 &
WORKLOAD_PID=$!
sleep 3
"$BIN" analytics show innodb.ops --by kind --last 3s
cat <<INFO

Where things are:
  pool files        $DEMO/disk0.img, $DEMO/disk1.img (mirror)
  daemon            socket $CACHALOT_SOCKET, log $DEMO/daemon.log
  live analytics    http://$ADDR/   (InnoDB I/O by kind: http://$ADDR/#/analytics?stat=innodb.ops&by=kind)
  from the shell    $BIN analytics show fuse.ops --by file --last 60s
  InnoDB data       $MNT/data   (tank/mysql/data, recordsize=16K)
  redo + binlogs    $MNT/log    (tank/mysql/log, recordsize=128K)
  NFSv3 shares      $NFS_ADDR: /tank/mysql/data and /tank/mysql/log ('$BIN share list')
  mount from a host mount -t nfs -o vers=3,proto=tcp,hard,nolock,port=$NFS_PORT,mountport=$NFS_PORT \\
                        127.0.0.1:/tank/mysql/data /mnt/data
                    nfs-ls 'nfs://127.0.0.1/tank/mysql/data?version=3&nfsport=$NFS_PORT&mountport=$NFS_PORT'
  MariaDB           127.0.0.1:$MY_PORT, socket $MY_SOCK, error log $RUN/mariadb-error.log
  try               mariadb -S $MY_SOCK -uroot sbtest
                    sysbench oltp_read_write --mysql-socket=$MY_SOCK --mysql-user=root \\
                        --tables=1 --table-size=$ROWS --threads=4 --time=30 run
INFO
echo "Press Ctrl-C to stop (MariaDB, mounts and daemon are stopped cleanly)."
echo "Open http://$ADDR/ in a browser: the charts update every second."
while kill -0 "$DAEMON" 2>/dev/null && kill -0 "$MARIADB_PID" 2>/dev/null; do sleep 1; done
