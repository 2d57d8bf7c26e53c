#!/usr/bin/env bash
# timeout: 90
# The REST API under /api/v1 against a real daemon over real HTTP (python's
# urllib): every route succeeds on good input and is checked through the CLI;
# bad input (wrong types, unknown fields, missing names, names that do not exist,
# destroy of a busy dataset or snapshot) gets a JSON error with a stable code and
# changes nothing; changes without a token are 401, with a wrong or revoked one
# 403, and change nothing; named tokens are created, listed and revoked with the
# CLI and never appear in the daemon's log; scrub runs as a job polled to the end;
# pool replace runs its resilver as a job streamed as server-sent events; a send
# (full and incremental) runs as a job into a new file that `cachalot receive`
# takes (a refused send leaves no file and never overwrites one); a filesystem is
# mounted, written through, unmounted and mounted again to read it back (refusals
# mount nothing); a pairing token is made and the daemon pairs with its own
# replication listener (refusals pin no peer); snapshot holds are put and
# released (`cachalot holds` sees them; a held snapshot refuses destroy); a
# relationship toward a second daemon (the peer) is broken off, resynced (refused
# without force, naming what it would destroy) and reversed (the peer then sends
# here). The MySQL
# routes need MariaDB: test_api_mysql.sh. The first token comes from the one-time
# setup code (api_first_token.py) and drives the whole run; revoking the last
# named token makes a new code at once, which makes the next first token; a
# missing mount point is made (0755, parents too); the unix socket is 0600 and
# another user's CLI is refused on it.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

C=$CACHALOT
DAEMON_ARGS=(--replication 127.0.0.1:0)  # api_check.py pairs with this listener
start_daemon
WORK=$(mktmp)
addr=$(cat "$HOME_DIR/http.addr")

note "first token from the setup code (no CLI): wrong code refused, right code once"
[[ $(stat -c %a "$HOME_DIR/setup-code") == 600 ]] || fail "setup-code is not 0600"
CODE=$(cat "$HOME_DIR/setup-code")
FIRST=$(python3 "$REPO/tests/e2e/api_first_token.py" "$addr" "$CODE" "$HOME_DIR/setup-code" "$C")
[[ $FIRST =~ ^[0-9a-f]{64}$ ]] || fail "the first token is '$FIRST'"
[[ ! -e $HOME_DIR/setup-code ]] || fail "the setup code's file outlived its use"

note "the unix socket is root's only (0600): another user's CLI is refused"
[[ $(stat -c '%a %u' "$CACHALOT_SOCKET") == "600 $(id -u)" ]] ||
    fail "the socket is $(stat -c '%a, uid %u' "$CACHALOT_SOCKET"), not 0600 and the daemon's user's"
# Directories on the way traversable (no listing), so the socket's mode alone refuses.
chmod 0711 "$_E2E_ROOT" "$HOME_DIR"
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$C" --socket "$CACHALOT_SOCKET" "$@"; }
assert_fails as_nobody token create intruder
assert_contains "$LAST_STDERR" "Permission denied" "the refusal says why"
assert_fails as_nobody pool list
[[ $("$C" token list -H) != *intruder* ]] || fail "a refused caller made a token"
# The control: with the socket's mode opened, the same call goes through (so
# the refusal above came from the mode, not from the path).
chmod 0666 "$CACHALOT_SOCKET"
assert_ok as_nobody pool list >/dev/null
chmod 0600 "$CACHALOT_SOCKET"
chmod 0700 "$_E2E_ROOT" "$HOME_DIR"

note "tokens: create, list (no secret shown)"
TOKEN=$(assert_ok "$C" token create e2e)
[[ $TOKEN =~ ^[0-9a-f]{64}$ ]] || fail "token create printed '$TOKEN'"
list=$(assert_ok "$C" token list -H)
assert_contains "$list" "e2e" "token list names the token"
[[ $list != *"$TOKEN"* ]] || fail "token list shows the secret"
assert_fails "$C" token create e2e
assert_fails "$C" token create "bad name"
assert_fails "$C" token revoke nosuch

