#!/usr/bin/env bash
# timeout: 300
# Replication of a MySQL set and `cachalot mysql failover` on the target: two
# appliances in network namespaces joined by a veth (repl_lib.sh); MariaDB on
# A's FUSE mounts (tank/mysql/data 16K, tank/mysql/log 128K) under a sysbench
# write load; relationship `db` created with --mysql-socket, so each cycle takes
# a `mysql snapshot` of data and log together and replicates both, the record
# (GTID position, members renamed) following on B's snapshots. After a few
# cycles, `mysql failover db` on B breaks the relationship off there (A's next
# cycle is refused with one line) and starts MariaDB on a clone of the newest
# replicated set: CHECK TABLE is clean on every table, CHECKSUM TABLE of every
# table equals that of a server started on A's own clone of the same snapshot,
# and the GTID position it prints is the one recorded at the snapshot.
# Errors name the relationship: none replicated here, not a MySQL set,
# MariaDB failing to start.
# Then `replication resync db` on A clears B's failover mark without losing
# anything (the server runs on clones) and cycles resume, retention keeping the
# clone's origin; a second failover on B, and `replication reverse db` on A
# (refused without -f, naming A's writes since): B's failover set becomes the
# source of db toward A, whose clone of the reversed snapshot has B's write,
# not A's rolled-back one, clean CHECK TABLE and B's checksums.
# With REPL_PULL=1 (test_mysql_failover_pull.sh) the same with db pulled:
# created on B with --pull, B starting each cycle from A's listener (A's
# server quiesced by A for each snapshot); failover marks B's db broken;
# resync and reverse run on B, and after the reverse B keeps db as a push
# toward A's listener (A forgets the pull it served).
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/e2e/fuse_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/fuse_lib.sh"
# shellcheck source=tests/e2e/repl_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/repl_lib.sh"

command -v mariadbd >/dev/null || fail "mariadb-server is not installed"
command -v sysbench >/dev/null || fail "sysbench is not installed"

REPL_CLEANUP_HOOKS+=(stop_mysql_servers)

# RUNNER: the node that keeps db, runs its cycles, resync and reverse;
# create_rel NAME SRC TGT ARGS...: a relationship of A's SRC into B's TGT
# there; reverse_db ARGS...: reverse db there.
if [[ -n ${REPL_PULL:-} ]]; then
    RUNNER=B
    create_rel() {
        local name=$1 src=$2 tgt=$3
        shift 3
        CB replication create "$name" --pull --source "$IPA:$PORT/$src" --target "$tgt" "$@"
    }
    reverse_db() { CB replication reverse "$@" db; }
else
    RUNNER=A
    create_rel() {
        local name=$1 src=$2 tgt=$3
        shift 3
        CA replication create "$name" --source "$src" --target "$TARGET/$tgt" "$@"
    }
    reverse_db() { CA replication reverse --address "$IPA:$PORT" "$@" db; }
fi
CR() { cli "$RUNNER" "$@"; }

repl_link_up
# A listens too: the reversed relationship replicates to it (and a pull
# starts there).
start_node A "$NSA" --replication "$IPA:$PORT"
start_node B "$NSB" --replication "$TARGET"
assert_ok CA pool create -s 2G tank "$T/a.img"
assert_ok CB pool create -s 2G tank "$T/b.img"
if [[ $RUNNER == B ]]; then
    tok=$(assert_ok CA replication pair)
    assert_ok CB replication pair "$IPA:$PORT" "$tok" >/dev/null
else
    repl_pair
fi

note "MariaDB on A's datasets, sysbench tables"
mysql_source_on_a 3 10000

note "relationship db: the MySQL set tank/mysql/data,log to B's tank/dr"
assert_ok CB create tank/dr
assert_fails create_rel bad tank/mysql/data,tank/mysql/log tank/dr/data
assert_contains "$LAST_STDERR" "--mysql-socket" "a set without its server"
assert_fails create_rel bad tank/mysql/data,tank/mysql/log dr --mysql-socket "$MY_SOCK"
assert_contains "$LAST_STDERR" "must have a parent" "set target without a parent"
assert_ok create_rel db tank/mysql/data,tank/mysql/log tank/dr/data \
    --mysql-socket "$MY_SOCK" --schedule 1h --keep "1h:every 5m" --paused

note "cycles under a sysbench write load"
# Killed below, after the cycles: its --time only has to outlast them (with 60 s,
# slow cycles let the load end before the last snapshot, and the check that the
# source changed after it failed by chance).
"${SB[@]}" --threads=4 --time=600 --rate=300 run >"$ARTIFACTS/sb-run.log" 2>&1 &
SBPID=$!
sleep 2
for i in 1 2 3; do
    out=$(assert_ok CR replication run db)
    note "cycle $i: $out"
    sleep 2
