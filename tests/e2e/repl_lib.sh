# shellcheck shell=bash
# Two (or three) appliances for the replication e2e tests (sourced after
# lib.sh): daemons in network namespaces of their own, joined by a veth pair
# (real TCP over TLS between them). Their FUSE mounts stay visible here (the
# namespaces are network only).
#
#   repl_link_up            namespaces $NSA and $NSB, $IPA <-veth-> $IPB
#   start_node N NS [ARGS]  a daemon "N" (A, B, C) in namespace NS, home
#                           $(node_home N), logging into daemon.log (no HTTP
#                           API unless ARGS has --http ADDR)
#   stop_node N / kill9_node N / restart_node N (with the arguments it had)
#   cli N ARGS / CA ARGS / CB ARGS   the CLI of node N, A, B
#   repl_pair               pair A with B's listener at $TARGET
#   A relationship $REPL_REL (default r1) from A's mounted $SRC to B's $REPL_DST
#   (default tank/dst), run by hand:
#   token_b / wait_token    B's resume token of $REPL_DST / wait for one
#   kill_mid_transfer N S   kill -9 node N S seconds into a cycle, restart it
#   same_as_source FILE...  B's newest snapshot equals A's (sha256, listing)
#   MySQL sets (with fuse_lib.sh): mysql_source_on_a, on SOCK SQL, checksums
#   SOCK, mysql_on N ..., stop_mysql_servers (for REPL_CLEANUP_HOOKS)
#
# $T is a temp dir for the test; B's replication listener is $TARGET.
# At exit the functions named in REPL_CLEANUP_HOOKS run first (to stop what
# uses the daemons' mounts), then every node is stopped and the namespaces go.

C=$CACHALOT
T=$(mktmp)
NSA=crepA$$
NSB=crepB$$
IPA=198.51.100.201
IPB=198.51.100.202
PORT=7480
TARGET=$IPB:$PORT
# A cut link must be noticed within seconds, not the default 30.
export CACHALOT_REPL_TIMEOUT=3
declare -A PID NODE_ARGS
REPL_REL=${REPL_REL:-r1}
REPL_DST=${REPL_DST:-tank/dst}
REPL_CLEANUP_HOOKS=()

# node_home NAME: the daemon home of node NAME.
node_home() { echo "$T/home$1"; }
cli() {
    local n=$1
    shift
    "$C" --socket "$(node_home "$n")/s.sock" "$@"
}
CA() { cli A "$@"; }
CB() { cli B "$@"; }

start_node() {
    local n=$1 ns=$2 h i http=(--http none)
    shift 2
    # ARGS may give the node an HTTP API (its address then in http.addr).
    [[ " $* " == *" --http "* ]] && http=()
    h=$(node_home "$n")
    mkdir -p "$h"
    NODE_ARGS[$n]="$ns $*"
    echo "==== node $n start $(date '+%T') ====" >>"$ARTIFACTS/daemon.log"
    nsenter --net="/run/netns/$ns" "$C" serve --home "$h" --socket "$h/s.sock" "${http[@]}" \
        --iscsi off --nbd off --nfs off --portmap off "$@" >>"$ARTIFACTS/daemon.log" 2>&1 &
    PID[$n]=$!
    for ((i = 0; i < 200; i++)); do
        _alive "${PID[$n]}" || fail "node $n exited during startup"
        cli "$n" pool list >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    fail "node $n not ready after 20 s"
}

kill9_node() {
    kill -KILL "${PID[$1]}" 2>/dev/null || true
    wait "${PID[$1]}" 2>/dev/null || true
    PID[$1]=
    note "node $1 killed with SIGKILL"
}

# restart_node N: start node N again as it was started last.
restart_node() {
    # shellcheck disable=SC2086 # the words stored by start_node
    start_node "$1" ${NODE_ARGS[$1]}
}

stop_node() {
    local n=$1 pid=${PID[$1]} rc=0 i
    kill -TERM "$pid"
    for ((i = 0; i < 200; i++)); do
        _alive "$pid" || break
        sleep 0.1
    done
    wait "$pid" || rc=$?
    PID[$n]=
    ((rc == 0)) || fail "node $n exited with status $rc after SIGTERM"
}

