#!/usr/bin/env bash
# timeout: 420
# `make demo | tee demo.log`, then Ctrl-C: the terminal's SIGINT kills tee as well as
# the demo, and the demo's cleanup must still stop everything. Runs the real
# scripts/demo.sh (with a 2,000-row sysbench table instead of 100,000) with its
# output in a pipe, kills the pipe's reader, sends SIGINT to the demo's process group
# as a terminal does, and checks that no daemon, MariaDB, sysbench, mount or loop
# device of the demo is left. A second run on the same directory must re-import the
# pool and find the table (so the first cleanup exported it cleanly); it is
# interrupted the same way with only stdout piped.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

command -v mariadbd >/dev/null || fail "mariadb-server is not installed"
command -v sysbench >/dev/null || fail "sysbench is not installed"

WORK=$(mktmp)
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
export CACHALOT_DEMO_DIR=$WORK/demo
export CACHALOT_BIN=$CACHALOT
export CACHALOT_DEMO_HTTP=127.0.0.1:0
CACHALOT_DEMO_MYSQL_PORT=$(free_port)
export CACHALOT_DEMO_MYSQL_PORT
export CACHALOT_DEMO_ROWS=2000
DEMO_DIR=$CACHALOT_DEMO_DIR
DEMO_PID=
READER=

# The processes the demo starts, found by the demo directory in their command line.
demo_pids() { pgrep -f -- "$DEMO_DIR/" || true; }

# If the test fails half-way, stop whatever the demo left (the lib then unmounts).
reap_demo() {
    set +e
    local pids
    [[ -n $DEMO_PID ]] && kill -KILL -- "-$DEMO_PID" 2>/dev/null
    pids=$(demo_pids)
    if [[ -n $pids ]]; then
        # shellcheck disable=SC2086
        kill -TERM $pids 2>/dev/null
        sleep 3
        # shellcheck disable=SC2086
        kill -KILL $(demo_pids) 2>/dev/null
    fi
    return 0
}
trap '_rc=$?; set +e; reap_demo; (exit $_rc); _e2e_cleanup' EXIT

# start_demo OUT both|stdout: the demo writes into a FIFO read by `tee OUT`
# (stdout and stderr, or only stdout); it runs in its own session and process
# group, like a shell job in a terminal. Both get SIGINT back at its default: a
# non-interactive shell starts background commands with SIGINT ignored, which a
# terminal's foreground job does not have.
start_demo() {
    local out=$1 mode=$2 fifo
    fifo=$(mktemp -u "$WORK/fifo.XXXXXX")
    mkfifo "$fifo"
    env --default-signal=INT,QUIT,PIPE tee "$out" <"$fifo" >/dev/null &
    READER=$!
    if [[ $mode == both ]]; then
        setsid env --default-signal=INT,QUIT,PIPE bash "$REPO/scripts/demo.sh" \
            >"$fifo" 2>&1 &
    else
        setsid env --default-signal=INT,QUIT,PIPE bash "$REPO/scripts/demo.sh" \
            >"$fifo" 2>>"$ARTIFACTS/demo-stderr.log" &
    fi
    DEMO_PID=$!
    local i
    for ((i = 0; i < 50; i++)); do
        [[ $(ps -o pgid= -p "$DEMO_PID" 2>/dev/null | tr -d ' ') == "$DEMO_PID" ]] && break
        sleep 0.1
    done
    [[ $(ps -o pgid= -p "$DEMO_PID" | tr -d ' ') == "$DEMO_PID" ]] ||
        fail "the demo is not the leader of its process group"
    for ((i = 0; i < 1200; i++)); do
        grep -q "Press Ctrl-C" "$out" && return 0
        _alive "$DEMO_PID" || {
            tail -n 30 "$out" >&2
            fail "the demo exited before it was ready"
        }
        sleep 0.25
    done
    tail -n 30 "$out" >&2
    fail "the demo was not ready after 300 s"
}

