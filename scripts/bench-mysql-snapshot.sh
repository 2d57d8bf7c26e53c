#!/usr/bin/env bash
# Measurements of the MySQL integration (not part of the test suite; timings are
# reported, never asserted):
#   1. writes blocked by `cachalot mysql snapshot` under a sysbench write load
#      (SNAPS snapshots, SNAP_GAP seconds apart, 8 client threads, no rate limit);
#   2. time from `cachalot mysql clone --replica-of` to a running replica, and until
#      it has caught up with the source;
#   3. space used by the new clone (right after the clone, and with its server up).
# A MariaDB on cachalot FUSE mounts (data recordsize=16K, logs 128K), TABLES x
# TABLE_SIZE sysbench rows (default 8 x 1,000,000: about 2 GiB of InnoDB data).
#
#   scripts/bench-mysql-snapshot.sh            (needs target/ci/cachalot, root)
#   TABLES=2 TABLE_SIZE=10000 scripts/bench-mysql-snapshot.sh   (quick run)
#
# Results: test-artifacts/bench-mysql-snapshot/results.txt
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../tests/e2e/lib.sh"
# shellcheck source=tests/e2e/fuse_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../tests/e2e/fuse_lib.sh"

TABLES=${TABLES:-8}
TABLE_SIZE=${TABLE_SIZE:-1000000}
SNAPS=${SNAPS:-10}
SNAP_GAP=${SNAP_GAP:-3}
POOL_SIZE=${POOL_SIZE:-16G}
RESULTS=$ARTIFACTS/results.txt
: >"$RESULTS"
: >"$ARTIFACTS/blocked-detail.txt"
result() { echo "$*" | tee -a "$RESULTS" >&2; }

REPLICA_PID=
_bench_cleanup() {
    local rc=$?
    set +e
    [[ -n $REPLICA_PID ]] && kill -KILL "$REPLICA_PID" 2>/dev/null
    while [[ -n $REPLICA_PID ]] && kill -0 "$REPLICA_PID" 2>/dev/null; do sleep 0.1; done
    (exit "$rc")
    _fuse_cleanup
}
trap _bench_cleanup EXIT

MY_PORT=$((20000 + RANDOM % 30000))
mariadb_on_cachalot "$POOL_SIZE"
sql "create database sbtest"
SB=(sysbench oltp_write_only --mysql-socket="$MY_SOCK" --mysql-user=root
    --tables="$TABLES" --table-size="$TABLE_SIZE" --rand-type=uniform)

note "sysbench prepare: $TABLES x $TABLE_SIZE rows (durability relaxed during the load only)"
sql "set global innodb_flush_log_at_trx_commit=2; set global sync_binlog=0"
t0=$(date +%s)
"${SB[@]}" --threads=2 prepare >"$ARTIFACTS/sb-prepare.log" 2>&1 || fail "sysbench prepare failed"
sql "set global innodb_flush_log_at_trx_commit=1; set global sync_binlog=1"
size=$(sql "select sum(data_length + index_length) from information_schema.tables where table_schema='sbtest'")
result "database: $TABLES x $TABLE_SIZE rows, $((size >> 20)) MiB InnoDB data+index, prepared in $(($(date +%s) - t0)) s"
result "dataset used: data $("$CACHALOT" list -H -o used tank/mysql/data), log $("$CACHALOT" list -H -o used tank/mysql/log)"

note "$SNAPS snapshots under an 8-thread write load"
"${SB[@]}" --threads=8 --time=$((SNAPS * SNAP_GAP + 10)) --report-interval=5 run \
    >"$ARTIFACTS/sb-run.log" 2>&1 &
sbpid=$!
sleep 5
blocked=()
for ((i = 1; i <= SNAPS; i++)); do
    out=$("$CACHALOT" mysql snapshot --socket "$MY_SOCK" tank/mysql/data,tank/mysql/log "b$i")
    ms=$(awk '/^writes blocked/ { print $3 }' <<<"$out")
    blocked+=("$ms")
    grep '^writes blocked' <<<"$out" >>"$ARTIFACTS/blocked-detail.txt"
    sleep "$SNAP_GAP"
done
wait "$sbpid" || fail "sysbench run failed"
tps=$(awk '/transactions:/ { gsub(/\(/, "", $3); print $3 }' "$ARTIFACTS/sb-run.log")
sorted=$(printf '%s\n' "${blocked[@]}" | sort -n)
result "writes blocked per snapshot (ms, $SNAPS snapshots under $tps tps): $(tr '\n' ' ' <<<"$sorted")"
result "  min $(head -1 <<<"$sorted") ms, median $(sed -n "$(((SNAPS + 1) / 2))p" <<<"$sorted") ms, max $(tail -1 <<<"$sorted") ms"
result "  command: cachalot mysql snapshot --socket SOCK tank/mysql/data,tank/mysql/log NAME"
result "  slowest: $(sort -k3 -n "$ARTIFACTS/blocked-detail.txt" | tail -1)"

note "space of a clone that is not started"
"$CACHALOT" mysql snapshot --socket "$MY_SOCK" tank/mysql/data,tank/mysql/log plain >/dev/null
alloc() { "$CACHALOT" pool sync tank >/dev/null && "$CACHALOT" pool list -H -p tank | cut -f3; }
a0=$(alloc)
"$CACHALOT" mysql clone tank/mysql/data@plain tank/plain --mountpoint "$D/plain" >/dev/null
a1=$(alloc)
result "space of a new clone (not started): pool ALLOC grew by $((a1 - a0)) B (the clone's 'used' property says data $("$CACHALOT" list -H -p -o used tank/plain/data) B, log $("$CACHALOT" list -H -p -o used tank/plain/log) B)"

note "clone into a running replica while a write load runs"
"${SB[@]}" --threads=4 --time=60 run >"$ARTIFACTS/sb-run2.log" 2>&1 &
sbpid=$!
sleep 5
"$CACHALOT" mysql snapshot --socket "$MY_SOCK" tank/mysql/data,tank/mysql/log rep >/dev/null
t0=$(date +%s.%N)
out=$("$CACHALOT" mysql clone tank/mysql/data@rep tank/replica --mountpoint "$D/replica" \
    --replica-of "$MY_SOCK")
t1=$(date +%s.%N)
echo "$out" >&2
REPLICA_PID=$(awk '$1 == "server" && $2 == "pid" { print $3 }' <<<"$out")
a2=$(alloc)
result "clone to running replica (IO+SQL threads Yes): $(echo "$t1 - $t0" | bc) s wall, CLI says: $(grep '^done' <<<"$out")"
result "  command: cachalot mysql clone tank/mysql/data@rep tank/replica --mountpoint DIR --replica-of SOCK"
result "pool ALLOC grew by $((a2 - a1)) B for the replica clone + its start (includes the source's writes meanwhile)"
wait "$sbpid" || fail "sysbench run failed"
t_end=$(date +%s.%N)
src=$(sql "select @@gtid_binlog_pos")
rsock=$D/replica/data.run/mysqld.sock
for ((i = 0; i < 1200; i++)); do
    [[ $(mariadb -S "$rsock" -uroot -N -B -e "select @@gtid_slave_pos") == "$src" ]] && break
    sleep 0.5
done
t2=$(date +%s.%N)
result "replica caught up with the source $(echo "$t2 - $t_end" | bc) s after the 60 s load ended"
cp "$D/replica/data.run/error.log" "$ARTIFACTS/replica-error.log"
cat "$RESULTS"