_repl_cleanup() {
    local rc=$? n h i
    set +e
    for h in "${REPL_CLEANUP_HOOKS[@]}"; do "$h"; done
    for n in "${!PID[@]}"; do
        [[ -n ${PID[$n]} ]] || continue
        kill -TERM "${PID[$n]}" 2>/dev/null
        for ((i = 0; i < 50; i++)); do
            _alive "${PID[$n]}" || break
            sleep 0.1
        done
        kill -KILL "${PID[$n]}" 2>/dev/null
        wait "${PID[$n]}" 2>/dev/null
    done
    ip netns del "$NSA" 2>/dev/null
    ip netns del "$NSB" 2>/dev/null
    (exit "$rc")
    _e2e_cleanup
}
trap _repl_cleanup EXIT

# The link: A (IPA) <-veth-> B (IPB), documentation addresses in our own namespaces.
repl_link_up() {
    local ns
    ip netns add "$NSA"
    ip netns add "$NSB"
    ip link add "vA$$" type veth peer name "vB$$"
    ip link set "vA$$" netns "$NSA"
    ip link set "vB$$" netns "$NSB"
    ip -n "$NSA" addr add "$IPA/24" dev "vA$$"
    ip -n "$NSB" addr add "$IPB/24" dev "vB$$"
    for ns in "$NSA" "$NSB"; do ip -n "$ns" link set lo up; done
    ip -n "$NSA" link set "vA$$" up
    ip -n "$NSB" link set "vB$$" up
}

# repl_push_nodes: the link, A as a plain node, B listening for replication at
# TARGET, and a 2G pool "tank" on each (the push tests' common start).
repl_push_nodes() {
    repl_link_up
    start_node A "$NSA"
    start_node B "$NSB" --replication "$TARGET"
    assert_ok CA pool create -s 2G tank "$T/a.img"
    assert_ok CB pool create -s 2G tank "$T/b.img"
}

repl_pair() {
    local tok
    tok=$(assert_ok CB replication pair)
    assert_ok CA replication pair "$TARGET" "$tok" >/dev/null
}

# source_on_a: filesystem tank/src on A, mounted at $T/src; SRC names it.
source_on_a() {
    assert_ok CA create tank/src
    SRC=$T/src
    mkdir -p "$SRC"
    assert_ok CA mount tank/src "$SRC"
}

