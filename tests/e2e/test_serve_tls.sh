#!/usr/bin/env bash
# timeout: 60
# `serve --http ADDR` on an address other hosts can reach serves HTTPS only: a
# self-signed certificate is generated into HOME/tls at the first start (key 0600)
# and kept across restarts; a client that pins HOME/tls/cert.pem gets the API (and
# its 401 for an untokened change) over TLS, plain HTTP on that port gets nothing;
# a certificate of the user's (--tls-cert/--tls-key) is served as given, also on
# loopback; a bad certificate fails the start. Connections go to 127.0.0.1 only.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# serve_with ARGS...: start the daemon on a fresh $HOME_DIR (unless set) and wait.
serve_with() {
    HOME_DIR=${HOME_DIR:-$(mktmp)}
    export CACHALOT_SOCKET=$HOME_DIR/s.sock
    "$CACHALOT" serve --home "$HOME_DIR" --socket "$CACHALOT_SOCKET" --nfs off --iscsi off --nbd off \
        "$@" >>"$ARTIFACTS/daemon.log" 2>&1 &
    DAEMON_PID=$!
    local i
    for ((i = 0; i < 100; i++)); do
        "$CACHALOT" pool list >/dev/null 2>&1 && return 0
        _alive "$DAEMON_PID" || fail "serve $* exited: $(tail -n 2 "$ARTIFACTS/daemon.log")"
        sleep 0.1
    done
    fail "serve $* not ready"
}

# check_https CAFILE: the API over TLS with the certificate pinned; plain HTTP fails.
check_https() {
    local port=${1##*:}
    python3 - "$port" "$2" <<'PY'
import http.client, json, ssl, sys, urllib.request, urllib.error
port, cafile = sys.argv[1:3]
ctx = ssl.create_default_context(cafile=cafile)
with urllib.request.urlopen(f"https://127.0.0.1:{port}/api/v1/pools", context=ctx, timeout=10) as r:
    assert r.status == 200 and json.loads(r.read()) == [], r.status
req = urllib.request.Request(f"https://127.0.0.1:{port}/api/v1/datasets", method="POST", data=b'{"name":"t/x"}')
try:
    urllib.request.urlopen(req, context=ctx, timeout=10)
    raise SystemExit("an untokened change was accepted")
except urllib.error.HTTPError as e:
    assert e.code == 401, e.code
try:
    urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/pools", timeout=5).read()
    raise SystemExit("plain HTTP answered on the TLS port")
except (urllib.error.URLError, http.client.HTTPException, OSError) as e:
    print(f"  ok, plain HTTP refused: {e}")
try:
    urllib.request.urlopen(f"https://127.0.0.1:{port}/api/v1/pools", context=ssl.create_default_context(), timeout=5)
    raise SystemExit("an unpinned client trusted the self-signed certificate")
except urllib.error.URLError as e:
    assert "CERTIFICATE_VERIFY_FAILED" in str(e), e
PY
}

note "a reachable address: HTTPS with a generated certificate"
serve_with --http 0.0.0.0:0
addr=$(cat "$HOME_DIR/http.addr")
[[ -f $HOME_DIR/tls/cert.pem && -f $HOME_DIR/tls/key.pem ]] || fail "no certificate generated"
assert_eq "$(stat -c %a "$HOME_DIR/tls/key.pem")" 600 "key mode"
assert_contains "$(cat "$ARTIFACTS/daemon.log")" "https listening on" "the log says https"
check_https "$addr" "$HOME_DIR/tls/cert.pem"
sum=$(sha256sum "$HOME_DIR/tls/cert.pem")
stop_daemon

note "restart: the same certificate"
serve_with --http 0.0.0.0:0
assert_eq "$(sha256sum "$HOME_DIR/tls/cert.pem")" "$sum" "certificate kept"
check_https "$(cat "$HOME_DIR/http.addr")" "$HOME_DIR/tls/cert.pem"
stop_daemon

note "the user's certificate, on loopback too"
MINE=$(mktmp)
cp "$HOME_DIR/tls/cert.pem" "$MINE/my.crt"
cp "$HOME_DIR/tls/key.pem" "$MINE/my.key"
HOME_DIR=$(mktmp)
serve_with --http 127.0.0.1:0 --tls-cert "$MINE/my.crt" --tls-key "$MINE/my.key"
[[ ! -e $HOME_DIR/tls ]] || fail "generated a certificate although one was given"
check_https "$(cat "$HOME_DIR/http.addr")" "$MINE/my.crt"
stop_daemon

note "a bad certificate file fails the start, saying which file"
echo junk >"$MINE/bad.crt"
rc=0
"$CACHALOT" serve --home "$(mktmp)" --socket "$MINE/x.sock" --http 127.0.0.1:0 --nfs off \
    --iscsi off --nbd off --tls-cert "$MINE/bad.crt" --tls-key "$MINE/my.key" 2>"$MINE/err" || rc=$?
((rc == 1)) || fail "serve with a bad certificate: exit $rc"
assert_contains "$(cat "$MINE/err")" "bad.crt: no certificate in the file" "the error names the file"
[[ ! -e $MINE/x.sock ]] || fail "the socket was left behind"
assert_fails "$CACHALOT" serve --home "$(mktmp)" --http 127.0.0.1:0 --tls-cert "$MINE/my.crt"
echo "PASS"
