#!/usr/bin/env bash
# DDL-heavy MariaDB workload (the kind of MariaDB's innodb suite tests that the
# intent log used to slow down: instant_alter, innodb-alter), ext4 on a loop
# device against cachalot FUSE mounts (data 16K, logs 128K), in one run,
# alternating targets (ROUNDS rounds). Not part of the test suite: timings are
# reported, never asserted.
#
# Per table (N tables): CREATE, INSERT 1,000 rows, ADD COLUMN (instant), ADD INDEX
# (in place), FORCE (rebuild), ADD COLUMN ALGORITHM=COPY, RENAME, TRUNCATE, DROP.
# Every one of these creates, renames or deletes files and fsyncs them.
#
#   scripts/bench-ddl.sh            (needs target/ci/cachalot, root, mariadb-server)
#   N=10 ROUNDS=1 scripts/bench-ddl.sh
#
# Results: test-artifacts/bench-ddl/results.txt
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../tests/e2e/lib.sh"
# shellcheck source=tests/e2e/fuse_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../tests/e2e/fuse_lib.sh"

N=${N:-30}
ROUNDS=${ROUNDS:-2}
RESULTS=$ARTIFACTS/results.txt
: >"$RESULTS"
result() { echo "$*" | tee -a "$RESULTS" >&2; }

LOOP=
_ddl_cleanup() {
    local rc=$?
    set +e
    # The loop device first: the common cleanup exits when it is done.
    if [[ -n $LOOP ]]; then
        [[ -n $MARIADB_PID ]] && kill -KILL "$MARIADB_PID" 2>/dev/null && wait "$MARIADB_PID" 2>/dev/null
        MARIADB_PID=
        umount "$W/e" 2>/dev/null
        losetup -d "$LOOP"
    fi
    (exit "$rc")
    _fuse_cleanup
}
trap _ddl_cleanup EXIT

fuse_pool 6G
W=$(mktmp)
fuse_mount tank/ddl/data "$W/c/data" recordsize=16K
fuse_mount tank/ddl/log "$W/c/log" recordsize=128K
truncate -s 6G "$W/ext4.img"
LOOP=$(losetup --direct-io=on -f --show "$W/ext4.img")
mkfs.ext4 -q "$LOOP"
mkdir -p "$W/e"
mount "$LOOP" "$W/e"
mkdir -p "$W/e/data" "$W/e/log"

workload() {
    local i
    {
        echo "create database if not exists d; use d;"
        for ((i = 1; i <= N; i++)); do
            cat <<SQL
create table d.t$i (id int primary key auto_increment, a int, b varchar(100)) engine=innodb;
insert into d.t$i (a, b) select seq, repeat('x', 100) from seq_1_to_1000;
alter table d.t$i add column c int default 7;
alter table d.t$i add index (a);
alter table d.t$i force;
alter table d.t$i algorithm=copy, add column e int;
rename table d.t$i to d.u$i;
truncate table d.u$i;
drop table d.u$i;
SQL
        done
    } | mariadb -S "$MY_SOCK" -uroot
}

for round in $(seq "$ROUNDS"); do
    for target in e c; do
        rm -rf "${W:?}/$target/data/"* "${W:?}/$target/log/"* "$W/$target.run"
        mariadb_init "$W/$target/data" "$W/$target/log" "$W/$target.run"
        mariadb_start
        t0=$(date +%s.%N)
        workload || fail "the DDL workload failed on $target"
        t1=$(date +%s.%N)
        mariadb_stop
        name=$([[ $target == e ]] && echo ext4 || echo cachalot)
        result "round $round $name: $(echo "$t1 - $t0" | bc) s for $N tables x 9 DDL statements"
    done
done
umount "$W/e" && losetup -d "$LOOP" && LOOP=
stop_daemon
cat "$RESULTS"
