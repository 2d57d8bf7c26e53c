#!/usr/bin/env bash
# timeout: 240
# Pool lifecycle through the CLI: add a mirror online (data keeps working and
# spreads to it), export, list importable pools, import, destroy (the devices no
# longer import), and a bad --arc-max refused by `serve`.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

TMP=$(mktmp)
C=$CACHALOT
TAB=$'\t'

assert_fails "$C" serve --home "$TMP/h" --socket "$TMP/h.sock" --arc-max lots --http none

start_daemon
assert_ok "$C" pool create -s 64M tank "$TMP/a.img"
size1=$(assert_ok "$C" pool list -H -p tank | cut -f2)
assert_ok "$C" create -o compression=off tank/d
obj=$(assert_ok "$C" debug create tank/d)
assert_ok "$C" debug write tank/d "$obj" --seed 1 --len 30M
assert_ok "$C" debug fsync tank/d

note "pool add: a mirror joins online"
assert_ok "$C" pool add -s 128M tank mirror "$TMP/b.img" "$TMP/c.img"
assert_fails "$C" pool add tank "$TMP/a.img"
size2=$(assert_ok "$C" pool list -H -p tank | cut -f2)
((size2 > size1 + 100 * 1024 * 1024)) || fail "pool size did not grow: $size1 -> $size2"
st=$(assert_ok "$C" pool status tank)
echo "$st"
assert_contains "$st" "mirror-1" "status shows the new mirror"
obj2=$(assert_ok "$C" debug create tank/d)
assert_ok "$C" debug write tank/d "$obj2" --seed 2 --len 60M
assert_ok "$C" debug fsync tank/d

note "pool add: a separate log device"
assert_ok "$C" pool add -s 64M tank log "$TMP/slog.img"
st=$(assert_ok "$C" pool status tank)
assert_contains "$st" "logs" "status shows the added log device"
assert_ok "$C" debug write tank/d "$obj2" --seed 2 --len 64K
assert_ok "$C" debug fsync tank/d

note "export, list importable, import"
assert_ok "$C" pool export tank
out=$(assert_ok "$C" pool list -H)
[[ $out != *"tank$TAB"* ]] || fail "exported pool still listed: $out"
out=$(assert_ok "$C" pool import -d "$TMP")
assert_contains "$out" "tank" "pool import -d DIR lists the importable pool"
assert_ok "$C" pool import -d "$TMP" tank
assert_ok "$C" debug read tank/d "$obj" --seed 1 --len 30M >/dev/null
assert_ok "$C" debug read tank/d "$obj2" --seed 2 --len 60M >/dev/null
assert_ok "$C" pool scrub -w tank
st=$(assert_ok "$C" pool status tank)
assert_contains "$st" "with 0 errors" "scrub after add/export/import"
# Data landed on the new vdev too (allocations rotate over top-level vdevs).
alloc=$(assert_ok "$C" pool list -H -p tank | cut -f3)
((alloc > 90 * 1024 * 1024)) || fail "allocated only $alloc bytes for 90M of data"

note "destroy"
assert_ok "$C" pool destroy tank
out=$(assert_ok "$C" pool list -H)
[[ -z $out ]] || fail "pool list after destroy: $out"
assert_fails "$C" pool import -d "$TMP" tank
stop_daemon
