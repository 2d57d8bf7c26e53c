#!/usr/bin/env bash
# timeout: 240
# `cachalot bench` refuses bad input with a one-line error before starting
# anything (missing target, unwritable --out, sysbench/fio not installed, a port
# or socket in use, ...), and cleans up everything it started when a run fails
# half-way or is stopped with Ctrl-C (SIGINT): servers, loop devices, mounts,
# temporary files; partial results are still written.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/e2e/bench_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench_lib.sh"

bench_setup
C=$CACHALOT
OUT=$(mktmp)/out
TINY=(--threads 1 --time 2 --warmup 1 --tables 2 --table-size 500 --buffer-pool 32M --log-file-size 32M)

note "refused before anything starts"
assert_fails "$C" bench mysql --target x="$TARGET/missing" --out "$OUT"
assert_contains "$LAST_STDERR" "does not exist"
assert_fails "$C" bench fio --target x="$TARGET/missing" --out "$OUT"
assert_fails "$C" bench mysql --out "$OUT"
assert_contains "$LAST_STDERR" "no targets"
assert_fails "$C" bench mysql --target "$TARGET" --out "$OUT"
assert_contains "$LAST_STDERR" "NAME=PATH"
assert_fails "$C" bench mysql --target a="$TARGET" b="$TARGET" a="$TARGET" --out "$OUT"
assert_contains "$LAST_STDERR" "used twice"
assert_fails "$C" bench mysql --baseline zfs --out "$OUT"
assert_fails "$C" bench mysql --baseline ext4:1G --baseline-dir "$TARGET/missing" --out "$OUT"
assert_fails "$C" bench mysql --target x="$TARGET" --workload no_such_test --out "$OUT"
assert_contains "$LAST_STDERR" "no_such_test"
assert_fails "$C" bench mysql --target x="$TARGET" --threads 0 --out "$OUT"
assert_fails "$C" bench fio --target x="$TARGET" --baseline ext4:256M --baseline-dir "$IMGDIR" --out "$OUT"
assert_contains "$LAST_STDERR" "too small"
[[ ! -e $OUT ]] || fail "a refused run created the output directory"

note "unwritable --out"
touch "$TARGET/afile"
assert_fails "$C" bench mysql --target x="$TARGET" --out "$TARGET/afile/out"
assert_contains "$LAST_STDERR" "--out"
assert_fails "$C" bench fio --target x="$TARGET" --out /proc/cachalot-bench-out
assert_contains "$LAST_STDERR" "--out"
rm -f "$TARGET/afile"

note "sysbench / fio not installed (PATH without /usr/bin)"
assert_fails env PATH=/usr/sbin:/sbin "$C" bench mysql --target x="$TARGET" --out "$OUT"
assert_contains "$LAST_STDERR" "sysbench"
assert_contains "$LAST_STDERR" "not installed"
assert_fails env PATH=/usr/sbin:/sbin "$C" bench fio --target x="$TARGET" --out "$OUT"
assert_contains "$LAST_STDERR" "fio"

note "port in use"
python3 -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
print(s.getsockname()[1], flush=True); time.sleep(60)' >"$TMPDIR/port" &
HOLDER=$!
for _ in $(seq 50); do [[ -s $TMPDIR/port ]] && break; sleep 0.1; done
PORT=$(cat "$TMPDIR/port")
assert_fails "$C" bench mysql --target x="$TARGET" --port "$PORT" --out "$OUT"
assert_contains "$LAST_STDERR" "port $PORT on 127.0.0.1 is in use"
kill "$HOLDER"
wait "$HOLDER" 2>/dev/null || true
rm -f "$TMPDIR/port"

note "socket in use"
SOCKDIR=$(mktmp)
python3 -c '
import socket, sys, time
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(); time.sleep(60)' \
    "$SOCKDIR/mariadb-x.sock" &
HOLDER=$!
for _ in $(seq 50); do [[ -S $SOCKDIR/mariadb-x.sock ]] && break; sleep 0.1; done
assert_fails "$C" bench mysql --target x="$TARGET" --socket-dir "$SOCKDIR" --out "$OUT"
assert_contains "$LAST_STDERR" "mariadb-x.sock is in use"
kill "$HOLDER"
wait "$HOLDER" 2>/dev/null || true
[[ ! -e $OUT ]] || fail "a refused run created the output directory"
assert_bench_clean

note "a server that fails to start: error names it, everything is cleaned up"
rc=0
"$C" bench mysql --target host="$TARGET" --baseline ext4:1G --baseline-dir "$IMGDIR" \
    "${TINY[@]}" --mysqld innodb_no_such_option=1 --out "$OUT" 2>"$TMPDIR/err" || rc=$?
err=$(tail -n 1 "$TMPDIR/err")
rm -f "$TMPDIR/err"
((rc == 1)) || fail "expected exit 1, got $rc"
assert_contains "$err" "cachalot: mariadbd for target" "error names the server"
assert_contains "$err" "innodb_no_such_option" "error quotes the server's complaint"
assert_contains "$err" "partial results in $OUT"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r["complete"] is False and r["error"], r' \
    "$OUT/results.json" || fail "partial results.json not marked incomplete"
assert_bench_clean

note "Ctrl-C during a measured run"
OUT2=$(mktmp)/out
"$C" bench mysql --target host="$TARGET" --baseline ext4:1G --baseline-dir "$IMGDIR" \
    --threads 1,2 --time 60 --warmup 1 --tables 2 --table-size 500 --buffer-pool 32M \
    --log-file-size 32M --out "$OUT2" 2>"$TMPDIR/err" &
BENCH=$!
bench_track "$BENCH"
for _ in $(seq 600); do
    pgrep -f -- "sysbench.*$TMPDIR.*--time=60 " >/dev/null && break
    _alive "$BENCH" || break
    sleep 0.1
done
pgrep -f -- "sysbench.*$TMPDIR.*--time=60 " >/dev/null || fail "the measured run never started: $(cat "$TMPDIR/err")"
loops=$(losetup -a)
[[ $loops == *"$IMGDIR"* ]] || fail "the baseline's loop device is not attached"
sleep 1
kill -INT "$BENCH"
rc=0
wait "$BENCH" || rc=$?
err=$(tail -n 1 "$TMPDIR/err")
rm -f "$TMPDIR/err"
((rc == 130)) || fail "expected exit 130 after SIGINT, got $rc ($err)"
assert_contains "$err" "interrupted by SIGINT"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r["complete"] is False and "SIGINT" in r["error"], r' \
    "$OUT2/results.json" || fail "partial results.json not written after Ctrl-C"
[[ -s $OUT2/report.md ]] || fail "no report after Ctrl-C"
grep -q "Incomplete run" "$OUT2/report.md" || fail "report does not say it is incomplete"
assert_bench_clean
note "ok"
