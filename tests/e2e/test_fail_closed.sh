#!/usr/bin/env bash
# timeout: 120
# Failing closed: a panic inside the engine (here planted through
# `debug panic`, which needs `serve --allow-fault-injection`) suspends the pool:
# writes fail, `pool status` says SUSPENDED and why, the API keeps answering,
# and `pool clear` re-imports the pool from its last commit (data committed
# before the panic reads back, writes work again). Nothing is caught to carry on.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

TMP=$(mktmp)
C=$CACHALOT
LEN=$((1024 * 1024))
# The planted panics are logged as internal errors on purpose.
ALLOW_DAEMON_ERRORS=1
DAEMON_ARGS=(--allow-fault-injection)

suspended() { # POOL: pool status must say SUSPENDED, with WHY in it
    local st
    st=$(assert_ok "$C" pool status "$1")
    echo "$st"
    assert_contains "$st" "SUSPENDED"
    assert_contains "$st" "$2"
}

online() { # POOL
    local st
    st=$(assert_ok "$C" pool status "$1")
    assert_contains "$st" "ONLINE"
    [[ $st != *SUSPENDED* ]] || fail "pool $1 still suspended: $st"
}

start_daemon
assert_ok "$C" pool create -s 128M tank "$TMP/t.img"
assert_ok "$C" create tank/d
obj=$(assert_ok "$C" debug create tank/d)
assert_ok "$C" debug write tank/d "$obj" --seed 3 --len "$LEN"
assert_ok "$C" pool sync tank

note "a panic in the middle of a commit suspends the pool"
assert_ok "$C" debug write tank/d "$obj" --off "$LEN" --seed 4 --len 65536
assert_ok "$C" debug panic tank commit
assert_fails "$C" pool sync tank
assert_contains "$LAST_STDERR" "injected panic"
suspended tank "injected panic in the commit"
assert_fails "$C" debug write tank/d "$obj" --seed 5 --len 4096
assert_contains "$LAST_STDERR" "suspended"
# The API keeps answering (dataset operations answer with the reason).
assert_ok "$C" pool list >/dev/null
assert_fails "$C" list
assert_contains "$LAST_STDERR" "suspended"

note "pool clear re-imports: what was committed reads back, writes work"
assert_ok "$C" pool clear tank
online tank
assert_ok "$C" debug read tank/d "$obj" --seed 3 --len "$LEN" >/dev/null
size=$(assert_ok "$C" debug size tank/d "$obj")
assert_eq "$size" "$LEN" "the uncommitted write is gone, the committed one is whole"
assert_ok "$C" debug write tank/d "$obj" --seed 6 --len 65536
assert_ok "$C" pool sync tank

note "a panic in a request handler suspends the pool the request named"
assert_fails "$C" debug panic tank request
assert_contains "$LAST_STDERR" "internal error"
suspended tank "injected panic in a request"
assert_fails "$C" debug fsync tank/d
assert_ok "$C" pool clear tank
online tank
assert_ok "$C" debug read tank/d "$obj" --seed 6 --len 65536 >/dev/null

note "pool clear of a pool that is not suspended changes nothing"
out=$(assert_ok "$C" pool clear tank)
assert_contains "$out" "not suspended"
assert_fails "$C" pool clear nosuch
stop_daemon

note "without --allow-fault-injection no panic can be planted"
DAEMON_ARGS=()
start_daemon
assert_fails "$C" debug panic tank commit
assert_contains "$LAST_STDERR" "allow-fault-injection"
online tank
stop_daemon
