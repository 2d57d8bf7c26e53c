#!/usr/bin/env bash
# timeout: 60
# Without TLS the HTTP listener (which carries the API token) stays on loopback:
# `cachalot serve --http ADDR` refuses an address other hosts can reach, with one
# line on stderr, before it creates its home or binds anything; loopback
# addresses (by number or by name) and "none" start.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

WORK=$(mktmp)
for addr in 0.0.0.0:0 "[::]:0" 192.0.2.1:7470; do
    assert_fails "$CACHALOT" serve --home "$WORK/h" --socket "$WORK/s.sock" --http "$addr"
    assert_contains "$LAST_STDERR" "without TLS" "refusal of $addr says why"
    [[ ! -e $WORK/h && ! -e $WORK/s.sock ]] || fail "refused serve --http $addr left files behind"
done

for addr in 127.0.0.1:0 localhost:0 none; do
    HOME_DIR=$(mktmp)
    "$CACHALOT" serve --home "$HOME_DIR" --socket "$HOME_DIR/s.sock" --http "$addr" \
        >>"$ARTIFACTS/daemon.log" 2>&1 &
    DAEMON_PID=$!
    export CACHALOT_SOCKET=$HOME_DIR/s.sock
    for ((i = 0; i < 100; i++)); do
        "$CACHALOT" pool list >/dev/null 2>&1 && break
        _alive "$DAEMON_PID" || fail "serve --http $addr exited: $(tail -n 2 "$ARTIFACTS/daemon.log")"
        sleep 0.1
    done
    assert_ok "$CACHALOT" pool list >/dev/null
    if [[ $addr != none ]]; then
        http=$(cat "$HOME_DIR/http.addr")
        [[ $http == 127.0.0.1:* || $http == "[::1]:"* ]] || fail "listening on $http for --http $addr"
    fi
    stop_daemon
done
echo "PASS"
