#!/bin/bash
# Guest side, for protocol tests: MariaDB from the host's packages (seen through 9p)
# on DATADIR, e.g. an NFS mount or a file system on an NBD/iSCSI disk: initialise
# the data directory, start the server, sysbench prepare and a short
# oltp_read_write run, CHECK TABLE, clean shutdown. Exits non-zero on any failure.
#
#   mariadb.sh DATADIR [RUN_SECONDS] [TABLE_ROWS]
#
# The server's socket and pid file stay on the guest's tmpfs (/run), not DATADIR.
# Prints "mariadb: tps=N" and "mariadb: check ok" for the caller to parse.
set -euo pipefail
DATADIR=$1
SECS=${2:-10}
ROWS=${3:-5000}
SOCK=/run/mysqld-guest.sock
LOG=/run/mysqld-guest.err
t0=$(date +%s)
say() { echo "mariadb: $* (+$(($(date +%s) - t0)) s)"; }
sql() { mariadb --no-defaults -S "$SOCK" -uroot -N -B -e "$*"; }

mkdir -p "$DATADIR"
mariadb-install-db --no-defaults --user=root --datadir="$DATADIR" \
    --auth-root-authentication-method=normal --skip-test-db >/run/mysqld-install.log 2>&1 ||
    { tail -n 20 /run/mysqld-install.log; exit 1; }
say "data directory initialised"
mariadbd --no-defaults --user=root --datadir="$DATADIR" --socket="$SOCK" \
    --pid-file=/run/mysqld-guest.pid --log-error="$LOG" --skip-networking \
    --innodb-buffer-pool-size=128M --innodb-log-file-size=64M &
server=$!
for ((i = 0; i < 600; i++)); do
    sql 'SELECT 1' >/dev/null 2>&1 && break
    kill -0 "$server" 2>/dev/null || { tail -n 30 "$LOG"; exit 1; }
    sleep 0.2
done
sql 'SELECT 1' >/dev/null || { tail -n 30 "$LOG"; exit 1; }
say "server up"
sql 'CREATE DATABASE sbtest'
SB=(--db-driver=mysql --mysql-socket="$SOCK" --mysql-user=root --mysql-db=sbtest
    --tables=2 --table-size="$ROWS")
sysbench oltp_read_write "${SB[@]}" prepare >/dev/null
say "sysbench prepared 2 x $ROWS rows"
out=$(sysbench oltp_read_write "${SB[@]}" --threads=2 --time="$SECS" run)
tps=$(awk '/transactions:/ { gsub(/[()]/, "", $3); print $3 }' <<<"$out")
say "tps=$tps"
check=$(sql 'CHECK TABLE sbtest.sbtest1, sbtest.sbtest2' | awk '$3 == "status" { print $4 }' | sort -u)
[[ $check == OK ]] || { echo "CHECK TABLE: $check"; exit 1; }
say "check ok"
mariadb-admin --no-defaults -S "$SOCK" -uroot shutdown
wait "$server"
say "clean shutdown"
