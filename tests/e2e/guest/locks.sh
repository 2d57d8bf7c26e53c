#!/bin/bash
# Guest side of tests/e2e/test_guest_two_clients.sh: two guests (run at once, each
# with its own --name, so two NFSv4 clients) mount one NFSv4.1 export; the holder
# takes a whole-file lock (flock(1), which the Linux NFS client sends as a
# byte-range LOCK), the waiter must see it held, then get it once released.
#
#   locks.sh holder|waiter
#
# Environment: RESULTS (shared read-write directory), NFS_EXPORT. The handshake
# goes through files in RESULTS: held, conflict, release. Writes "ROLE ok" or
# "ROLE FAIL reason" to $RESULTS/ROLE.
set -uo pipefail
: "${RESULTS:?}" "${NFS_EXPORT:?}" "${GUEST_HOST:?}"
ROLE=$1
MNT=/mnt/locks
LOCKFILE=$MNT/lockfile

START=$(date +%s.%N)
say() { echo "[$ROLE $(hostname) +$(awk -v s="$START" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }') s] $*"; }
verdict() { # ok|FAIL [reason]
    echo "$ROLE $*" >"$RESULTS/$ROLE"
    say "$*"
    [[ $1 == ok ]]
}
source "$(dirname "${BASH_SOURCE[0]}")/common.sh" # wait_file

ip -4 -o addr show dev eth0 | awk '{ sub(/\/.*/, "", $4); print $4 }' >"$RESULTS/$ROLE-address"
mkdir -p "$MNT"
mount -t nfs4 -o vers=4.1,proto=tcp,hard "$GUEST_HOST:$NFS_EXPORT" "$MNT" ||
    { verdict FAIL "mount failed"; exit 1; }
case $ROLE in
    holder)
        exec 9>"$LOCKFILE"
        flock -x -w 60 9 || { verdict FAIL "could not take the free lock"; exit 1; }
        touch "$RESULTS/held"
        say "lock held"
        wait_file "$RESULTS/release" 180 || { verdict FAIL "no release signal"; exit 1; }
        flock -u 9
        exec 9>&-
        say "lock released"
        umount "$MNT"
        verdict ok
        ;;
    waiter)
        wait_file "$RESULTS/held" 180 || { verdict FAIL "the holder never took the lock"; exit 1; }
        if flock -x -n "$LOCKFILE" true; then
            touch "$RESULTS/release"
            verdict FAIL "got the lock while the other client held it"
            exit 1
        fi
        say "conflict seen: the lock is held by the other client"
        touch "$RESULTS/conflict" "$RESULTS/release"
        # Poll with -n: a blocking request would wait out the client's retry backoff
        # (1, 2, 4... s) when the server sends no CB_NOTIFY_LOCK.
        local_ok=0
        for ((i = 0; i < 180; i++)); do
            if flock -x -n "$LOCKFILE" true; then
                local_ok=1
                break
            fi
            sleep 0.5
        done
        ((local_ok)) || { verdict FAIL "lock not granted after release"; exit 1; }
        say "lock granted after the release"
        umount "$MNT"
        verdict ok
        ;;
    *) verdict FAIL "unknown role"; exit 2 ;;
esac