# same_as_source FILE...: mount the target, compare FILEs of the newest
# replicated snapshot with the source's (sha256), and the list of files; unmount
# (a mounted target refuses increments).
same_as_source() {
    local snap
    snap=$(CB list -H -t snapshot -o name "$REPL_DST" | tail -n 1)
    snap=${snap#*@}
    mkdir -p "$T/dst"
    assert_ok CB mount "$REPL_DST" "$T/dst"
    diff <(cd "$SRC/.cachalot/snapshot/$snap" && ls -l && sha256sum -- "$@") \
        <(cd "$T/dst/.cachalot/snapshot/$snap" && ls -l && sha256sum -- "$@") ||
        fail "the target's $snap differs from the source's"
    assert_ok CB unmount "$REPL_DST"
    note "target's $snap matches the source (sha256)"
}

token_b() { CB get -H -o value receive_resume_token "$REPL_DST" 2>/dev/null || true; }

# wait_token: wait until B has a resume token (a checkpoint of a transfer).
wait_token() {
    local i t
    for ((i = 0; i < 150; i++)); do
        t=$(token_b)
        [[ $t == 1-* ]] && return 0
        sleep 0.1
    done
    fail "no resume token on the target within 15 s (last seen: ${t:-nothing}; B: $(CB list -H -t snapshot -o name "$REPL_DST" 2>&1 | tail -n 1))"
}

# kill_mid_transfer NODE SECS: start a cycle of $REPL_REL (on node
# $REPL_RUNNER, default A; B for a pull), kill -9 NODE SECS after the target's
# resume token (a checkpoint) is on disk, and start NODE again. The transfer
# must last well beyond the first checkpoint (32 MiB): at 20 MiB/s, 96 MiB
# leave 3 s for the kill.
kill_mid_transfer() {
    local run_pid
    cli "${REPL_RUNNER:-A}" replication run "$REPL_REL" >/dev/null 2>&1 &
    run_pid=$!
    wait_token
    # The token shows before the receive's commit of it ends: commit B's pool,
    # so a kill of B never lands before the checkpoint does (a fixed wait for
    # that commit is a race on a loaded machine).
    CB debug call pool.sync "{\"name\":\"${REPL_DST%%/*}\"}" >/dev/null
    sleep "$2"
    kill9_node "$1"
    wait "$run_pid" 2>/dev/null || true
    restart_node "$1"
}

# mysql_source_on_a TABLES ROWS: MariaDB on A's tank/mysql/data (16K) and log
# (128K), mounted under $T/src, with sysbench's oltp_write_only tables prepared;
# SB holds the sysbench command for later runs (needs fuse_lib.sh).
mysql_source_on_a() {
    local tables=$1 rows=$2 m
    for m in data:16K log:128K; do
        assert_ok CA create -p -o "recordsize=${m#*:}" "tank/mysql/${m%:*}"
        mkdir -p "$T/src/${m%:*}"
        assert_ok CA mount "tank/mysql/${m%:*}" "$T/src/${m%:*}"
    done
    mariadb_init "$T/src/data" "$T/src/log" "$T/src/run"
    mariadb_start
    sql "create database sbtest"
    SB=(sysbench oltp_write_only --mysql-socket="$MY_SOCK" --mysql-user=root
        --tables="$tables" --table-size="$rows" --rand-type=uniform)
    "${SB[@]}" prepare >"$ARTIFACTS/sb-prepare.log" 2>&1 || fail "sysbench prepare failed"
}

# run_until_ok NODE NAME: `replication run NAME` on node NODE (A or B), tried
# once a second for 15 s (after a fault the other side may hold the receive
# until its timeout, and a cycle is refused until then, changing nothing); the
# last output in $out; the test fails if no cycle succeeds.
run_until_ok() {
    local node=$1 name=$2 i
    for ((i = 0; i < 15; i++)); do
        if out=$("C$node" replication run "$name" 2>&1); then
            return 0
        fi
        sleep 1
    done
    fail "replication run $name on $node: no cycle succeeded in 15 s after the fault: $out"
}

# Servers started by `mysql clone|failover` outlive the CLI: their pids go in
# SERVER_PIDS (the sysbench run in SBPID); stop_mysql_servers stops them and
# the source server before the daemons that hold their files go (a test adds
# it to REPL_CLEANUP_HOOKS).
SERVER_PIDS=()
SBPID=
stop_mysql_servers() {
    local p
    [[ -n $SBPID ]] && kill "$SBPID" 2>/dev/null
    for p in "${SERVER_PIDS[@]}" $MARIADB_PID; do kill -KILL "$p" 2>/dev/null; done
    for p in "${SERVER_PIDS[@]}" $MARIADB_PID; do
        while kill -0 "$p" 2>/dev/null; do sleep 0.1; done
    done
    find "$T" -maxdepth 3 -name error.log -path '*.run/*' -exec cp {} "$ARTIFACTS/" \; 2>/dev/null
    [[ -n ${MY_ERRLOG:-} && -f $MY_ERRLOG ]] && cp "$MY_ERRLOG" "$ARTIFACTS/mariadb-error.log"
    SERVER_PIDS=()
    MARIADB_PID=
}

# on SOCK SQL: run SQL on the server at SOCK.
on() {
    local s=$1
    shift
    mariadb -S "$s" -uroot -N -B -e "$*"
}

# checksums SOCK: "table checksum" of every sbtest table of the server at SOCK.
checksums() {
    local t
    for t in $(on "$1" "select table_name from information_schema.tables where table_schema='sbtest' order by 1"); do
        on "$1" "checksum table sbtest.$t"
    done
}

# mysql_on N SUBCOMMAND ARGS...: `cachalot mysql` on node N (inside `mysql`
# subcommands --socket is the MySQL server's: the daemon's is --daemon-socket).
mysql_on() {
    local n=$1 sub=$2
    shift 2
    "$C" mysql "$sub" --daemon-socket "$(node_home "$n")/s.sock" "$@"
}

# diverge_for_failback: both sides change after a break, as before a failback:
# B (the copy, tank/dst) gets a file; A (tank/src, mounted at $SRC) gets one it
# will lose and the snapshot tank/src@mine-a, which a reverse must name.
diverge_for_failback() {
    assert_ok CB mount tank/dst "$T/dst"
    echo "written on B after the failover" >"$T/dst/failback"
    assert_ok CB unmount tank/dst
    echo "A's own, lost by the failback" >"$SRC/lost"
    assert_ok CA unmount tank/src
    assert_ok CA snapshot tank/src@mine-a
}
