#!/bin/bash
# Guest side of tests/e2e/test_nfs4_lease.sh: two guests (each its own --name, so
# two NFSv4.1 clients) mount one share of our daemon. The holder takes a
# whole-file lock (flock(1), a byte-range LOCK over NFSv4) and then waits to be
# killed with its whole QEMU (a dead client: no CLOSE, no LOCKU, no more lease
# renewals). The waiter sees the lock held, then polls until the server releases
# the dead client's lock when its lease expires, and writes the seconds that took
# to $RESULTS/granted-after.
#
#   nfs4_lease.sh holder|waiter
#
# Environment: RESULTS (shared read-write), NFS_EXPORT. Handshake files in
# RESULTS: held, conflict. Writes "ROLE ok" or "ROLE FAIL reason" to $RESULTS/ROLE.
set -uo pipefail
: "${RESULTS:?}" "${NFS_EXPORT:?}" "${GUEST_HOST:?}"
ROLE=$1
MNT=/mnt/lease
LOCKFILE=$MNT/ibdata1

START=$(date +%s.%N)
say() { echo "[$ROLE $(hostname) +$(awk -v s="$START" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }') s] $*"; }
verdict() {
    echo "$ROLE $*" >"$RESULTS/$ROLE"
    say "$*"
    [[ $1 == ok ]]
}
source "$(dirname "${BASH_SOURCE[0]}")/common.sh" # wait_file

mkdir -p "$MNT"
mount -t nfs4 -o vers=4.1,proto=tcp,hard "$GUEST_HOST:$NFS_EXPORT" "$MNT" ||
    { verdict FAIL "mount failed"; exit 1; }
case $ROLE in
    holder)
        exec 9>"$LOCKFILE"
        flock -x -w 60 9 || { verdict FAIL "could not take the free lock"; exit 1; }
        touch "$RESULTS/held"
        say "lock held; waiting to be killed"
        sleep 600
        verdict FAIL "was not killed"
        ;;
    waiter)
        wait_file "$RESULTS/held" 180 || { verdict FAIL "the holder never took the lock"; exit 1; }
        if flock -x -n "$LOCKFILE" true; then
            verdict FAIL "got the lock while the other client held it"
            exit 1
        fi
        say "conflict seen: the lock is held by the other client"
        touch "$RESULTS/conflict"
        wait_file "$RESULTS/killed" 120 || { verdict FAIL "the holder was not killed"; exit 1; }
        t0=$(date +%s)
        got=0
        for ((i = 0; i < 240; i++)); do
            if flock -x -n "$LOCKFILE" true; then
                got=1
                break
            fi
            sleep 0.5
        done
        ((got)) || { verdict FAIL "the dead client's lock was never released"; exit 1; }
        echo $(($(date +%s) - t0)) >"$RESULTS/granted-after"
        say "lock granted $(cat "$RESULTS/granted-after") s after the holder died"
        umount "$MNT"
        verdict ok
        ;;
    *) verdict FAIL "unknown role"; exit 2 ;;
esac
