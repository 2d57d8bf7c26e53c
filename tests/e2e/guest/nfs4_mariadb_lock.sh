#!/bin/bash
# Guest side of tests/e2e/test_nfs4_mariadb_lock.sh: two guests (each its own
# NFSv4.1 client) mount one share of OUR daemon. The first runs MariaDB on a data
# directory there; the second starts MariaDB on the same data directory and must
# be refused (InnoDB and Aria lock their files, and the locks are NFSv4 byte-range
# locks held by the first client). The host then kills the first guest's QEMU
# (no unlock, no renewal): once its lease expires the server releases its locks
# and the second guest's MariaDB starts (crash recovery of what the first left).
#
#   nfs4_mariadb_lock.sh first|second
#
# Environment: RESULTS (shared read-write), NFS_EXPORT. Handshake files in RESULTS:
# up (first's server answers), refused (second saw the refusal), killed (host).
# "ROLE ok" or "ROLE FAIL reason" to $RESULTS/ROLE.
set -uo pipefail
: "${RESULTS:?}" "${NFS_EXPORT:?}" "${GUEST_HOST:?}"
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
ROLE=$1
MNT=/mnt/cachalot
DATADIR=$MNT/mysql
SOCK=/run/mysqld-guest.sock
ERRLOG=/run/mariadb-error.log
BASEOPTS=(--no-defaults --user=root --datadir="$DATADIR" --skip-name-resolve
    --innodb-log-file-size=16M --innodb-buffer-pool-size=64M
    --performance-schema=OFF --skip-log-bin)
MYOPTS=("${BASEOPTS[@]}" --skip-networking --socket="$SOCK"
    --pid-file=/run/mysqld-guest.pid --log-error="$ERRLOG")

START=$(date +%s.%N)
say() { echo "[$ROLE +$(awk -v s="$START" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }') s] $*"; }
verdict() { # ok|FAIL [reason]
    echo "$ROLE $*" >"$RESULTS/$ROLE"
    say "$*"
    [[ $1 == ok ]] || { [[ -f $ERRLOG ]] && cp "$ERRLOG" "$RESULTS/$ROLE-error.log"; }
    [[ $1 == ok ]]
}
source "$(dirname "${BASH_SOURCE[0]}")/common.sh" # wait_file
sql() { mariadb --no-defaults -S "$SOCK" -uroot -N -B -e "$*"; }
answers() { # PID SECONDS: the server answers, or exits (1), or times out (2)
    local i
    for ((i = 0; i < $2 * 5; i++)); do
        sql 'SELECT 1' >/dev/null 2>&1 && return 0
        kill -0 "$1" 2>/dev/null || return 1
        sleep 0.2
    done
    return 2
}

mkdir -p "$MNT"
mount -t nfs4 -o vers=4.1,proto=tcp,hard "$GUEST_HOST:$NFS_EXPORT" "$MNT" ||
    { verdict FAIL "mount failed"; exit 1; }
case $ROLE in
    first)
        mkdir -p "$DATADIR"
        mariadb-install-db "${BASEOPTS[@]}" --auth-root-authentication-method=normal \
            --skip-test-db >/run/install.log 2>&1 ||
            { tail -n 20 /run/install.log; verdict FAIL "mariadb-install-db failed"; exit 1; }
        mariadbd "${MYOPTS[@]}" &
        server=$!
        answers "$server" 180 || { verdict FAIL "mariadbd did not start"; exit 1; }
        sql 'CREATE DATABASE t; CREATE TABLE t.a (id INT PRIMARY KEY) ENGINE=InnoDB;
             INSERT INTO t.a VALUES (1), (2), (3)' || { verdict FAIL "create failed"; exit 1; }
        touch "$RESULTS/up"
        say "MariaDB up on the share; waiting to be killed"
        sleep 600
        verdict FAIL "was not killed"
        ;;
    second)
        wait_file "$RESULTS/up" 240 || { verdict FAIL "the first server never came up"; exit 1; }
        say "starting a second MariaDB on the same data directory"
        mariadbd "${MYOPTS[@]}" &
        server=$!
        rc=0
        answers "$server" 120 || rc=$?
        if ((rc == 0)); then
            verdict FAIL "a second MariaDB started on a data directory another client's server holds"
            exit 1
        fi
        ((rc == 1)) || { kill -KILL "$server"; verdict FAIL "the second MariaDB neither started nor exited"; exit 1; }
        wait "$server" 2>/dev/null
        grep -E "Unable to lock|Can't lock" "$ERRLOG" >"$RESULTS/refusal" ||
            { verdict FAIL "the second MariaDB exited, but not for a lock"; exit 1; }
        say "refused: $(head -n 1 "$RESULTS/refusal")"
        rm -f "$ERRLOG"
        touch "$RESULTS/refused"
        wait_file "$RESULTS/killed" 120 || { verdict FAIL "the first guest was not killed"; exit 1; }
        t0=$(date +%s)
        # The dead client's locks go when its lease runs out; MariaDB (InnoDB
        # and Aria retry their locks for a while) is started until it stays up.
        for ((try = 0; try < 8; try++)); do
            mariadbd "${MYOPTS[@]}" &
            server=$!
            rc=0
            answers "$server" 120 || rc=$?
            ((rc == 0)) && break
            ((rc == 2)) && kill -KILL "$server"
            wait "$server" 2>/dev/null
            sleep 2
        done
        ((rc == 0)) || { verdict FAIL "MariaDB never started after the first client died"; exit 1; }
        echo $(($(date +%s) - t0)) >"$RESULTS/started-after"
        say "second MariaDB up $(cat "$RESULTS/started-after") s after the first guest died"
        [[ $(sql 'SELECT COUNT(*) FROM t.a') == 3 ]] || { verdict FAIL "the first server's rows are not there"; exit 1; }
        out=$(sql 'CHECK TABLE t.a' | awk '$3 == "status" { print $4 }')
        [[ $out == OK ]] || { verdict FAIL "CHECK TABLE: $out"; exit 1; }
        mariadb-admin --no-defaults -S "$SOCK" -uroot shutdown || { verdict FAIL "shutdown failed"; exit 1; }
        wait "$server"
        umount "$MNT"
        verdict ok
        ;;
    *) verdict FAIL "unknown role"; exit 2 ;;
esac