done
SNAP=$(CR debug call repl.list '{"name":"db"}' | jq -r '.[0].last_snapshot')
note "last replicated set: $SNAP"
for ds in data log; do
    assert_contains "$(CB list -H -t snapshot -o name "tank/dr/$ds")" "tank/dr/$ds@$SNAP" "B has $ds@$SNAP"
    assert_eq "$(CB get -H -o value cachalot.mysql:members "tank/dr/$ds@$SNAP")" \
        "tank/dr/data,tank/dr/log" "record on B's $ds@$SNAP names B's datasets"
done
if [[ $RUNNER == B ]]; then
    assert_eq "$(CA debug call repl.list '{"name":"db"}' | jq -r '.[0] | [.role, (.members | join(",")), .held] | @tsv')" \
        "pulled-by $IPB	tank/mysql/data,tank/mysql/log	tank/mysql/data@$SNAP" "A lists the set it serves"
fi
GTID=$(CA get -H -o value cachalot.mysql:gtid "tank/mysql/data@$SNAP")
[[ $GTID =~ ^[0-9]+-[0-9]+-[0-9]+ ]] || fail "no GTID recorded on A's set: '$GTID'"
assert_eq "$(CB get -H -o value cachalot.mysql:gtid "tank/dr/log@$SNAP")" "$GTID" "GTID on B's set"
kill "$SBPID" 2>/dev/null || true
wait "$SBPID" 2>/dev/null || true
SBPID=
note "GTID at $SNAP: $GTID (source now at $(sql "select @@gtid_binlog_pos"))"

note "A's own clone of $SNAP: the expected contents"
out=$(assert_ok mysql_on A clone "tank/mysql/data@$SNAP" tank/check --mountpoint "$T/check" --start)
SERVER_PIDS+=("$(awk '$1 == "server" && $2 == "pid" { print $3 }' <<<"$out")")
CHECK_SOCK=$T/check/data.run/mysqld.sock
checksums "$CHECK_SOCK" >"$T/expected"
[[ $(wc -l <"$T/expected") == 3 ]] || fail "expected 3 sbtest tables: $(cat "$T/expected")"
assert_eq "$(on "$CHECK_SOCK" "select @@gtid_binlog_pos")" "$GTID" "A's clone ends at the recorded GTID"
# The load went on after the snapshot: equal checksums below are the snapshot's,
# not those of any state of the tables.
if diff -q "$T/expected" <(checksums "$MY_SOCK") >/dev/null; then
    fail "the source's tables did not change after $SNAP: the comparison would prove nothing"
fi

note "failover errors name the relationship"
assert_fails mysql_on B failover nope
assert_contains "$LAST_STDERR" "no replicated snapshot set of relationship 'nope'" "unknown relationship"
assert_ok CA create tank/plain
assert_ok create_rel plain tank/plain tank/plain --paused
assert_ok CR replication run plain >/dev/null
assert_fails mysql_on B failover plain
assert_contains "$LAST_STDERR" "'plain' is not a MySQL set" "plain relationship"
assert_fails mysql_on B failover --clone tank/dr/bad --mountpoint "$T/bad" \
    --socket "$T/no/such/dir/x.sock" --start-timeout 20 db
assert_contains "$LAST_STDERR" "mysql failover db: cannot start MariaDB" "server that cannot start"
[[ $(grep -c '' <<<"$LAST_STDERR") == 1 ]] || fail "not one line: $LAST_STDERR"

note "failover on B"
json=$(assert_ok mysql_on B failover --mountpoint "$T/fo" --json db)
echo "$json" >"$ARTIFACTS/failover.json"
SERVER_PIDS+=("$(jq -r .pid <<<"$json")")
FO_SOCK=$(jq -r .socket <<<"$json")
assert_eq "$(jq -r .snapshot <<<"$json")" "tank/dr/data@$SNAP" "failover used the newest set"
assert_eq "$(jq -r .gtid_binlog_pos <<<"$json")" "$GTID" "failover prints the snapshot's GTID"
assert_eq "$(jq -r .recorded_gtid <<<"$json")" "$GTID" "recorded GTID"
MY_SOCK=$FO_SOCK check_tables sbtest
diff "$T/expected" <(checksums "$FO_SOCK") || fail "B's tables differ from the source's at $SNAP"
note "CHECKSUM TABLE of every table on B equals the source's at $SNAP: $(tr '\n\t' '; ' <"$T/expected")"
on "$FO_SOCK" "insert into sbtest.sbtest1 (k, c, pad) values (1, 'after failover', 'x')"

note "the next cycle is refused: broken off on B"
nsnaps=$(CA list -H -t snapshot -o name tank/mysql/data | grep -c @repl-db-)
assert_fails CR replication run db
if [[ $RUNNER == B ]]; then
    assert_contains "$LAST_STDERR" "replication db: the relationship is broken off" "cycle after failover"
    assert_eq "$(CB replication list -H db | cut -f4)" "broken" "B's pull after failover"
else
    assert_contains "$LAST_STDERR" "replication db: broken off on the target by mysql failover" "cycle after failover"
