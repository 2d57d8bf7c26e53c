#!/usr/bin/env bash
# CPU cost of one MySQL transaction on a Cachalot FUSE mount: sysbench
# oltp_read_write on a private MariaDB whose datadir (recordsize=16K) and redo log
# and binlog (recordsize=128K) are Cachalot datasets, and per transaction: the
# daemon's CPU (utime+stime of all its threads, /proc/PID/stat fields 14+15),
# mariadbd's CPU, and the FUSE requests by op (`analytics show fuse.ops --by op`).
# On a machine whose cores are shared, CPU per transaction compares builds
# better than TPS does.
#
#   [ROWS=100000] [TABLES=8] [THREADS=16] [TIME=60] [WARMUP=20] [ROUNDS=2] \
#   [BUFFER_POOL=128M] [PERF=PREFIX] scripts/bench-mysql-cpu.sh [BINARY...]
#
# The tables are prepared once, by the first binary; then each round starts each
# BINARY in turn (default target/ci/cachalot) on the same home and pool (the
# daemon re-imports and re-mounts them), starts MariaDB cold, runs WARMUP seconds
# of load, measures TIME seconds, and stops both: builds alternate A B A B.
# PERF=PREFIX records `perf record` of the daemon during each measured run into
# PREFIX.ROUND.INDEX (PERF_OPTS, by default DWARF call graphs). Needs root.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
BINS=("$@")
[[ ${#BINS[@]} -gt 0 ]] || BINS=("$REPO/target/ci/cachalot")
for i in "${!BINS[@]}"; do BINS[i]=$(realpath "${BINS[i]}"); done
ROWS=${ROWS:-100000}
TABLES=${TABLES:-8}
THREADS=${THREADS:-16}
TIME=${TIME:-60}
WARMUP=${WARMUP:-20}
ROUNDS=${ROUNDS:-2}
W=$(mktemp -d /var/tmp/bench-mysql-cpu.XXXXXX)
chmod 755 "$W"
export CACHALOT_SOCKET=$W/home/cachalot.sock
DP=
MP=
PP=
stop_mariadb() {
    [[ -n $MP ]] || return 0
    kill -TERM "$MP" 2>/dev/null || true
    wait "$MP" 2>/dev/null || true
    MP=
}
stop_daemon() {
    [[ -n $DP ]] || return 0
    kill -TERM "$DP" 2>/dev/null || true
    wait "$DP" 2>/dev/null || true
    DP=
}
cleanup() {
    set +e
    [[ -z $PP ]] || { kill -INT "$PP"; wait "$PP"; }
    stop_mariadb
    stop_daemon
    grep -n "panicked" "$W"/daemon.*.log >&2 && echo "daemon panicked (logs above)" >&2
    rm -rf "$W"
}
trap cleanup EXIT

# start_daemon BINARY: serve the home in $W/home (re-mounting what it had).
start_daemon() {
    "$1" serve --home "$W/home" --http none --nfs off --portmap off --nbd off --iscsi off \
        >>"$W/daemon.$(basename "$1").log" 2>&1 &
    DP=$!
    for _ in $(seq 200); do
        "$1" pool list >/dev/null 2>&1 && return 0
        kill -0 "$DP" 2>/dev/null || break
        sleep 0.1
    done
    echo "daemon $1 did not start" >&2
    exit 1
}

start_mariadb() {
    mariadbd --defaults-file="$W/my.cnf" >>"$W/mariadbd.out" 2>&1 &
    MP=$!
    for _ in $(seq 600); do
        mariadb -S "$W/run/mysqld.sock" -uroot -e "select 1" >/dev/null 2>&1 && return 0
        kill -0 "$MP" 2>/dev/null || break
        sleep 0.25
    done
    tail -n 20 "$W/run/error.log" >&2
    exit 1
}

sb() {
    sysbench oltp_read_write --db-driver=mysql --mysql-socket="$W/run/mysqld.sock" \
        --mysql-user=root --mysql-db=sbtest --tables="$TABLES" --table-size="$ROWS" \
        --rand-type=uniform "$@"
}

cpu() { awk -v t="$(getconf CLK_TCK)" '{ print ($14 + $15) / t }' "/proc/$1/stat"; }

# next_second: sleep until the next whole second, print it (analytics are per second).
next_second() {
    local now
    now=$(date +%s.%N)
    sleep "$(echo "1 - ${now#*.} / 1000000000" | bc -l)"
    echo $((${now%.*} + 1))
}

mkdir -p "$W/home" "$W/pool" "$W/data" "$W/log" "$W/run"
cat >"$W/my.cnf" <<CNF
[mysqld]
datadir=$W/data
innodb_log_group_home_dir=$W/log
log-bin=$W/log/binlog
server-id=1
sync_binlog=1
socket=$W/run/mysqld.sock
pid-file=$W/run/mysqld.pid
log-error=$W/run/error.log
skip-networking
user=root
max_connections=200
innodb_buffer_pool_size=${BUFFER_POOL:-128M}
innodb_log_file_size=256M
innodb_flush_log_at_trx_commit=1
CNF
B0=${BINS[0]}
start_daemon "$B0"
"$B0" pool create -s 16G tank "$W/pool/d0" >/dev/null
"$B0" create -p -o recordsize=16K tank/mysql/data
"$B0" create -p -o recordsize=128K tank/mysql/log
"$B0" mount tank/mysql/data "$W/data"
"$B0" mount tank/mysql/log "$W/log"
mariadb-install-db --defaults-file="$W/my.cnf" --skip-test-db \
    --auth-root-authentication-method=socket >"$W/install-db.log" 2>&1
start_mariadb
mariadb -S "$W/run/mysqld.sock" -uroot -e "create database sbtest"
t0=$(date +%s)
sb --threads="$TABLES" prepare >/dev/null
echo "# prepared $TABLES x $ROWS rows in $(($(date +%s) - t0)) s; buffer pool ${BUFFER_POOL:-128M}," \
    "$THREADS threads, ${WARMUP} s warm-up, ${TIME} s measured; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
stop_mariadb
stop_daemon

for r in $(seq "$ROUNDS"); do
    for i in "${!BINS[@]}"; do
        B=${BINS[i]}
        start_daemon "$B"
        start_mariadb
        sb --threads="$THREADS" --time="$WARMUP" run >/dev/null
        if [[ -n ${PERF:-} ]]; then
            # shellcheck disable=SC2086 # PERF_OPTS is a list of options
            perf record -q ${PERF_OPTS:---call-graph dwarf,16384 -F 499} -p "$DP" \
                -o "$PERF.$r.$i" 2>/dev/null &
            PP=$!
            sleep 0.5
        fi
        t[0]=$(next_second)
        d0=$(cpu "$DP")
        m0=$(cpu "$MP")
        out=$(sb --threads="$THREADS" --time="$TIME" run)
        d1=$(cpu "$DP")
        m1=$(cpu "$MP")
        t[1]=$(next_second)
        if [[ -n $PP ]]; then
            kill -INT "$PP"
            wait "$PP" 2>/dev/null || true
            PP=
        fi
        sleep 2
        trx=$(awk '/transactions:/ { print $2 }' <<<"$out")
        tps=$(awk '/transactions:/ { gsub(/\(/, "", $3); print $3 }' <<<"$out")
        maxms=$(awk '/max:/ { print $2; exit }' <<<"$out")
        ops=$("$B" analytics show fuse.ops --by op --from "${t[0]}" --to "${t[1]}" -H -p |
            sort -t$'\t' -k2,2 -g -r |
            awk -F'\t' -v s=$((t[1] - t[0])) -v n="$trx" '
                { c = $2 * s; total += c; if ($2 * s / n >= 0.05) ops = ops sprintf(" %s=%.2f", $1, c / n) }
                END { printf "fuse_req/trx=%.2f:%s", total / n, ops }')
        python3 -c "
d, m, n = $d1 - $d0, $m1 - $m0, $trx
print(f'round $r $(basename "$B")#$i: trx={n} tps=$tps max_ms=$maxms' +
      f' daemon_us/trx={d * 1e6 / n:.0f} mariadbd_us/trx={m * 1e6 / n:.0f} $ops')"
        stop_mariadb
        stop_daemon
    done
done
