# shellcheck shell=bash
# Helpers for the end-to-end tests. Each tests/e2e/test_*.sh starts with
#
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
#
# scripts/run-tests.sh runs every script with `bash`, a timeout, and
#   CACHALOT   absolute path of the cachalot binary (target/ci/cachalot)
#   REPO       repository root
#   ARTIFACTS  test-artifacts/<test name>, for logs worth keeping
# A script can also be run by hand: these default to the values above.
#
# Helpers: fail, assert_eq, assert_contains, assert_ok, assert_fails, wait_until,
# analytics_stored, mktmp, start_daemon, stop_daemon, kill9_daemon, writer_step,
# check_writer_errors, note, free_port, background, stop_background, need_browser,
# browser_python.
#
# Every test fails if the daemon panics (or logs an internal error), dies on its
# own, or exits non-zero when stopped; see _e2e_cleanup and stop_daemon.
set -euo pipefail
shopt -s inherit_errexit

REPO=${REPO:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
CACHALOT=${CACHALOT:-$REPO/target/ci/cachalot}
TEST_NAME=$(basename "${BASH_SOURCE[1]:-$0}" .sh)
ARTIFACTS=${ARTIFACTS:-$REPO/test-artifacts/$TEST_NAME}
export REPO CACHALOT ARTIFACTS
mkdir -p "$ARTIFACTS"
rm -f "$ARTIFACTS/daemon.log"

# All temp dirs of this test live under one root, removed on exit.
_E2E_ROOT=$(mktemp -d "/tmp/cachalot-e2e.$TEST_NAME.XXXXXX")
DAEMON_PID=
DAEMON_STARTS=0
_E2E_BACKGROUND=()
LAST_STDERR=

# fail MSG: print MSG (with the caller's location) to stderr and exit 1.
fail() {
    local where="${BASH_SOURCE[1]:-?}:${BASH_LINENO[0]:-?}"
    if [[ ${FUNCNAME[1]:-} == assert_* || ${FUNCNAME[1]:-} == wait_until || ${FUNCNAME[1]:-} == check_writer_errors ]]; then
        where="${BASH_SOURCE[2]:-?}:${BASH_LINENO[1]:-?}"
    fi
    echo "FAIL ($(basename "${where%%:*}"):${where##*:}): $*" >&2
    exit 1
}

# note MSG: progress line in the test's log.
note() { echo "--- $*" >&2; }

_show() { printf '%q' "$1"; }

# assert_eq ACTUAL EXPECTED MSG
assert_eq() {
    [[ $1 == "$2" ]] ||
        fail "${3:-values differ}: got $(_show "$1"), expected $(_show "$2")"
}

# assert_contains HAYSTACK NEEDLE MSG
assert_contains() {
    [[ $1 == *"$2"* ]] ||
        fail "${3:-missing substring}: $(_show "$2") not found in $(_show "$1")"
}

# assert_ok CMD...: run CMD; on non-zero exit fail with its stderr. CMD's
# stdout passes through, so `out=$(assert_ok "$CACHALOT" list)` works (under
# set -e the failed assignment then ends the test).
assert_ok() {
    local err rc=0
    err=$(mktemp "$_E2E_ROOT/assert.err.XXXXXX")
    "$@" 2>"$err" || rc=$?
    if ((rc != 0)); then
        fail "command failed (exit $rc): $* ; stderr: $(cat "$err")"
    fi
    cat "$err" >&2
}

# assert_fails CMD...: CMD must exit non-zero (and not by a signal) with exactly
# one non-empty line on stderr, which is printed and left in $LAST_STDERR.
assert_fails() {
    local out err rc=0 nlines
    out=$(mktemp "$_E2E_ROOT/assert.out.XXXXXX")
    err=$(mktemp "$_E2E_ROOT/assert.err.XXXXXX")
    "$@" >"$out" 2>"$err" || rc=$?
    LAST_STDERR=$(cat "$err")
    nlines=$(grep -c '' "$err" || true)
    if ((rc == 0)); then
        fail "expected failure, but succeeded: $*$(printf '\nstdout: %s' "$(cat "$out")")"
    fi
    if ((rc > 128)); then
        fail "expected a clean failure, but killed by signal $((rc - 128)): $* ; stderr: $LAST_STDERR"
    fi
    if [[ -z ${LAST_STDERR//[[:space:]]/} ]]; then
        fail "expected a one-line error on stderr, got none (exit $rc): $*"
    fi
    if ((nlines != 1)); then
        fail "expected a one-line error on stderr, got $nlines lines (exit $rc): $*$(printf '\n%s' "$LAST_STDERR")"
    fi
    echo "  ok, fails (exit $rc): $* -> $LAST_STDERR"
}

# flip_byte FILE OFFSET: invert every bit of the byte at OFFSET, so the file
# really changes. (Writing a fixed value such as 0xff leaves random data
# unchanged once in 256 runs: a corruption test that then passes by luck.)
flip_byte() {
    local old
    old=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
    [[ -n $old ]] || fail "flip_byte: $1 has no byte at offset $2"
    # shellcheck disable=SC2059 # the format is the octal escape we build
    printf "\\$(printf '%03o' $((255 - old)))" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}

# wait_until SECS WHAT CMD...: run CMD every 0.1 s until it succeeds; fail
# ("WHAT: not within SECS s") if it still does not after SECS seconds. A test
# waits this way for the state it needs next instead of sleeping a fixed time,
# which a loaded 2-core CI machine may overrun.
wait_until() {
    local secs=$1 what=$2 i
    shift 2
    for ((i = 0; i < secs * 10; i++)); do
        "$@" && return 0
        sleep 0.1
    done
    "$@" || fail "$what: not within $secs s"
}

# analytics_stored SECOND: true once the daemon's analytics sampler has stored
# the slot of unix second SECOND (or a later one), so a query whose range ends
# after SECOND sees all of it. The sampler appends each second's slot, empty or
# not, as a line {"t":SECOND,...} to HOME_DIR/analytics/sec-*.jsonl just after
# the second ends (docs/architecture.md), or later on a loaded machine.
analytics_stored() {
    local seg t
    seg=$(find "$HOME_DIR/analytics" -name 'sec-*.jsonl' 2>/dev/null | LC_ALL=C sort | tail -n 1)
    [[ -n $seg ]] || return 1
    t=$(tail -n 1 "$seg" | sed -n 's/^{"t":\([0-9]*\)[,}].*/\1/p')
    [[ -n $t ]] && ((t >= $1))
}

# mktmp: create and print a fresh temp dir (removed when the test exits).
# Safe in $(...): the cleanup removes the whole root, not a list.
# (Note: `fail` inside $(...) only leaves the subshell; assert outside it.)
mktmp() { mktemp -d "$_E2E_ROOT/tmp.XXXXXX"; }

# free_port: print a TCP port of 127.0.0.1 that is free now (for a server the
# test starts; the kernel picks it, so parallel tests do not collide).
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# status_col STATUS DEVICE N: field N of the `pool status` row of the device named
# DEVICE (its whole name, or the last component of its path). Matching a substring of
# the row picked the wrong row whenever the random temporary directory's name happened
# to contain the device's name (tmp.ad4irY holds "d4").
status_col() {
    awk -v d="$2" -v n="$3" '$1 == d || substr($1, length($1) - length(d)) == "/" d { print $n; exit }' <<<"$1"
}

# _alive PID: true if PID runs and is not a zombie.
_alive() {
    local stat rest
    [[ -n ${1:-} ]] || return 1
    { read -r stat <"/proc/$1/stat"; } 2>/dev/null || return 1
    rest=${stat##*) }
    [[ ${rest%% *} != Z ]]
}

_daemon_log_tail() {
    echo "---- last 30 lines of daemon.log ----" >&2
    tail -n 30 "$ARTIFACTS/daemon.log" >&2 2>/dev/null || true
}

# start_daemon: start `cachalot serve` on $HOME_DIR (a temp dir by default,
# kept across restarts), export CACHALOT_SOCKET, wait until it answers.
start_daemon() {
    [[ -x $CACHALOT ]] || fail "cachalot binary not found: $CACHALOT"
    if _alive "$DAEMON_PID"; then
        fail "start_daemon: daemon already running (pid $DAEMON_PID)"
    fi
    HOME_DIR=${HOME_DIR:-$(mktmp)}
    export HOME_DIR
    export CACHALOT_SOCKET=$HOME_DIR/cachalot.sock
    rm -f "$_E2E_ROOT/daemon.killed"
    DAEMON_STARTS=$((DAEMON_STARTS + 1))
    echo "==== start_daemon #$DAEMON_STARTS $(date '+%T') ====" >>"$ARTIFACTS/daemon.log"
    # Protocol servers bind only what a test asks for, so tests never fight over
    # well-known ports: NFS is off unless SERVE_ARGS (a string, e.g.
    # "--nfs 127.0.0.1:PORT --portmap off") says otherwise; DAEMON_ARGS (an array,
    # optional) adds more `serve` options.
    # shellcheck disable=SC2086
    "$CACHALOT" serve --home "$HOME_DIR" --socket "$CACHALOT_SOCKET" \
        --http 127.0.0.1:0 --iscsi "${DAEMON_ISCSI:-127.0.0.1:0}" ${SERVE_ARGS:---nfs off} \
        ${DAEMON_ARGS[@]+"${DAEMON_ARGS[@]}"} >>"$ARTIFACTS/daemon.log" 2>&1 &
    DAEMON_PID=$!
    local i
    for ((i = 0; i < 200; i++)); do
        if ! _alive "$DAEMON_PID"; then
            local rc=0
            wait "$DAEMON_PID" || rc=$?
            DAEMON_PID=
            _daemon_log_tail
            fail "daemon exited during startup (exit $rc)"
        fi
        if "$CACHALOT" pool list >/dev/null 2>&1; then
            note "daemon up (pid $DAEMON_PID, home $HOME_DIR)"
            return 0
        fi
        sleep 0.1
    done
    _daemon_log_tail
    fail "daemon not ready after 20 s"
}

# stop_daemon: SIGTERM, wait up to 60 s, else SIGKILL and fail.
# The daemon's exit status is left in $DAEMON_EXIT.
# (60 s: with a busy FUSE mount the shutdown alone waits 15 s for the mount's
# threads (fuse JOIN_TIMEOUT) before it exports; 20 s left a loaded machine 5.)
stop_daemon() {
    [[ -n $DAEMON_PID ]] || fail "stop_daemon: no daemon started"
    local pid=$DAEMON_PID i
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 600; i++)); do
        _alive "$pid" || break
        sleep 0.1
    done
    if _alive "$pid"; then
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        DAEMON_PID=
        _daemon_log_tail
        fail "daemon did not exit within 60 s of SIGTERM (killed)"
    fi
    DAEMON_EXIT=0
    wait "$pid" 2>/dev/null || DAEMON_EXIT=$?
    DAEMON_PID=
    note "daemon stopped (exit $DAEMON_EXIT)"
    if [[ $DAEMON_EXIT -ne 0 && -z ${ALLOW_UNCLEAN_EXIT:-} ]]; then
        _daemon_log_tail
        fail "daemon exited with status $DAEMON_EXIT after SIGTERM (a clean shutdown is 0)"
    fi
}

# _daemon_log_errors: print the daemon log's lines that show a panic or an
# internal error (a caught panic); status 1 if there are none.
_daemon_log_errors() {
    [[ -f $ARTIFACTS/daemon.log ]] || return 1
    grep -m 5 -E "panicked at|internal error" "$ARTIFACTS/daemon.log"
}

# kill9_daemon: SIGKILL the daemon (crash simulation) and reap it. From just
# before the kill until the next start_daemon, writer_step books errors as
# "killed" (see there).
kill9_daemon() {
    [[ -n $DAEMON_PID ]] || fail "kill9_daemon: no daemon started"
    : >"$_E2E_ROOT/daemon.killed"
    kill -KILL "$DAEMON_PID" 2>/dev/null || true
    wait "$DAEMON_PID" 2>/dev/null || true
    DAEMON_PID=
    note "daemon killed with SIGKILL"
}

# Writers under kill9_daemon. A background writer loops until its first error
# and ends there; each of its steps runs through `writer_step FILE CMD...`, which
# passes CMD's stdout through and, when CMD fails, appends one line to FILE:
#   alive (exit N): STDERR     the daemon had not been killed when CMD failed
#   killed (exit N): STDERR    kill9_daemon had begun (CMD may have run into it)
# check_writer_errors then says whether the writers ended as a kill explains.
writer_step() {
    local file=$1 err rc=0 when=alive
    shift
    err=$(mktemp "$_E2E_ROOT/writer.err.XXXXXX")
    "$@" 2>"$err" || rc=$?
    if ((rc != 0)); then
        # Looked at after the failure: "alive" means alive for the whole of CMD.
        [[ -e $_E2E_ROOT/daemon.killed ]] && when=killed
        printf '%s (exit %d): %s\n' "$when" "$rc" "$(tr '\n' ' ' <"$err")" >>"$file"
    fi
    rm -f "$err"
    return "$rc"
}

# The CLI's messages for a daemon that went away (api-types client.rs).
LOST_DAEMON_RE='cannot connect to the cachalot daemon|lost the connection to the daemon|closed the connection without answering'

# check_writer_errors FILE WHAT [ALLOWED_RE] [KILLED_RE]: fail (naming WHAT) on
# an error a writer met while the daemon was alive (a dropped connection or a
# refused write: a kill does not explain it) unless it matches the extended
# regex ALLOWED_RE, and on an error after the kill that matches neither
# KILLED_RE (default LOST_DAEMON_RE; "." for clients whose messages vary) nor
# ALLOWED_RE. Prints each distinct error once, so a log shows how writers ended.
check_writer_errors() {
    local file=$1 what=$2 allowed=${3:-} killed=${4:-$LOST_DAEMON_RE} line bad=
    [[ -s $file ]] || return 0
    while read -r line; do
        case $line in
        alive*) [[ -n $allowed ]] && grep -qE "$allowed" <<<"$line" || bad+="$line"$'\n' ;;
        killed*) grep -qE "$killed${allowed:+|$allowed}" <<<"$line" || bad+="$line"$'\n' ;;
        *) bad+="$line"$'\n' ;;
        esac
    done <"$file"
    note "$what: writers ended with: $(sed 's/[0-9]\{1,\}/N/g' "$file" | sort | uniq -c | head -5 | tr -s ' \n' ' ')"
    [[ -z $bad ]] || fail "$what: a writer met an error the kill does not explain: $(head -3 <<<"$bad")"
}

