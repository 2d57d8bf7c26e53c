#!/usr/bin/env bash
# timeout: 420
# The SAN path: MariaDB on xfs on a cachalot volume reached over NBD (nbdfuse, then
# a loop device), sysbench prepare and run, kill -9 of the cachalot daemon under
# load, restart: xfs mounts (log recovery, no repair), CHECK TABLE clean, and
# every insert the client saw acknowledged is there. The volume has 16K blocks, but
# innodb_doublewrite stays on: crates/zvol/tests/torn_write.rs proves an aligned 16K
# write atomic on the volume, but xfs need not place a 16K page on one aligned 16K
# block, and the kernel may split it (docs/architecture.md, "Torn writes").
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/e2e/fuse_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/fuse_lib.sh"

for tool in mariadbd sysbench nbdfuse mkfs.xfs losetup; do
    command -v "$tool" >/dev/null || fail "$tool not installed (scripts/install-deps.sh test)"
done

NBDFUSE_PID=
LOOP=
XFS_MNT=
san_down() { # tear down xfs, loop and nbdfuse (after a crash too)
    set +e
    [[ -n $XFS_MNT ]] && { umount "$XFS_MNT" 2>/dev/null || umount -l "$XFS_MNT" 2>/dev/null; }
    [[ -n $LOOP ]] && losetup -d "$LOOP" 2>/dev/null
    LOOP=
    [[ -n ${FUSE_DIR:-} ]] && fusermount3 -u "$FUSE_DIR" 2>/dev/null
    if [[ -n $NBDFUSE_PID ]]; then
        kill "$NBDFUSE_PID" 2>/dev/null
        wait "$NBDFUSE_PID" 2>/dev/null
    fi
    NBDFUSE_PID=
    [[ -n ${FUSE_DIR:-} ]] && { fusermount3 -uz "$FUSE_DIR" 2>/dev/null || true; }
    set -e
}
_san_cleanup() {
    local rc=$?
    set +e
    if [[ -n $MARIADB_PID ]]; then
        kill -KILL "$MARIADB_PID" 2>/dev/null
        wait "$MARIADB_PID" 2>/dev/null
        MARIADB_PID=
    fi
    san_down
    (exit "$rc")
    _fuse_cleanup
}
trap _san_cleanup EXIT

T=$(mktmp)
FUSE_DIR=$T/fuse
XFS_MNT=$T/xfs
mkdir -p "$FUSE_DIR" "$XFS_MNT"
DAEMON_ARGS=(--nbd 127.0.0.1:0)

san_up() { # connect nbdfuse, loop device, mount xfs
    nbdfuse "$FUSE_DIR/vol" "nbd://$(cat "$HOME_DIR/nbd.addr")/tank/san" >>"$ARTIFACTS/nbdfuse.log" 2>&1 &
    NBDFUSE_PID=$!
    local i
    for ((i = 0; i < 100; i++)); do [[ -e $FUSE_DIR/vol ]] && break; sleep 0.1; done
    [[ -e $FUSE_DIR/vol ]] || fail "nbdfuse did not come up"
    LOOP=$(losetup -f --show "$FUSE_DIR/vol") || fail "losetup failed"
}

start_daemon
assert_ok "$CACHALOT" pool create -s 3G tank "$T/pool.img"
assert_ok "$CACHALOT" create -V 1G -s -b 16K tank/san
assert_ok "$CACHALOT" set sharenbd=on tank/san
san_up
assert_ok mkfs.xfs -q "$LOOP"
assert_ok mount -o noatime "$LOOP" "$XFS_MNT"
mkdir -p "$XFS_MNT/data" "$XFS_MNT/log"
D=$XFS_MNT
mariadb_init "$D/data" "$D/log" "$T/run"
mariadb_start
sql "create database sbtest"
SB=(sysbench oltp_read_write --mysql-socket="$MY_SOCK" --mysql-user=root
    --tables=2 --table-size=10000 --rand-type=uniform)
"${SB[@]}" prepare >"$ARTIFACTS/sb-prepare.log" 2>&1 || fail "sysbench prepare failed"
"${SB[@]}" --threads=4 --time=10 run >"$ARTIFACTS/sb-run.log" 2>&1 || fail "sysbench run failed"
tps=$(awk '/transactions:/ { gsub(/\(/, "", $3); print $3 }' "$ARTIFACTS/sb-run.log")
note "sysbench over NBD: $tps tps"
[[ ${tps%.*} -gt 0 ]] || fail "no transactions"
check_tables sbtest
# InnoDB's fsyncs must reach the volume as NBD flushes (nbdfuse turns the loop
# device's flushes into NBD_CMD_FLUSH), or nothing below would prove durability.
ops=$(assert_ok "$CACHALOT" analytics show nbd.ops --by op --last 300s)
echo "$ops"
assert_contains "$ops" "flush" "InnoDB fsyncs arrive as NBD flushes"

note "kill -9 of the cachalot daemon under load"
sql "create database ack; create table ack.t (id int primary key, pad varchar(200)) engine=innodb"
ACKED=$T/acked
: >"$ACKED"
# The writer ends at its first error: check_writer_errors fails on one met
# before the daemon was killed (MariaDB's messages after the kill vary).
writer() {
    local i=0
    while true; do
        i=$((i + 1))
        writer_step "$T/werr" timeout 20 mariadb -S "$MY_SOCK" -uroot -e \
            "insert into ack.t values ($i, repeat('a', 200))" || return 0
        echo "$i" >>"$ACKED"
    done
}
writer &
wpid=$!
"${SB[@]}" --threads=4 --time=60 run >"$ARTIFACTS/sb-kill.log" 2>&1 &
sbpid=$!
sleep 6
# Kill only once the writer has an acknowledged insert to check (on a loaded
# machine it may have none yet after the fixed sleep).
wait_until 60 "an acknowledged insert of the writer" test -s "$ACKED"
kill9_daemon
sleep 1
mariadb_kill9
kill "$sbpid" "$wpid" 2>/dev/null || true
wait "$wpid" 2>/dev/null || true
wait "$sbpid" 2>/dev/null || true
check_writer_errors "$T/werr" "the insert writer" "" .
n_acked=$(wc -l <"$ACKED")
((n_acked > 0)) || fail "the writer saw no acknowledged insert before the kill"
note "$n_acked inserts acknowledged before the daemon died"
san_down

start_daemon
san_up
assert_ok mount -o noatime "$LOOP" "$XFS_MNT"
note "xfs mounted after the crash (log recovery)"
mariadb_start
check_tables sbtest
check_tables ack
sql "select id from ack.t order by id" >"$T/present"
missing=$(comm -23 <(sort "$ACKED") <(sort "$T/present") | head -5)
[[ -z $missing ]] || fail "acknowledged inserts lost: $missing"
mariadb_stop
san_down
note "xfs_repair -n: the file system is consistent"
san_up
assert_ok xfs_repair -n "$LOOP"
san_down
stop_daemon
echo "PASS"
