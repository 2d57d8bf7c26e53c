#!/usr/bin/env bash
# timeout: 180
# Snapshot diff (`cachalot diff`, GET /api/v1/snapshots/{name}/diff) on a real
# FUSE mount: files created, modified, removed and renamed between two snapshots
# and since a snapshot (the live filesystem), as zfs diff prints them (M + - R,
# -F types, -H without the arrow, odd bytes as \ooo); the REST route answers the
# same rows and is in the generated OpenAPI; bad input (snapshots out of order,
# another filesystem's, names that do not exist, an unknown query parameter) is
# refused with a message.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/e2e/fuse_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/fuse_lib.sh"

C=$CACHALOT
T=$(mktmp)
M=$T/mnt

fuse_pool 256M
fuse_mount tank/fs "$M"
assert_ok "$C" create tank/other
addr=$(cat "$HOME_DIR/http.addr")

mkdir "$M/d"
seq 1 20000 >"$M/a"
echo b >"$M/b"
echo c >"$M/c"
echo x >"$M/d/x"
for i in $(seq 1 300); do echo "$i" >"$M/d/many$i"; done
sync
assert_ok "$C" snapshot tank/fs@one

echo more >>"$M/a"
echo new >"$M/d/new"
rm "$M/b"
mv "$M/c" "$M/d/c2"
echo s >"$M/with space"
cat "$M/d/x" >/dev/null  # atime alone: not a change
sync
assert_ok "$C" snapshot tank/fs@two

note "cachalot diff between two snapshots"
want=$(printf 'M\t/\nM\t/a\n-\t/b\nR\t/c -> /d/c2\nM\t/d\n+\t/d/new\n+\t/with\\040space')
assert_eq "$(assert_ok "$C" diff tank/fs@one tank/fs@two)" "$want" "diff @one @two"
assert_contains "$(assert_ok "$C" diff -F -H tank/fs@one tank/fs@two)" \
    "$(printf 'R\tF\t/c\t/d/c2')" "diff -F -H"
assert_contains "$(assert_ok "$C" diff -F tank/fs@one tank/fs@two)" \
    "$(printf 'M\t/\t/d')" "diff -F: a directory"

note "since a snapshot: the live filesystem, without a snapshot taken"
echo changed >"$M/d/x"
sync
assert_eq "$(assert_ok "$C" diff tank/fs@two)" "$(printf 'M\t/d/x')" "diff @two (now)"
assert_eq "$(assert_ok "$C" diff tank/fs@two tank/fs)" "$(printf 'M\t/d/x')" "diff @two FS"
snaps_before=$("$C" list -H -t snapshot -o name | tr '\n' ' ')

note "refusals: a message, nothing changed"
assert_fails "$C" diff tank/fs@two tank/fs@one
assert_contains "$LAST_STDERR" "not later" "out of order"
assert_fails "$C" diff tank/fs@one tank/other
assert_contains "$LAST_STDERR" "neither" "another filesystem"
assert_fails "$C" diff tank/fs@nope
assert_fails "$C" diff tank/fs
assert_fails "$C" diff tank/fs@one tank/fs@
assert_eq "$("$C" list -H -t snapshot -o name | tr '\n' ' ')" "$snaps_before" "snapshots after refusals"

note "REST: the same rows, refusals with a code, in the OpenAPI document"
python3 - "$addr" <<'EOF'
import json, sys, urllib.error, urllib.parse, urllib.request
base = "http://" + sys.argv[1] + "/api/v1"
q = urllib.parse.quote

def get(path):
    try:
        with urllib.request.urlopen(base + path, timeout=60) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)

st, v = get(f"/snapshots/{q('tank/fs@one', safe='')}/diff?to={q('tank/fs@two', safe='')}")
assert st == 200, (st, v)
rows = {(c["change"], c["type"], c["path"], c.get("new_path")) for c in v["changes"]}
want = {("M", "/", "/", None), ("M", "F", "/a", None), ("-", "F", "/b", None),
        ("R", "F", "/c", "/d/c2"), ("M", "/", "/d", None), ("+", "F", "/d/new", None),
        ("+", "F", "/with\\040space", None)}
assert rows == want, rows
st, v = get(f"/snapshots/{q('tank/fs@two', safe='')}/diff")
assert st == 200 and [c["path"] for c in v["changes"]] == ["/d/x"], (st, v)
for path, code in [(f"/snapshots/{q('tank/fs@two', safe='')}/diff?to={q('tank/fs@one', safe='')}", "invalid_request"),
                   (f"/snapshots/{q('tank/fs@nope', safe='')}/diff", "not_found"),
                   (f"/snapshots/{q('tank/fs@one', safe='')}/diff?bogus=1", "invalid_request")]:
    st, v = get(path)
    assert 400 <= st < 500 and v["error"]["code"] == code, (path, st, v)
st, doc = get("/openapi.json")
assert "get" in doc["paths"]["/api/v1/snapshots/{name}/diff"], "diff route not in the OpenAPI"
print("REST diff OK")
EOF

stop_daemon
