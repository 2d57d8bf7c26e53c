#!/usr/bin/env bash
# timeout: 420
# MariaDB (Debian's mariadb-server) on cachalot mounts: data on recordsize=16K,
# redo and binary logs on recordsize=128K. sysbench prepare and run; kill -9 of
# mysqld under load, restart, CHECK TABLE clean; kill -9 of the cachalot daemon
# under load, restart daemon (it re-mounts) and MariaDB, CHECK TABLE clean and
# every transaction the client saw acknowledged is there.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/e2e/fuse_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/fuse_lib.sh"

command -v mariadbd >/dev/null || fail "mariadb-server is not installed"
command -v sysbench >/dev/null || fail "sysbench is not installed"

mariadb_on_cachalot 2G
sql "create database sbtest"
SB=(sysbench oltp_read_write --mysql-socket="$MY_SOCK" --mysql-user=root
    --tables=4 --table-size=20000 --rand-type=uniform --report-interval=5)

note "sysbench prepare and run"
"${SB[@]}" prepare >"$ARTIFACTS/sb-prepare.log" 2>&1 || fail "sysbench prepare failed"
"${SB[@]}" --threads=8 --time=15 run >"$ARTIFACTS/sb-run.log" 2>&1 || fail "sysbench run failed"
tps=$(awk '/transactions:/ { gsub(/\(/, "", $3); print $3 }' "$ARTIFACTS/sb-run.log")
errs=$(awk '/ignored errors:/ { print $3 }' "$ARTIFACTS/sb-run.log")
note "sysbench: $tps tps, $errs ignored errors"
[[ ${tps%.*} -gt 0 ]] || fail "no transactions"
check_tables sbtest
[[ -n $(ls "$D/log"/binlog.* 2>/dev/null) ]] || fail "binary log not on the log dataset"
[[ -f $D/log/ib_logfile0 ]] || fail "redo log not on the log dataset"
# On a plain fuse mount MariaDB buffers its redo log ("Buffered log writes"), a
# path that stalls every transaction for seconds under load; the fuseblk mount
# lets it write the log with O_DIRECT.
grep -q "File system buffers for log disabled" "$MY_ERRLOG" ||
    fail "MariaDB buffers its redo log: $(grep -m1 'log writes' "$MY_ERRLOG")"

note "kill -9 of mysqld under load"
"${SB[@]}" --threads=8 --time=60 run >"$ARTIFACTS/sb-kill-mysqld.log" 2>&1 &
sbpid=$!
sleep 6
mariadb_kill9
wait "$sbpid" 2>/dev/null || true
mariadb_start
check_tables sbtest

note "kill -9 of the cachalot daemon under load"
sql "create database ack; create table ack.t (id int primary key, pad varchar(200)) engine=innodb"
ACKED=$D/acked
: >"$ACKED"
# The writer ends at its first error: check_writer_errors fails on one met
# before the daemon was killed (MariaDB's messages after the kill vary).
writer() {
    local i=0
    while true; do
        i=$((i + 1))
        writer_step "$D/werr" timeout 20 mariadb -S "$MY_SOCK" -uroot -e \
            "insert into ack.t values ($i, repeat('a', 200))" || return 0
        echo "$i" >>"$ACKED"
    done
}
writer &
wpid=$!
"${SB[@]}" --threads=8 --time=60 run >"$ARTIFACTS/sb-kill-daemon.log" 2>&1 &
sbpid=$!
sleep 8
# Kill only once the writer has an acknowledged insert to check (on a loaded
# machine it may have none yet after the fixed sleep).
wait_until 60 "an acknowledged insert of the writer" test -s "$ACKED"
kill9_daemon
sleep 1
mariadb_kill9
wait "$wpid" 2>/dev/null || true
wait "$sbpid" 2>/dev/null || true
check_writer_errors "$D/werr" "the insert writer" "" .
n_acked=$(wc -l <"$ACKED")
((n_acked > 0)) || fail "the writer saw no acknowledged insert before the kill"
note "$n_acked inserts acknowledged before the daemon died"

start_daemon
for dir in "$D/data" "$D/log"; do
    grep -q " $dir fuse" /proc/mounts || fail "$dir not re-mounted after the daemon restart"
done
mariadb_start
check_tables sbtest
check_tables ack
present=$(sql "select count(*) from ack.t where id <= $(tail -n1 "$ACKED")")
assert_eq "$present" "$n_acked" "acknowledged rows present after the crash"
sql "select id from ack.t order by id" >"$D/present"
missing=$(comm -23 <(sort "$ACKED") <(sort "$D/present") | head -5)
[[ -z $missing ]] || fail "acknowledged inserts lost: $missing"

note "clean shutdown and unmount"
mariadb_stop
assert_ok "$CACHALOT" unmount tank/mysql/data
assert_ok "$CACHALOT" unmount tank/mysql/log
assert_ok "$CACHALOT" pool scrub -w tank
status=$("$CACHALOT" pool status tank)
assert_contains "$status" "ONLINE" "pool healthy"
echo "PASS"
