#!/usr/bin/env bash
# timeout: 420
# `cachalot mysql snapshot|clone|restore|advise` against a real MariaDB on cachalot
# FUSE mounts (data recordsize=16K, redo + binlog recordsize=128K):
# - a snapshot under a sysbench write load records binlog file/position and GTID
#   on every snapshot of the set;
# - a clone started with --replica-of catches up; after the load, CHECKSUM TABLE of
#   every table is identical on source and replica;
# - a clone started without --replica-of holds exactly the data at the snapshot
#   (counter row written before/after it; its binlog GTID equals the recorded one);
# - restore is refused while the server runs, and brings back the snapshot's data
#   once it is stopped;
# - bad input (wrong socket, wrong credentials, datasets that are not the server's,
#   a snapshot name in use, taken by someone else while the lock is held, a client
#   killed while holding the lock, a daemon too slow for --max-block-ms, a wrong
#   --replica-of): one-line errors, and writes proceed afterwards;
# - scheduled snapshots: --keep 2 keeps the two newest timestamped sets.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/e2e/fuse_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/fuse_lib.sh"

command -v mariadbd >/dev/null || fail "mariadb-server is not installed"
command -v sysbench >/dev/null || fail "sysbench is not installed"

# Servers started by `cachalot mysql clone` outlive the CLI: stop them before the
# daemon (which holds their files) goes away.
CLONE_PIDS=()
D=
_mysql_cleanup() {
    local rc=$? p
    set +e
    for p in "${CLONE_PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
    for p in "$D"/*/data.run/error.log; do
        [[ -f $p ]] && cp "$p" "$ARTIFACTS/clone-$(basename "$(dirname "$(dirname "$p")")")-error.log"
    done
    for p in "${CLONE_PIDS[@]}"; do
        while kill -0 "$p" 2>/dev/null; do sleep 0.1; done
    done
    (exit "$rc")
    _fuse_cleanup
}
trap _mysql_cleanup EXIT

free_port() {
    local p
    while true; do
        p=$((20000 + RANDOM % 30000))
        (echo >"/dev/tcp/127.0.0.1/$p") 2>/dev/null || {
            echo "$p"
            return
        }
    done
}

# on SOCK SQL: run SQL on the server at SOCK.
on() {
    local s=$1
    shift
    mariadb -S "$s" -uroot -N -B -e "$*"
}

# writes_proceed: a write on the source commits within 10 s (no lock left behind).
writes_proceed() {
    timeout 10 mariadb -S "$MY_SOCK" -uroot -e \
        "set session lock_wait_timeout=5; insert into ck.w values ()" ||
        fail "writes on the source are blocked after: $1"
}

# wait_until_blocked: wait until a write on the source cannot commit within 1 s
# (a snapshot client holds the lock).
wait_until_blocked() {
    local i
    for ((i = 0; i < 100; i++)); do
        timeout 10 mariadb -S "$MY_SOCK" -uroot -e \
            "set session lock_wait_timeout=1; insert into ck.w values ()" 2>/dev/null || return 0
        sleep 0.1
    done
    fail "the snapshot client never blocked writes"
}

# slave_field SOCK FIELD: one column of SHOW SLAVE STATUS (empty if none).
slave_field() {
    mariadb -S "$1" -uroot -B -e "show slave status" |
        awk -F'\t' -v f="$2" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == f) c = i } NR == 2 && c { print $c }'
}

# started_pid OUTPUT: the pid from the "server pid N ..." line of mysql clone.
started_pid() { awk '$1 == "server" && $2 == "pid" { print $3 }' <<<"$1"; }

MY_PORT=$(free_port)
mariadb_on_cachalot 2G
sql "create database sbtest; create database ck;
     create table ck.counter (id int primary key, n int) engine=innodb;
     create table ck.w (id int auto_increment primary key) engine=innodb;
     insert into ck.counter values (1, 0)"
SB=(sysbench oltp_write_only --mysql-socket="$MY_SOCK" --mysql-user=root
    --tables=2 --table-size=10000 --rand-type=uniform)
"${SB[@]}" prepare >"$ARTIFACTS/sb-prepare.log" 2>&1 || fail "sysbench prepare failed"

note "snapshot under a sysbench write load"
# --rate keeps the load within what a single replica SQL thread applies.
"${SB[@]}" --threads=4 --time=15 --rate=200 run >"$ARTIFACTS/sb-run.log" 2>&1 &
sbpid=$!
sleep 4
sql "update ck.counter set n = 1"
out=$(assert_ok "$CACHALOT" mysql snapshot --socket "$MY_SOCK" tank/mysql/data,tank/mysql/log s1)
sql "update ck.counter set n = 2"
echo "$out"
assert_contains "$out" "writes blocked" "snapshot reports the blocked time"
assert_contains "$out" "BACKUP STAGE BLOCK_COMMIT" "MariaDB 10.4+ is quiesced with BACKUP STAGE"
for s in tank/mysql/data@s1 tank/mysql/log@s1; do
    members=$("$CACHALOT" get -H -o value cachalot.mysql:members "$s")
    assert_eq "$members" "tank/mysql/data,tank/mysql/log" "members recorded on $s"
    gtid=$("$CACHALOT" get -H -o value cachalot.mysql:gtid "$s")
    [[ $gtid =~ ^[0-9]+-[0-9]+-[0-9]+ ]] || fail "no GTID recorded on $s: '$gtid'"
    file=$("$CACHALOT" get -H -o value cachalot.mysql:binlog_file "$s")
    [[ $file == binlog.* ]] || fail "no binlog file recorded on $s: '$file'"
done
GTID_S1=$gtid
note "recorded gtid $GTID_S1, binlog $file"

note "clone with --replica-of while the load runs"
out=$(assert_ok "$CACHALOT" mysql clone tank/mysql/data@s1 tank/replica \
    --mountpoint "$D/replica" --replica-of "$MY_SOCK")
echo "$out"
CLONE_PIDS+=("$(started_pid "$out")")
assert_contains "$out" "replica running" "replication runs"
REPLICA_SOCK=$D/replica/data.run/mysqld.sock
assert_eq "$("$CACHALOT" get -H -o value cachalot.mysql:pid tank/replica/data)" \
    "${CLONE_PIDS[0]}" "pid recorded on the data clone"
kill -0 "${CLONE_PIDS[0]}" || fail "replica server not running after the CLI exited"
wait "$sbpid" || fail "sysbench run failed"
errs=$(awk '/ignored errors:/ { print $3 }' "$ARTIFACTS/sb-run.log")
note "sysbench done ($errs ignored errors)"

note "replica catches up"
src_gtid=$(sql "select @@gtid_binlog_pos")
for ((i = 0; i < 240; i++)); do
    [[ $(on "$REPLICA_SOCK" "select @@gtid_slave_pos") == "$src_gtid" ]] && break
    sleep 0.5
done
assert_eq "$(on "$REPLICA_SOCK" "select @@gtid_slave_pos")" "$src_gtid" "replica caught up"
for f in Slave_IO_Running Slave_SQL_Running; do
    assert_eq "$(slave_field "$REPLICA_SOCK" "$f")" "Yes" "replica $f"
done
[[ $(on "$REPLICA_SOCK" "select @@server_id") != 1 ]] || fail "replica kept the source's server_id"
for db in sbtest ck; do
    for t in $(sql "select table_name from information_schema.tables where table_schema='$db'"); do
        a=$(sql "checksum table $db.$t" | cut -f2)
        b=$(on "$REPLICA_SOCK" "checksum table $db.$t" | cut -f2)
        assert_eq "$b" "$a" "CHECKSUM TABLE $db.$t on replica vs source"
    done
done
note "CHECKSUM TABLE identical on source and replica"

note "a clone without --replica-of holds the data at the snapshot"
out=$(assert_ok "$CACHALOT" mysql clone tank/mysql/data@s1 tank/dev --mountpoint "$D/dev" --start)
echo "$out"
CLONE_PIDS+=("$(started_pid "$out")")
DEV_SOCK=$D/dev/data.run/mysqld.sock
assert_eq "$(on "$DEV_SOCK" "select n from ck.counter")" "1" "counter as at the snapshot"
assert_eq "$(on "$DEV_SOCK" "select @@gtid_binlog_pos")" "$GTID_S1" "clone's binlog ends at the recorded GTID"
assert_eq "$(on "$DEV_SOCK" "show slave status")" "" "dev clone replicates from nobody"
grep -q "^skip_networking" "$D/dev/data.run/my.cnf" || fail "dev clone listens on TCP without --port"
grep -q "$D/data\|$D/log" "$D/dev/data.run/my.cnf" && fail "clone config points at the source's datasets"
space=$("$CACHALOT" list -H -p -o used tank/dev/data)
note "space used by the dev clone's data dataset after start: $space bytes"

note "advise"
out=$(assert_ok "$CACHALOT" mysql advise --socket "$MY_SOCK" tank/mysql/data)
echo "$out"
assert_contains "$out" "innodb_doublewrite = 0" "doublewrite advice (recordsize=16K = page size)"
assert_contains "$out" "recordsize=16K on tank/mysql/data" "recordsize matches"
assert_contains "$out" "binary log on tank/mysql/log" "log placement recognised"

note "bad input: one-line errors, writes proceed afterwards"
assert_fails "$CACHALOT" mysql snapshot --socket "$D/nope.sock" tank/mysql/data,tank/mysql/log s2
assert_contains "$LAST_STDERR" "no such socket"
writes_proceed "wrong socket"
assert_fails "$CACHALOT" mysql snapshot --socket "$MY_SOCK" --user nobody_here tank/mysql/data,tank/mysql/log s2
assert_contains "$LAST_STDERR" "Access denied"
sql "create user 'snapper'@'localhost' identified by 'right'; grant all on *.* to 'snapper'@'localhost'"
MYSQL_PWD=wrong assert_fails "$CACHALOT" mysql snapshot --socket "$MY_SOCK" --user snapper \
    tank/mysql/data,tank/mysql/log s2
assert_contains "$LAST_STDERR" "Access denied"
writes_proceed "wrong credentials"
fuse_mount tank/other "$D/other"
assert_fails "$CACHALOT" mysql snapshot --socket "$MY_SOCK" tank/other s2
assert_contains "$LAST_STDERR" "not this server's"
assert_fails "$CACHALOT" mysql snapshot --socket "$MY_SOCK" tank/mysql/data s2
assert_contains "$LAST_STDERR" "is on none of"
assert_fails "$CACHALOT" mysql snapshot --socket "$MY_SOCK" tank/mysql/data,tank/other s2
assert_fails "$CACHALOT" mysql snapshot --socket "$MY_SOCK" tank/nosuch s2
writes_proceed "datasets that are not the server's"
assert_fails "$CACHALOT" mysql snapshot --socket "$MY_SOCK" tank/mysql/data,tank/mysql/log s1
assert_contains "$LAST_STDERR" "already exists"
writes_proceed "snapshot name in use"
assert_ok "$CACHALOT" snapshot tank/other@plain
assert_fails "$CACHALOT" mysql clone tank/other@plain tank/c2
assert_contains "$LAST_STDERR" "not taken by"
assert_fails "$CACHALOT" mysql clone tank/mysql/data@s1 tank/dev
assert_contains "$LAST_STDERR" "already exists"
assert_fails "$CACHALOT" mysql clone tank/mysql/data@s1 tank/bad --replica-of "$D/nope.sock"
assert_contains "$LAST_STDERR" "no such socket"
assert_fails "$CACHALOT" mysql clone tank/mysql/data@s1 tank/bad --replica-of "$REPLICA_SOCK"
assert_contains "$LAST_STDERR" "replicate from the server the snapshot came from"
assert_fails "$CACHALOT" get type tank/bad
MYSQL_PWD=right assert_ok "$CACHALOT" mysql snapshot --socket "$MY_SOCK" --user snapper \
    tank/mysql/data,tank/mysql/log s_pw >/dev/null

note "scheduled snapshots: --keep 2 keeps the two newest sets"
for i in 1 2 3; do
    out=$(assert_ok "$CACHALOT" mysql snapshot --socket "$MY_SOCK" --keep 2 \
        tank/mysql/data,tank/mysql/log hourly)
    ((i < 3)) && sleep 1.1
done
assert_contains "$out" "pruned tank/mysql/log@hourly-" "the oldest set is pruned"
for ds in tank/mysql/data tank/mysql/log; do
    n=$("$CACHALOT" list -H -t snapshot -o name "$ds" | grep -c "^$ds@hourly-" || true)
    assert_eq "$n" "2" "hourly snapshots kept on $ds"
done

note "a daemon slower than --max-block-ms: writes released, no snapshot kept"
CACHALOT_TEST_MYSQL_HOLD_MS=3000 assert_fails "$CACHALOT" mysql snapshot --socket "$MY_SOCK" \
    --max-block-ms 300 tank/mysql/data,tank/mysql/log slow
assert_contains "$LAST_STDERR" "did not take the snapshot within 300 ms"
writes_proceed "max-block timeout"
"$CACHALOT" list -H -t snapshot -o name -r tank | grep -q '@slow' && fail "late snapshot kept"

note "the daemon refuses the snapshot while the lock is held: error, writes released"
# The hold must outlast wait_until_blocked (a write waits 1 s for the lock) and
# the snapshot below: 2 s left well under a second for them on a loaded machine.
CACHALOT_TEST_MYSQL_HOLD_MS=8000 "$CACHALOT" mysql snapshot --socket "$MY_SOCK" \
    --max-block-ms 30000 tank/mysql/data,tank/mysql/log race >"$D/race.out" 2>"$D/race.err" &
cli=$!
wait_until_blocked
assert_ok "$CACHALOT" snapshot tank/mysql/log@race
rc=0
wait "$cli" || rc=$?
((rc == 1)) || fail "snapshot with a name taken meanwhile: exit $rc, expected 1"
[[ $(grep -c '' "$D/race.err") == 1 ]] || fail "expected a one-line error: $(cat "$D/race.err")"
assert_contains "$(cat "$D/race.err")" "already exists"
writes_proceed "a snapshot the daemon refused"
"$CACHALOT" list -H -t snapshot -o name tank/mysql/data | grep -q '@race' && fail "half a set kept"
assert_ok "$CACHALOT" destroy tank/mysql/log@race

note "client killed while it holds the lock"
CACHALOT_TEST_MYSQL_HOLD_MS=60000 "$CACHALOT" mysql snapshot --socket "$MY_SOCK" \
    tank/mysql/data,tank/mysql/log killed >/dev/null 2>&1 &
cli=$!
wait_until_blocked
kill -KILL "$cli"
wait "$cli" 2>/dev/null || true
writes_proceed "the client was killed while holding the lock"
"$CACHALOT" list -H -t snapshot -o name -r tank | grep -q '@killed' && fail "snapshot taken by a killed client"

note "restore"
for p in "${CLONE_PIDS[@]}"; do kill -TERM "$p"; done
for p in "${CLONE_PIDS[@]}"; do
    for ((i = 0; i < 300; i++)); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
done
CLONE_PIDS=()
assert_fails "$CACHALOT" mysql restore -r tank/mysql/data@s1
assert_contains "$LAST_STDERR" "in use by pid $MARIADB_PID"
assert_eq "$(sql "select n from ck.counter")" "2" "refused restore changed nothing"
mariadb_stop
assert_ok "$CACHALOT" mysql restore -r tank/mysql/data@s1
mariadb_start
assert_eq "$(sql "select n from ck.counter")" "1" "restore brought back the snapshot's counter"
assert_eq "$(sql "select @@gtid_binlog_pos")" "$GTID_S1" "restored binlog ends at the recorded GTID"
check_tables sbtest
writes_proceed "restore"
mariadb_stop
echo "PASS"
