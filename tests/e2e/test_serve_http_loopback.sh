#!/usr/bin/env bash
# timeout: 60
# Loopback addresses (by number or by name) and "none" serve plain HTTP on
# loopback only; an address other hosts can reach gets HTTPS (test_serve_tls).
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

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
        python3 -c 'import sys, urllib.request; urllib.request.urlopen(f"http://{sys.argv[1]}/api/v1/pools", timeout=5).read()' "$http" ||
            fail "no plain HTTP on loopback $http"
        [[ ! -e $HOME_DIR/tls ]] || fail "a certificate was generated for loopback"
    fi
    stop_daemon
done
echo "PASS"