fi
[[ $(grep -c '' <<<"$LAST_STDERR") == 1 ]] || fail "not one line: $LAST_STDERR"
assert_eq "$(CA list -H -t snapshot -o name tank/mysql/data | grep -c @repl-db-)" "$nsnaps" \
    "the refused cycle took no snapshot"

note "resync on $RUNNER: B's replicated set was never written (the server runs on clones), nothing is lost; B's failover mark goes"
out=$(assert_ok CR replication resync db)
assert_contains "$out" "resynced from $SNAP" "resync from the failover's set"
[[ $out != *destroyed* ]] || fail "resync destroyed something: $out"
# The mark is gone: B accepts the cycle. Retention there keeps $SNAP, which
# the failover clone depends on.
out=$(assert_ok CR replication run db)
note "cycle after resync: $out"
SNAP2=$(CR debug call repl.list '{"name":"db"}' | jq -r '.[0].last_snapshot')
for ds in data log; do
    assert_contains "$(CB list -H -t snapshot -o name "tank/dr/$ds")" "tank/dr/$ds@$SNAP2" "B has $ds@$SNAP2 after resync"
done
assert_contains "$(CB list -H -t snapshot -o name tank/dr/data)" "tank/dr/data@$SNAP" "the failover clone's origin stays"
assert_eq "$(on "$FO_SOCK" "select count(*) from sbtest.sbtest1 where c = 'after failover'")" 1 \
    "the failover server keeps its write across the resync"

note "failover again, then reverse: B's failover set becomes the source, A its replica"
json=$(assert_ok mysql_on B failover --clone tank/dr/fo2 --mountpoint "$T/fo2" --json db)
SERVER_PIDS+=("$(jq -r .pid <<<"$json")")
FO2_SOCK=$(jq -r .socket <<<"$json")
assert_eq "$(jq -r .snapshot <<<"$json")" "tank/dr/data@$SNAP2" "second failover used the newest set"
on "$FO2_SOCK" "insert into sbtest.sbtest1 (k, c, pad) values (2, 'written on B', 'y')"
sql "insert into sbtest.sbtest1 (k, c, pad) values (3, 'lost on A', 'z')"
mariadb_stop
for m in data log; do assert_ok CA unmount "tank/mysql/$m"; done
assert_fails reverse_db
assert_contains "$LAST_STDERR" "reverse would destroy" "reverse without -f"
assert_contains "$LAST_STDERR" "bytes written to tank/mysql/" "reverse names A's writes since $SNAP2"
if [[ $RUNNER == B ]]; then
    assert_eq "$(CB replication list -H db | cut -f9)" "pull" "a refused reverse keeps B's pull"
    assert_eq "$(CA replication list -H db | cut -f9)" "pulled-by $IPB" "a refused reverse keeps A's served pull"
else
    assert_contains "$(CA replication list -H)" "db" "a refused reverse keeps A's relationship"
    [[ -z $(CB replication list -H) ]] || fail "a refused reverse gave B a relationship: $(CB replication list -H)"
fi
out=$(assert_ok reverse_db -f)
assert_contains "$out" "now replicates to $IPA:$PORT/tank/mysql/data from snapshot $SNAP2" "reverse -f"
assert_contains "$(CB replication list -H db)" "tank/dr/fo2/data" "B's failover set is the source of db"
assert_eq "$(CB replication list -H db | cut -f9)" "push" "B pushes db after the reverse"
assert_fails CA replication list db
grep -q "replication db: failover mark cleared (reversed)" "$ARTIFACTS/daemon.log" ||
    fail "B kept its failover mark after adopting db"
out=$(assert_ok CB replication run db)
note "reversed cycle: $out"
SNAP3=$(CB debug call repl.list '{"name":"db"}' | jq -r '.[0].last_snapshot')
assert_eq "$(CA get -H -o value cachalot.mysql:members "tank/mysql/log@$SNAP3")" \
    "tank/mysql/data,tank/mysql/log" "record on A's log@$SNAP3 names A's datasets"
checksums "$FO2_SOCK" >"$T/expected-back"

note "A's clone of the reversed set: B's data at $SNAP3, without A's lost write"
out=$(assert_ok mysql_on A clone "tank/mysql/data@$SNAP3" tank/back --mountpoint "$T/back" --start)
SERVER_PIDS+=("$(awk '$1 == "server" && $2 == "pid" { print $3 }' <<<"$out")")
BACK_SOCK=$T/back/data.run/mysqld.sock
MY_SOCK=$BACK_SOCK check_tables sbtest
diff "$T/expected-back" <(checksums "$BACK_SOCK") || fail "A's tables differ from B's at $SNAP3"
assert_eq "$(on "$BACK_SOCK" "select count(*) from sbtest.sbtest1 where c in ('written on B', 'after failover')")" 1 \
    "A has the second failover server's write (and not the first one's)"
assert_eq "$(on "$BACK_SOCK" "select count(*) from sbtest.sbtest1 where c = 'lost on A'")" 0 \
    "A's write after $SNAP2 was rolled back"

stop_mysql_servers
stop_node A
stop_node B
echo PASS
