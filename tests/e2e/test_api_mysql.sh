#!/usr/bin/env bash
# timeout: 300
# The MySQL routes of the REST API (/api/v1/mysql) against a real MariaDB on
# cachalot FUSE mounts, over real HTTP (tests/e2e/api_mysql_check.py):
# - a snapshot set taken through the API records GTID and binlog position on both
#   members, is listed by the API and by `cachalot mysql list`;
# - advise answers with the advice the CLI gives;
# - a clone to a running replica is a job whose server-sent events climb to done;
#   the replica runs (its pid recorded on the clone), replicates, and applies a
#   write made afterwards on the source;
# - restore is refused while the server runs (nothing changed), and rolls the set
#   back once the servers are stopped: the counter is as at the snapshot;
# - bad input (unknown fields, wrong types, relative paths, names or sockets that
#   do not exist, a name in use, a snapshot that is not a set), no token (401) and
#   a wrong token (403): a JSON error with a stable code, nothing changed, no job.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/e2e/fuse_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/fuse_lib.sh"

command -v mariadbd >/dev/null || fail "mariadb-server is not installed"

# The replica's server, started by the daemon, outlives its job: stop it before
# the daemon (which holds its files) goes away.
_api_mysql_cleanup() {
    local rc=$? pid
    set +e
    if [[ -n ${D:-} && -f $D/replica.pid ]]; then
        pid=$(cat "$D/replica.pid")
        kill -KILL "$pid" 2>/dev/null
        while [[ -e /proc/$pid ]]; do sleep 0.1; done
        cp "$D/replica/data.run/error.log" "$ARTIFACTS/replica-error.log" 2>/dev/null
    fi
    (exit "$rc")
    _fuse_cleanup
}
trap _api_mysql_cleanup EXIT

MY_PORT=$(free_port)
mariadb_on_cachalot 1G
export D MY_SOCK
sql "create database ck; create table ck.counter (id int primary key, n int) engine=innodb;
     insert into ck.counter values (1, 0)"
TOKEN=$(assert_ok "$CACHALOT" token create mysql-e2e)
ADDR=$(cat "$HOME_DIR/http.addr")
WORK=$(mktmp)
CHECK=(python3 "$REPO/tests/e2e/api_mysql_check.py" "$ADDR" "$TOKEN" "$CACHALOT" "$WORK" "$ARTIFACTS")

"${CHECK[@]}" running

note "stop the replica and the source, then restore through the API"
pid=$(cat "$D/replica.pid")
kill -TERM "$pid"
for ((i = 0; i < 300; i++)); do [[ -e /proc/$pid ]] || break; sleep 0.1; done
[[ -e /proc/$pid ]] && fail "the replica server (pid $pid) did not stop"
rm "$D/replica.pid"
mariadb_stop
"${CHECK[@]}" stopped
mariadb_start
assert_eq "$(sql "select n from ck.counter")" "1" "restore brought back the counter as at the snapshot"
mariadb_stop
if grep -q "$TOKEN" "$ARTIFACTS/daemon.log"; then fail "the token secret is in daemon.log"; fi
stop_daemon
echo "PASS"