# background PID: a process the test started in the background (a workload
# loop) that stop_background ends; the exit cleanup calls it first, before it
# stops the daemon, also when the test fails.
background() { _E2E_BACKGROUND+=("$1"); }

# stop_background: kill and reap every process given to `background`.
stop_background() {
    local pid
    for pid in ${_E2E_BACKGROUND[@]+"${_E2E_BACKGROUND[@]}"}; do
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true # a killed loop ends with status 143
    done
    _E2E_BACKGROUND=()
}

# need_browser: fail unless headless Chromium and its WebDriver can run (a UI
# test calls it first, before it sets anything up).
need_browser() {
    command -v chromedriver >/dev/null || fail "chromedriver is not installed (Debian: chromium-driver)"
    command -v chromium >/dev/null || fail "chromium is not installed"
}

# browser_python [ARGS...] <<'PY' ... PY: run the Python script on stdin, with
# ARGS as sys.argv[1:] and tests/e2e on its path, to drive the daemon's web UI in
# headless Chromium (tests/e2e/webdriver.py: Browser, ManagePage); then list the
# screenshots it left in $ARTIFACTS. Call it after start_daemon.
browser_python() {
    need_browser
    PYTHONPATH=$REPO/tests/e2e python3 - "$@"
    ls -l "$ARTIFACTS"/*.png >&2
}

# At exit every test also fails when (unless it already failed) the daemon died
# on its own, did not shut down cleanly, or logged a panic or an internal error;
# a test that provokes these on purpose sets ALLOW_DAEMON_ERRORS=1.
_e2e_cleanup() {
    local rc=$? i m code=0 errors
    set +e
    stop_background
    if [[ -n $DAEMON_PID ]] && ! _alive "$DAEMON_PID"; then
        wait "$DAEMON_PID" 2>/dev/null
        code=$?
        if [[ $rc -eq 0 && -z ${ALLOW_DAEMON_ERRORS:-} ]]; then
            echo "FAIL (lib.sh): the daemon died during the test (exit $code)" >&2
            _daemon_log_tail
            rc=1
        fi
    elif _alive "$DAEMON_PID"; then
        kill -TERM "$DAEMON_PID" 2>/dev/null
        # As long as stop_daemon waits (see there).
        for ((i = 0; i < 600; i++)); do
            _alive "$DAEMON_PID" || break
            sleep 0.1
        done
        if _alive "$DAEMON_PID"; then
            kill -KILL "$DAEMON_PID" 2>/dev/null
            code=137
        fi
        wait "$DAEMON_PID" 2>/dev/null || code=$?
        if [[ $rc -eq 0 && $code -ne 0 && -z ${ALLOW_UNCLEAN_EXIT:-} ]]; then
            echo "FAIL (lib.sh): the daemon did not shut down cleanly at the end (exit $code)" >&2
            _daemon_log_tail
            rc=1
        fi
    fi
    if [[ $rc -eq 0 && -z ${ALLOW_DAEMON_ERRORS:-} ]] && errors=$(_daemon_log_errors); then
        echo "FAIL (lib.sh): the daemon log shows a panic or an internal error:" >&2
        echo "$errors" >&2
        rc=1
    fi
    # Unmount anything (e.g. FUSE) left mounted under our temp root, deepest
    # first, before removing it.
    if [[ -d $_E2E_ROOT ]]; then
        while read -r m; do
            [[ -n $m ]] || continue
            fusermount3 -uz "$m" 2>/dev/null || umount -l "$m" 2>/dev/null
        done < <(awk -v r="$_E2E_ROOT" '$2 == r || index($2, r "/") == 1 { print $2 }' \
            /proc/self/mounts | sort -r)
        rm -rf --one-file-system "$_E2E_ROOT"
    fi
    exit "$rc"
}
trap _e2e_cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
