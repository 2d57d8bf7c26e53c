#!/usr/bin/env bash
# timeout: 180
# Smoke test of the CLI contract: pool create/list/import, dataset
# create/set/get/list, one-line errors that change nothing, and re-import of
# the pool after a daemon restart.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

TMP=$(mktmp)
C=$CACHALOT
TAB=$'\t'

# state: the pool names, the dataset names and tank/db's recordsize, one string.
state() {
    local pools names rs
    pools=$(assert_ok "$C" pool list -H | cut -f1 | LC_ALL=C sort)
    names=$(assert_ok "$C" list -H -o name | LC_ALL=C sort)
    rs=$(assert_ok "$C" get -H -p recordsize tank/db)
    printf 'pools:\n%s\ndatasets:\n%s\nrecordsize:\n%s\n' "$pools" "$names" "$rs"
}

start_daemon

note "pool create"
assert_ok "$C" pool create -s 256M tank "$TMP/d0.img"
[[ -f $TMP/d0.img ]] || fail "pool create did not create $TMP/d0.img"

out=$(assert_ok "$C" pool list -H tank)
grep -q "^tank$TAB" <<<"$out" || fail "pool list -H tank: no line starting with 'tank<TAB>': $out"

note "dataset create / set / get / list"
assert_ok "$C" create tank/db
assert_ok "$C" set recordsize=16K tank/db
out=$(assert_ok "$C" get -H -p recordsize tank/db)
assert_eq "$out" "tank/db${TAB}recordsize${TAB}16384${TAB}local" "get -H -p recordsize tank/db"

out=$(assert_ok "$C" list -H -r -o name tank)
assert_eq "$out" $'tank\ntank/db' "list -H -r -o name tank"
out=$(assert_ok "$C" list -H -o name tank)
assert_eq "$out" "tank" "list -H -o name tank (no -r: just tank, as in zfs)"
out=$(assert_ok "$C" list -H -p -o name,used,recordsize tank/db)
[[ $out =~ ^tank/db$TAB[0-9]+${TAB}16384$ ]] || fail "list -H -p -o name,used,recordsize: $out"

note "bad inputs fail with one line and change nothing"
before=$(state)

assert_fails "$C" set recordsize=3000 tank/db
assert_fails "$C" create tank/db
assert_fails "$C" pool create tank2 /nonexistent/dir/x.img
[[ ! -e /nonexistent/dir/x.img ]] || fail "pool create tank2 created /nonexistent/dir/x.img"

truncate -s 64M "$TMP/notapool.img"
assert_fails "$C" pool import -d "$TMP/notapool.img"
cmp -s -n $((64 << 20)) "$TMP/notapool.img" /dev/zero ||
    fail "pool import of a non-pool wrote to the file"
assert_eq "$(stat -c %s "$TMP/notapool.img")" $((64 << 20)) "size of notapool.img"

assert_eq "$(state)" "$before" "state after rejected commands"

note "restart: the pool is re-imported"
stop_daemon
start_daemon

out=$(assert_ok "$C" pool list -H tank)
grep -q "^tank$TAB" <<<"$out" || fail "after restart, pool list -H tank: no 'tank<TAB>' line: $out"
out=$(assert_ok "$C" get -H -p recordsize tank/db)
assert_eq "$out" "tank/db${TAB}recordsize${TAB}16384${TAB}local" "recordsize after restart"
assert_eq "$(state)" "$before" "state after restart"

stop_daemon
note "ok"
