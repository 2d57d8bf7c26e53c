# shellcheck shell=bash
# Helpers for the FUSE e2e tests (sourced after lib.sh): a pool with mounted
# filesystems, and a private MariaDB on cachalot mounts.
#
#   fuse_pool SIZE             start the daemon, create pool 'tank' on a file of SIZE
#   fuse_mount DS DIR [PROPS]  create dataset DS (-o PROPS...) and mount it on DIR
#   mariadb_init DATA LOG RUN  mariadb-install-db into DATA (redo/binlog in LOG);
#                              with MY_PORT set it listens on 127.0.0.1:MY_PORT
#                              (replicas need TCP), else on its socket only
#   mariadb_start / mariadb_stop / mariadb_kill9 / sql SQL...
#   mariadb_on_cachalot SIZE   all of the above for the recommended layout: pool of
#                              SIZE, tank/mysql/data (16K) and tank/mysql/log (128K)
#                              mounted under a new temp dir $D, MariaDB started
#
# Everything started here is stopped on exit (MariaDB first, then the daemon,
# which unmounts), also on failure.

MARIADB_PID=
MY_CNF=

_fuse_cleanup() {
    local rc=$?
    set +e
    if [[ -n $MARIADB_PID ]] && kill -0 "$MARIADB_PID" 2>/dev/null; then
        kill -KILL "$MARIADB_PID" 2>/dev/null
        wait "$MARIADB_PID" 2>/dev/null
    fi
    [[ -n ${MY_ERRLOG:-} && -f $MY_ERRLOG ]] && cp "$MY_ERRLOG" "$ARTIFACTS/mariadb-error.log"
    (exit "$rc")
    _e2e_cleanup
}
trap _fuse_cleanup EXIT

fuse_pool() {
    start_daemon
    FUSE_TMP=$(mktmp)
    assert_ok "$CACHALOT" pool create -s "$1" tank "$FUSE_TMP/disk0.img"
}

fuse_mount() {
    local ds=$1 dir=$2
    shift 2
    local opts=()
    for p in "$@"; do opts+=(-o "$p"); done
    assert_ok "$CACHALOT" create -p "${opts[@]}" "$ds"
    mkdir -p "$dir"
    assert_ok "$CACHALOT" mount "$ds" "$dir"
    grep -q " $dir fuse" /proc/mounts || fail "$ds is not mounted on $dir"
}

mariadb_init() {
    local data=$1 log=$2 run=$3 d
    mkdir -p "$run"
    chown mysql:mysql "$data" "$log" "$run"
    # mysqld runs as 'mysql': it must reach the mount points through our temp dirs.
    for d in "$data" "$log" "$run"; do
        d=$(dirname "$d")
        while [[ $d == "$_E2E_ROOT"* ]]; do
            chmod o+x "$d"
            d=$(dirname "$d")
        done
    done
    MY_ERRLOG=$run/error.log
    MY_CNF=$run/my.cnf
    MY_SOCK=$run/mysqld.sock
    local net=skip-networking
    [[ -n ${MY_PORT:-} ]] && net=$(printf 'port=%s\nbind-address=127.0.0.1' "$MY_PORT")
    cat >"$MY_CNF" <<CNF
[mysqld]
datadir=$data
innodb_log_group_home_dir=$log
log-bin=$log/binlog
server-id=1
sync_binlog=1
socket=$MY_SOCK
pid-file=$run/mysqld.pid
log-error=$MY_ERRLOG
$net
user=mysql
innodb_buffer_pool_size=64M
innodb_log_file_size=32M
innodb_flush_log_at_trx_commit=1
CNF
    mariadb-install-db --defaults-file="$MY_CNF" --skip-test-db \
        --auth-root-authentication-method=normal >"$ARTIFACTS/install-db.log" 2>&1 || {
        # The server's own log says why; it lives in the temp dir removed at exit.
        cp "$MY_ERRLOG" "$ARTIFACTS/install-db-error.log" 2>/dev/null
        fail "mariadb-install-db failed (see $ARTIFACTS/install-db.log and install-db-error.log)"
    }
    export MY_SOCK MY_CNF MY_ERRLOG
}

mariadb_on_cachalot() {
    fuse_pool "$1"
    D=$(mktmp)
    fuse_mount tank/mysql/data "$D/data" recordsize=16K
    fuse_mount tank/mysql/log "$D/log" recordsize=128K
    mariadb_init "$D/data" "$D/log" "$D/run"
    mariadb_start
}

mariadb_start() {
    mariadbd --defaults-file="$MY_CNF" >>"$ARTIFACTS/mariadbd.out" 2>&1 &
    MARIADB_PID=$!
    local i
    for ((i = 0; i < 240; i++)); do
        if mariadb -S "$MY_SOCK" -uroot -e "select 1" >/dev/null 2>&1; then
            note "mariadbd up (pid $MARIADB_PID)"
            return 0
        fi
        kill -0 "$MARIADB_PID" 2>/dev/null || {
            tail -n 30 "$MY_ERRLOG" >&2
            fail "mariadbd exited during startup"
        }
        sleep 0.25
    done
    tail -n 30 "$MY_ERRLOG" >&2
    fail "mariadbd not ready after 60 s"
}

mariadb_stop() {
    [[ -n $MARIADB_PID ]] || return 0
    kill -TERM "$MARIADB_PID" 2>/dev/null || true
    local i
    for ((i = 0; i < 600; i++)); do
        kill -0 "$MARIADB_PID" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$MARIADB_PID" 2>/dev/null; then
        kill -KILL "$MARIADB_PID" 2>/dev/null || true
        wait "$MARIADB_PID" 2>/dev/null || true
        MARIADB_PID=
        fail "mariadbd did not stop within 60 s"
    fi
    wait "$MARIADB_PID" 2>/dev/null || true
    MARIADB_PID=
}

mariadb_kill9() {
    kill -KILL "$MARIADB_PID" 2>/dev/null || true
    wait "$MARIADB_PID" 2>/dev/null || true
    MARIADB_PID=
    note "mariadbd killed with SIGKILL"
}

sql() { mariadb -S "$MY_SOCK" -uroot -N -B -e "$*"; }

# check_tables DB: CHECK TABLE every table of DB; fail unless all are OK.
check_tables() {
    local db=$1 t out
    for t in $(sql "select table_name from information_schema.tables where table_schema='$db'"); do
        out=$(sql "check table $db.$t" | awk '$3 == "status" { print $4 }')
        [[ $out == OK ]] || fail "CHECK TABLE $db.$t: $(sql "check table $db.$t")"
    done
    note "CHECK TABLE: every table of $db is OK"
}
