#!/usr/bin/env bash
# Replication lag of a MySQL set under a sysbench write load (issue 16: "the
# recovery point reached at a 1-minute schedule under sysbench load, median
# and worst lag"). A benchmark, not a test: it asserts nothing about the
# figures.
#
# Two appliances in network namespaces joined by a veth (tests/e2e/repl_lib.sh);
# MariaDB on A's FUSE mounts tank/mysql/data (16K) and tank/mysql/log (128K);
# relationship db (the MySQL set, so each cycle is a `mysql snapshot` of both)
# to B at SCHEDULE, run by the daemon's scheduler; sysbench oltp_write_only on
# A for TIME seconds. About once a second, after the first cycle completed:
# - seconds behind: the relationship's lag (now minus the creation time of
#   the newest set on B: the recovery point's age);
# - bytes behind: what A's members wrote since that set (`written@SNAP` of
#   data plus log: what a failover at that moment would lose).
# Printed and written to OUT_DIR/report.md: p50, p99 and max of both, the
# cycles, the bytes they sent, sysbench's TPS.
#
#   scripts/bench-repl-lag.sh [OUT_DIR]   (root: network namespaces; FUSE,
#                                          mariadb-server, sysbench)
#   SCHEDULE (default 1m), TIME seconds (default 600), THREADS (4),
#   RATE transactions/s (0: unlimited), TABLES (4), TABLE_SIZE (50000)
OUT_DIR=${1:-$(mktemp -d /tmp/bench-repl-lag.XXXXXX)}
SCHEDULE=${SCHEDULE:-1m}
TIME=${TIME:-600}
THREADS=${THREADS:-4}
RATE=${RATE:-0}
TABLES=${TABLES:-4}
TABLE_SIZE=${TABLE_SIZE:-50000}
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../tests/e2e/lib.sh"
# shellcheck source=tests/e2e/fuse_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../tests/e2e/fuse_lib.sh"
# shellcheck source=tests/e2e/repl_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../tests/e2e/repl_lib.sh"
mkdir -p "$OUT_DIR"

SBPID=
_stop_load() {
    [[ -n $SBPID ]] && kill "$SBPID" 2>/dev/null
    [[ -n ${MARIADB_PID:-} ]] && mariadb_stop
    return 0
}
REPL_CLEANUP_HOOKS+=(_stop_load)

# pct P FILE: the P-th percentile (nearest rank) of the numbers in FILE.
pct() {
    sort -n "$2" | awk -v p="$1" '{ v[NR] = $1 } END {
        if (NR == 0) { print "-"; exit }
        i = int((p * NR + 99) / 100); if (i < 1) i = 1; print v[i] }'
}

repl_link_up
start_node A "$NSA"
start_node B "$NSB" --replication "$TARGET"
assert_ok CA pool create -s 8G tank "$T/a.img" >/dev/null
assert_ok CB pool create -s 8G tank "$T/b.img" >/dev/null
repl_pair
note "MariaDB on A, sysbench prepare: $TABLES x $TABLE_SIZE rows"
mysql_source_on_a "$TABLES" "$TABLE_SIZE"
assert_ok CB create tank/dr

note "load for ${TIME}s ($THREADS threads), relationship db every $SCHEDULE"
"${SB[@]}" --threads="$THREADS" --time="$TIME" --rate="$RATE" --report-interval=10 run \
    >"$ARTIFACTS/sb-run.log" 2>&1 &
SBPID=$!
assert_ok CA replication create db --source tank/mysql/data,tank/mysql/log \
    --mysql-socket "$MY_SOCK" --target "$TARGET/tank/dr/data" --schedule "$SCHEDULE" \
    --keep "1h:every 1m"
: >"$T/lag"
: >"$T/behind"
while kill -0 "$SBPID" 2>/dev/null; do
    sleep 1
    row=$(CA debug call repl.list '{"name":"db"}')
    snap=$(jq -r '.[0].last_snapshot // empty' <<<"$row")
    [[ -n $snap ]] || continue
    jq -r '.[0].lag' <<<"$row" >>"$T/lag"
    behind=0
    for m in data log; do
        w=$(CA get -H -p -o value "written@$snap" "tank/mysql/$m" 2>/dev/null) || w=
        [[ $w =~ ^[0-9]+$ ]] && behind=$((behind + w))
    done
    echo "$behind" >>"$T/behind"
done
wait "$SBPID" || fail "sysbench run failed: $(tail -5 "$ARTIFACTS/sb-run.log")"
SBPID=
final=$(CA debug call repl.list '{"name":"db"}')
echo "$final" >"$ARTIFACTS/repl-list.json"
tps=$(awk '/transactions:/ { gsub(/[()]/, "", $3); print $3 }' "$ARTIFACTS/sb-run.log")
mib() { awk -v b="$1" 'BEGIN { if (b == "-") print "-"; else printf "%.1f", b / 1048576 }'; }
{
    echo "# Replication lag under sysbench ($(date -u '+%F %T') UTC)"
    echo
    echo "MySQL set tank/mysql/data,log -> B over a veth, schedule $SCHEDULE; sysbench"
    echo "oltp_write_only $TABLES x $TABLE_SIZE rows, $THREADS threads, ${TIME}s, rate $RATE: $tps TPS."
    echo "Samples (about one a second) after the first cycle: $(grep -c '' "$T/lag")."
    echo
    echo "| | p50 | p99 | max |"
    echo "|---|---|---|---|"
    echo "| seconds behind | $(pct 50 "$T/lag") | $(pct 99 "$T/lag") | $(pct 100 "$T/lag") |"
    echo "| MiB behind | $(mib "$(pct 50 "$T/behind")") | $(mib "$(pct 99 "$T/behind")") | $(mib "$(pct 100 "$T/behind")") |"
    echo
    echo "Cycles: $(jq -r '.[0].cycles' <<<"$final"), bytes sent: $(jq -r '.[0].total_bytes' <<<"$final"),"
    echo "last cycle: $(jq -r '.[0].bytes' <<<"$final") bytes at $(jq -r '.[0].rate' <<<"$final") B/s;"
    echo "last error: $(jq -r '.[0].last_error // "none"' <<<"$final")."
} | tee "$OUT_DIR/report.md"
cp "$T/lag" "$OUT_DIR/lag-seconds.txt"
cp "$T/behind" "$OUT_DIR/behind-bytes.txt"
mariadb_stop
stop_node A
stop_node B