# interrupt_demo OUT: what Ctrl-C does to `demo | tee`: the reader dies, then the
# demo's whole process group gets SIGINT. The demo must exit 0 (its INT trap), not
# 141 (killed by SIGPIPE in its cleanup), and leave nothing running or mounted.
interrupt_demo() {
    local out=$1 daemon mariadbd workload mounts loops i rc=0 p m
    daemon=$(pgrep -f -- "serve --home $DEMO_DIR/home") || fail "no demo daemon running"
    mariadbd=$(pgrep -f -- "--defaults-file=$DEMO_DIR/run/my.cnf") || fail "no demo MariaDB"
    workload=$(pgrep -f -- "--mysql-socket=$DEMO_DIR/run/mysqld.sock") || fail "no demo workload"
    mounts=$(awk -v d="$DEMO_DIR/" 'index($2, d) == 1 { print $2 }' /proc/mounts)
    loops=$(awk -v d="$DEMO_DIR/" 'index($2, d) == 1 && $1 ~ /^\/dev\/loop/ { print $1 }' /proc/mounts)
    assert_eq "$(wc -l <<<"$mounts")" 2 "the demo's two mounts before Ctrl-C"
    note "running: daemon $daemon, mariadbd $mariadbd, sysbench $workload, mounts:" $mounts "loop devices:" $loops

    kill -INT "$READER"
    wait "$READER" 2>/dev/null || true
    READER=
    kill -INT -- "-$DEMO_PID"
    for ((i = 0; i < 1200; i++)); do
        _alive "$DEMO_PID" || break
        sleep 0.1
    done
    _alive "$DEMO_PID" && fail "the demo still runs 120 s after Ctrl-C"
    wait "$DEMO_PID" || rc=$?
    DEMO_PID=
    note "demo exited with status $rc after Ctrl-C"
    assert_eq "$rc" 0 "demo exit status after Ctrl-C (141 = killed by SIGPIPE)"

    for p in $daemon $mariadbd $workload; do
        _alive "$p" && fail "process $p ($(tr '\0' ' ' </proc/"$p"/cmdline)) still runs after Ctrl-C"
    done
    [[ -z $(demo_pids) ]] || fail "demo processes left: $(demo_pids | xargs ps -o pid=,args= -p)"
    for m in $mounts; do
        grep -q " $m " /proc/mounts && fail "$m still mounted after Ctrl-C"
    done
    # The loop devices detach themselves (autoclear) when the mounts go.
    for m in $loops; do
        for ((i = 0; i < 50; i++)); do
            [[ -e /sys/block/${m#/dev/}/loop/backing_file ]] || break
            sleep 0.1
        done
        [[ -e /sys/block/${m#/dev/}/loop/backing_file ]] &&
            fail "$m still attached ($(cat "/sys/block/${m#/dev/}/loop/backing_file"))"
    done
    grep -q "signal 2\|signal 15" "$DEMO_DIR/daemon.log" ||
        fail "the daemon did not get its shutdown signal: $(tail -n 3 "$DEMO_DIR/daemon.log")"
    grep -q "stopped; pool files kept" "$DEMO_DIR/cleanup.log" ||
        fail "cleanup did not finish: $(cat "$DEMO_DIR/cleanup.log")"
    return 0
}

note "first run: stdout and stderr into a pipe whose reader dies"
start_demo "$ARTIFACTS/run1.out" both
assert_contains "$(cat "$ARTIFACTS/run1.out")" "creating pool 'tank'" "first run creates the pool"
interrupt_demo "$ARTIFACTS/run1.out"
cp "$DEMO_DIR/cleanup.log" "$ARTIFACTS/cleanup-run1.log"

note "second run on the same directory: stdout piped"
start_demo "$ARTIFACTS/run2.out" stdout
out=$(cat "$ARTIFACTS/run2.out")
assert_contains "$out" "pool 'tank' re-imported" "second run re-imports the pool"
[[ $out == *"loading a sysbench table"* ]] && fail "second run had to load the table again"
grep -qE '^\|? *2000 *\|?$' "$ARTIFACTS/run2.out" ||
    fail "sbtest1 does not have its 2000 rows: $(grep -A3 sbtest1_rows "$ARTIFACTS/run2.out")"
interrupt_demo "$ARTIFACTS/run2.out"
cp "$DEMO_DIR/cleanup.log" "$ARTIFACTS/cleanup-run2.log"
cp "$DEMO_DIR/daemon.log" "$ARTIFACTS/demo-daemon.log"
echo "PASS"
