#!/usr/bin/env bash
# timeout: 300
# Bad input gets a clear one-line error, changes nothing, and the daemon keeps
# running: wrong vdev specs, duplicate names, invalid properties, too-small
# devices, a file that is not a pool, hostile API requests, a full pool; the HTTP
# API refuses changes without the token.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

TMP=$(mktmp)
C=$CACHALOT

start_daemon
assert_ok "$C" pool create -s 64M tank "$TMP/t.img"
assert_ok "$C" create -o recordsize=16K tank/db
snapshot_state() { "$C" pool list -H; "$C" list -H -p -o name,recordsize,quota,compression; }
# Commit the create now: otherwise the txg timer (5 s) may commit it between the
# two snapshots of the state, and the allocated space moves (a flaky failure).
assert_ok "$C" pool sync tank
before=$(snapshot_state)

note "vdev specs"
assert_fails "$C" pool create tank2 mirror "$TMP/only-one.img"
assert_fails "$C" pool create -s 64M tank2 "$TMP/x.img" "$TMP/x.img"
assert_fails "$C" pool create tank2 "$TMP/missing.img"
assert_fails "$C" pool create -s 1M tank2 "$TMP/small.img"
[[ -e $TMP/small.img || -e $TMP/x.img || -e $TMP/missing.img ]] && fail "a failed create left files behind"
assert_fails "$C" pool create -s 64M tank2 raidz3 "$TMP/r1.img" "$TMP/r2.img"
assert_fails "$C" pool create -s 64M tank "$TMP/dup.img"
assert_fails "$C" pool create -s 64M tank2 "$TMP/t.img"
assert_fails "$C" pool create -s 64M "bad/name" "$TMP/bn.img"

note "not a pool"
head -c $((64 * 1024 * 1024)) /dev/zero >"$TMP/zeros.img"
assert_fails "$C" pool import -d "$TMP/zeros.img"
assert_fails "$C" pool import -d "$TMP/nonexistent-dir" tank9
echo "hello" >"$TMP/tiny.txt"
assert_fails "$C" pool import -d "$TMP/tiny.txt"

note "datasets and properties"
assert_fails "$C" create tank/db
assert_fails "$C" create tank/no/parent
assert_fails "$C" create "tank/bad name"
assert_fails "$C" create nosuchpool/x
for pv in recordsize=3000 recordsize=2M compression=gzip-9 checksum=off sync=sometimes \
    logbias=fast primarycache=some secondarycache=some quota=lots reservation=-1 mountpoint=relative used=5 nosuchprop=1; do
    assert_fails "$C" set "$pv" tank/db
done
assert_fails "$C" set secondarycache=data tank/db
assert_contains "$LAST_STDERR" "invalid value 'data' for property 'secondarycache': expected all, metadata or none"
assert_eq "$(assert_ok "$C" get -H secondarycache tank/db | cut -f3)" all "a refused value changes nothing"
assert_fails "$C" get nosuchprop tank/db
assert_fails "$C" set recordsize=16K tank/nosuch
assert_fails "$C" destroy tank/nosuch
assert_fails "$C" destroy tank
assert_fails "$C" inherit used tank/db

note "hostile API requests"
assert_fails "$C" debug call no.such.op
assert_fails "$C" debug call ds.set '{"name": 5, "prop": [], "value": {}}'
assert_fails "$C" debug call obj.read '{"ds": "tank/db", "obj": 99999, "off": 0, "len": 10}'
assert_fails "$C" debug call obj.read '{"ds": "tank/db", "obj": 1, "off": 18446744073709551615, "len": 18446744073709551615}'
python3 - "$CACHALOT_SOCKET" <<'PY'
import socket, sys
for payload in [b"garbage\n", b"{\"op\": \n", b"\xff\xfe\x00\n", b"[" * 10000 + b"\n", b"{}\n"]:
    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(payload)
    s.settimeout(5)
    try:
        reply = s.recv(65536)
    except socket.timeout:
        reply = b""
    s.close()
    assert b'"ok":false' in reply.replace(b" ", b"") or reply == b"", (payload[:20], reply[:200])
PY
after=$(snapshot_state)
assert_eq "$after" "$before" "failed commands changed nothing"

note "HTTP: reads open, changes need the token"
addr=$(cat "$HOME_DIR/http.addr")
token=$(cat "$HOME_DIR/token")
python3 - "$addr" "$token" <<'PY'
import json, sys, urllib.request, urllib.error
addr, token = sys.argv[1], sys.argv[2]
def call(op, args, tok=None):
    req = urllib.request.Request(f"http://{addr}/api/v1/call", data=json.dumps({"op": op, "args": args}).encode(),
                                 headers={"Content-Type": "application/json", **({"Authorization": f"Bearer {tok}"} if tok else {})})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")
st, body = call("pool.list", {})
assert st == 200 and body["ok"], (st, body)
st, body = call("ds.create", {"name": "tank/http"})
assert st == 401 and not body.get("ok") and body.get("code") == "unauthorized", (st, body)
st, body = call("ds.create", {"name": "tank/http"}, "wrong-token")
assert st == 403 and body.get("code") == "forbidden", (st, body)
st, body = call("ds.create", {"name": "tank/http"}, token)
assert st == 200 and body["ok"], (st, body)
with urllib.request.urlopen(f"http://{addr}/", timeout=10) as r:
    assert b"tank" in r.read()
PY
assert_ok "$C" destroy tank/http

note "full pool: ENOSPC reaches the writer, nothing is corrupted"
assert_ok "$C" create -o compression=off tank/fill
obj=$(assert_ok "$C" debug create tank/fill)
off=0
chunk=$((4 * 1024 * 1024))
while "$C" debug write tank/fill "$obj" --off "$off" --seed 3 --len "$chunk" 2>"$TMP/err"; do
    off=$((off + chunk))
    ((off < 256 * 1024 * 1024)) || fail "a 64M pool accepted 256M"
done
grep -qi "space" "$TMP/err" || fail "full pool error does not mention space: $(cat "$TMP/err")"
[[ $(wc -l <"$TMP/err") -eq 1 ]] || fail "error is not one line"
assert_ok "$C" debug fsync tank/fill
assert_ok "$C" debug read tank/fill "$obj" --seed 3 --len "$off" >/dev/null
assert_ok "$C" pool list tank
# Deleting frees space again.
assert_ok "$C" debug delete tank/fill "$obj"
assert_ok "$C" debug fsync tank/fill
assert_ok "$C" debug fsync tank/fill
obj=$(assert_ok "$C" debug create tank/fill)
assert_ok "$C" debug write tank/fill "$obj" --seed 4 --len "$chunk"
assert_ok "$C" debug fsync tank/fill
assert_ok "$C" pool scrub -w tank
st=$(assert_ok "$C" pool status tank)
assert_contains "$st" "with 0 errors" "scrub after a full pool"
kill -0 "$DAEMON_PID" || fail "daemon died"
stop_daemon