note "a peer appliance (a second daemon, replication listener only) for break, resync, reverse"
PEER_HOME=$(mktmp)
export PEER_SOCKET=$PEER_HOME/cachalot.sock
echo "==== peer daemon start $(date '+%T') ====" >>"$ARTIFACTS/daemon.log"
"$C" serve --home "$PEER_HOME" --socket "$PEER_SOCKET" --http none --iscsi off --nbd off \
    --nfs off --portmap off --replication 127.0.0.1:0 >>"$ARTIFACTS/daemon.log" 2>&1 &
PEER_PID=$!
background "$PEER_PID" # stopped at exit if the test fails first
peer_up() { [[ -s $PEER_HOME/replication.addr ]] && "$C" --socket "$PEER_SOCKET" pool list >/dev/null 2>&1; }
wait_until 20 "the peer daemon is up" peer_up
PEER_ADDR=$(cat "$PEER_HOME/replication.addr")
export PEER_ADDR

# The whole API run on the token the setup code gave: it works for every change.
python3 "$REPO/tests/e2e/api_check.py" "$addr" "$FIRST" "$C" "$WORK" "$ARTIFACTS"

note "the peer daemon stops cleanly"
kill -TERM "$PEER_PID"
peer_rc=0
wait "$PEER_PID" || peer_rc=$?
[[ $peer_rc == 0 ]] || fail "the peer daemon exited with status $peer_rc after SIGTERM"
_E2E_BACKGROUND=() # the peer, reaped: nothing left for the exit's stop_background

note "revoked token: 403, nothing changed"
assert_ok "$C" token revoke e2e
before=$("$C" list -H -t all -o name)
python3 - "$addr" "$TOKEN" <<'PY'
import json, sys, urllib.request, urllib.error
addr, token = sys.argv[1:3]
req = urllib.request.Request(f"http://{addr}/api/v1/datasets", method="POST",
    data=json.dumps({"name": "tank/revoked"}).encode(),
    headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
try:
    urllib.request.urlopen(req, timeout=10)
    raise SystemExit("a revoked token was accepted")
except urllib.error.HTTPError as e:
    body = json.loads(e.read())
    assert e.code == 403 and body["error"]["code"] == "forbidden", (e.code, body)
PY
assert_eq "$("$C" list -H -t all -o name)" "$before" "a refused request changed nothing"

note "revoking the last named token makes a new setup code at once (the lost-token recovery)"
[[ ! -e $HOME_DIR/setup-code ]] || fail "a setup code while the token 'admin' exists"
assert_ok "$C" token revoke admin
[[ $(stat -c %a "$HOME_DIR/setup-code") == 600 ]] || fail "no new 0600 setup-code after the last revoke"
CODE2=$(cat "$HOME_DIR/setup-code")
[[ $CODE2 != "$CODE" ]] || fail "the new setup code is the old one"
FIRST2=$(python3 "$REPO/tests/e2e/api_first_token.py" "$addr" "$CODE2" "$HOME_DIR/setup-code" "$C")
[[ $FIRST2 =~ ^[0-9a-f]{64}$ ]] || fail "the second first token is '$FIRST2'"

note "the secret is in no log"
for secret in "$TOKEN" "$FIRST" "$CODE" "$CODE2" "$FIRST2"; do
    if grep -q "$secret" "$ARTIFACTS/daemon.log"; then fail "a secret (token or setup code) is in daemon.log"; fi
done
[[ $(grep -c "$HOME_DIR/setup-code" "$ARTIFACTS/daemon.log") -ge 2 ]] || fail "the log does not say where each setup code is"
assert_contains "$(cat "$ARTIFACTS/daemon.log")" "API token 'e2e' revoked" "the log names the token"
stop_daemon
echo "PASS"
