#!/usr/bin/env bash
# timeout: 300
# MariaDB under a sysbench load on a raidz2 pool of five files: one file deleted
# and a range of another overwritten with noise while it runs. MariaDB keeps
# running; `pool status` says DEGRADED and names both (the deleted one REMOVED,
# the other with the CKSUM errors a scrub finds); both are replaced and
# resilvered under the load; then scrub finds 0 errors, the pool is ONLINE and
# CHECK TABLE is clean.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/e2e/fuse_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/fuse_lib.sh"

command -v mariadbd >/dev/null || fail "mariadb-server is not installed"
command -v sysbench >/dev/null || fail "sysbench is not installed"
C=$CACHALOT

start_daemon
P=$(mktmp)
DEVS=()
for i in 0 1 2 3 4; do DEVS+=("$P/d$i"); done
assert_ok "$C" pool create -s 384M tank raidz2 "${DEVS[@]}"
D=$(mktmp)
fuse_mount tank/mysql/data "$D/data" recordsize=16K
fuse_mount tank/mysql/log "$D/log" recordsize=128K
mariadb_init "$D/data" "$D/log" "$D/run"
mariadb_start
sql "create database sbtest"
SB=(sysbench oltp_read_write --mysql-socket="$MY_SOCK" --mysql-user=root
    --tables=4 --table-size=10000 --rand-type=uniform --report-interval=5)
"${SB[@]}" prepare >"$ARTIFACTS/sb-prepare.log" 2>&1 || fail "sysbench prepare failed"

note "sysbench load; d1 deleted, noise over 100 MiB of d3"
"${SB[@]}" --threads=4 --time=20 run >"$ARTIFACTS/sb-run.log" 2>&1 &
sbpid=$!
sleep 4
rm "${DEVS[1]}"
head -c $((100 * 1024 * 1024)) /dev/urandom |
    dd of="${DEVS[3]}" bs=1M seek=4 conv=notrunc status=none
for ((i = 0; i < 50; i++)); do
    st=$(assert_ok "$C" pool status tank)
    [[ $(status_col "$st" d1 2) == REMOVED ]] && break
    sleep 0.2
done
# The noise is found by checksum: a scrub reads every block (and repairs it).
assert_ok "$C" pool scrub -w tank
st=$(assert_ok "$C" pool status tank)
echo "$st"
assert_contains "$st" "state: DEGRADED"
assert_eq "$(status_col "$st" d1 2)" "REMOVED" "the deleted d1"
assert_eq "$(status_col "$st" d3 2)" "DEGRADED" "d3, overwritten with noise"
ck=$(status_col "$st" d3 5)
((ck > 0)) || fail "no CKSUM errors counted on d3"
kill -0 "$MARIADB_PID" || fail "mariadbd died"

note "replace both under the load, resilver"
assert_ok "$C" pool replace -s 384M tank "${DEVS[1]}" "$P/n1"
assert_ok "$C" pool replace -s 384M tank "${DEVS[3]}" "$P/n3"
for ((i = 0; i < 600; i++)); do
    st=$("$C" pool status tank)
    grep -q "resilver in progress\|RESILVERING" <<<"$st" || break
    sleep 0.2
done
echo "$st"
assert_contains "$st" "resilvered"
wait "$sbpid" || fail "sysbench failed under the device failures (see $ARTIFACTS/sb-run.log)"
tps=$(awk '/transactions:/ { gsub(/\(/, "", $3); print $3 }' "$ARTIFACTS/sb-run.log")
note "sysbench: $tps tps through the failures"
[[ ${tps%.*} -gt 0 ]] || fail "no transactions"
kill -0 "$MARIADB_PID" || fail "mariadbd died"

note "scrub: 0 errors, ONLINE, CHECK TABLE clean"
assert_ok "$C" pool scrub -w tank
st=$(assert_ok "$C" pool status tank)
echo "$st"
assert_contains "$st" "state: ONLINE"
assert_contains "$st" "with 0 errors"
check_tables sbtest
mariadb_stop
stop_daemon
