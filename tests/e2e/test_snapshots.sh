#!/usr/bin/env bash
# timeout: 200
# Snapshots through the CLI: an atomic snapshot of two datasets, list -t snapshot
# with used/referenced, a clone that shares the snapshot's data, rollback (refused
# while newer snapshots exist, -r destroys them), promote, destroy of a snapshot
# (refused while a clone depends on it), and bad names.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

TMP=$(mktmp)
C=$CACHALOT

start_daemon
assert_ok "$C" pool create -s 256M tank "$TMP/d.img"
assert_ok "$C" create -o compression=off tank/data
assert_ok "$C" create -o compression=off tank/log
obj=$(assert_ok "$C" debug create tank/data)
assert_ok "$C" debug write tank/data "$obj" --seed 1 --len 8M
lobj=$(assert_ok "$C" debug create tank/log)
assert_ok "$C" debug write tank/log "$lobj" --seed 2 --len 1M

note "one atomic snapshot of two datasets"
assert_ok "$C" snapshot tank/data@s1 tank/log@s1
out=$(assert_ok "$C" list -H -t snapshot -o name)
assert_eq "$(sort <<<"$out")" $'tank/data@s1\ntank/log@s1' "list -t snapshot"
assert_fails "$C" snapshot tank/data@s1
assert_fails "$C" snapshot "tank/data@bad name"
assert_fails "$C" snapshot tank/nosuch@x

note "user properties on a snapshot (binlog positions are recorded this way)"
assert_ok "$C" set com.cachalot:binlog=mysql-bin.000042:1337 tank/data@s1
assert_eq "$(assert_ok "$C" get -H -o value com.cachalot:binlog tank/data@s1)" "mysql-bin.000042:1337" "snapshot user property"
assert_fails "$C" set recordsize=16K tank/data@s1
assert_eq "$(assert_ok "$C" get -H -o value type tank/data@s1)" "snapshot" "snapshot type"

note "overwrite: the snapshot keeps the old data, and says how much"
assert_ok "$C" debug write tank/data "$obj" --seed 3 --len 4M
assert_ok "$C" debug fsync tank/data
used=$(assert_ok "$C" list -H -p -t snapshot -o used tank/data)
((used >= 4 * 1024 * 1024)) || fail "snapshot used $used, expected at least 4M"
since=$(assert_ok "$C" get -H -p -o value written@s1 tank/data)
((since >= 4 * 1024 * 1024 && since < 6 * 1024 * 1024)) || fail "written@s1 is $since, expected about 4M"
assert_eq "$(assert_ok "$C" get -H -p -o value written@tank/data@s1 tank/data)" "$since" "written@FS@SNAP"
assert_fails "$C" get written@nosuch tank/data
assert_fails "$C" get written@tank/log@s1 tank/data

note "clone shares the snapshot's data"
before=$(assert_ok "$C" pool list -H -p tank | cut -f3)
assert_ok "$C" clone tank/data@s1 tank/copy
assert_ok "$C" pool sync tank
after=$(assert_ok "$C" pool list -H -p tank | cut -f3)
((after - before < 1024 * 1024)) || fail "a fresh clone cost $((after - before)) bytes"
assert_ok "$C" debug read tank/copy "$obj" --seed 1 --len 8M >/dev/null
cused=$(assert_ok "$C" get -H -p -o value used tank/copy)
((cused < 1024 * 1024)) || fail "a fresh clone reports used=$cused (it shares everything with its origin)"
assert_ok "$C" debug write tank/copy "$obj" --off $((8 << 20)) --seed 9 --len 2M
assert_ok "$C" pool sync tank
cused=$(assert_ok "$C" get -H -p -o value used tank/copy)
((cused >= 2 * 1024 * 1024 && cused < 3 * 1024 * 1024)) || fail "clone used=$cused after 2M of new data"
crefer=$(assert_ok "$C" get -H -p -o value referenced tank/copy)
((crefer >= 8 * 1024 * 1024)) || fail "clone referenced=$crefer, expected the origin's 8M"
assert_eq "$(assert_ok "$C" get -H -o value origin tank/copy)" "tank/data@s1" "origin"
assert_fails "$C" destroy tank/data@s1

note "rollback"
assert_ok "$C" snapshot tank/data@s2
assert_fails "$C" rollback tank/data@s1
assert_ok "$C" debug write tank/data "$obj" --seed 4 --len 1M
assert_ok "$C" rollback tank/data@s2
assert_ok "$C" debug read tank/data "$obj" --off 0 --len 4M --seed 3 >/dev/null

note "promote, then the old origin can go"
assert_ok "$C" promote tank/copy
out=$(assert_ok "$C" list -H -t snapshot -o name -r tank/copy)
assert_contains "$out" "tank/copy@s1" "the promoted clone owns s1"
assert_ok "$C" destroy -r tank/data
assert_ok "$C" debug read tank/copy "$obj" --seed 1 --len 8M >/dev/null
assert_ok "$C" destroy tank/log@s1
out=$(assert_ok "$C" list -H -t snapshot -o name)
assert_eq "$out" "tank/copy@s1" "snapshots left"
assert_ok "$C" pool scrub -w tank
st=$(assert_ok "$C" pool status tank)
assert_contains "$st" "with 0 errors" "scrub after snapshot operations"
stop_daemon
start_daemon
out=$(assert_ok "$C" list -H -t snapshot -o name)
assert_eq "$out" "tank/copy@s1" "snapshots after a restart"
assert_eq "$(assert_ok "$C" get -H -o value com.cachalot:binlog tank/copy@s1)" "mysql-bin.000042:1337" "user property kept across promote and restart"
stop_daemon
