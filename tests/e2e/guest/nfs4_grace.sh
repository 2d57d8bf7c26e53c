#!/bin/bash
# Guest side of tests/e2e/test_nfs4_grace.sh: the kernel's NFSv4.1 client holds
# a whole-file lock (flock(1)) on an open file and writes to it while the host
# kills the daemon with SIGKILL and restarts it. The client must reclaim its open
# and lock in the grace period and go on: the writes after the restart succeed
# through the same file descriptor, the lock is released cleanly, and the file's
# content is what was written. Environment: RESULTS (shared read-write), DATA
# (4 MiB), NFS_EXPORT. Handshake files in RESULTS: held (guest), restarted (host).
# Writes "ok" or "FAIL reason" to $RESULTS/verdict and the file's sha256 to
# $RESULTS/sum.
set -uo pipefail
: "${RESULTS:?}" "${DATA:?}" "${NFS_EXPORT:?}" "${GUEST_HOST:?}"
MNT=/mnt/grace
START=$(date +%s.%N)
say() { echo "[grace +$(awk -v s="$START" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }') s] $*"; }
die() {
    echo "FAIL $*" >"$RESULTS/verdict"
    say "FAIL: $*"
    exit 1
}
source "$(dirname "${BASH_SOURCE[0]}")/common.sh" # wait_file

mkdir -p "$MNT"
mount -t nfs4 -o vers=4.1,proto=tcp,hard "$GUEST_HOST:$NFS_EXPORT" "$MNT" || die "mount failed"
exec 9>"$MNT/ibdata1" || die "open"
flock -x -w 60 9 || die "could not take the lock"
head -c $((2 << 20)) "$DATA" >&9 || die "first half"
sync || die "sync"
touch "$RESULTS/held"
say "lock held, first half written; waiting for the daemon to be killed and restarted"
wait_file "$RESULTS/restarted" 120 || die "no restart signal"
tail -c +$(((2 << 20) + 1)) "$DATA" >&9 || die "second half after the restart"
sync || die "sync after the restart"
say "second half written after the restart"
flock -u 9 || die "unlock"
exec 9>&-
sha256sum "$MNT/ibdata1" | cut -d' ' -f1 >"$RESULTS/sum"
umount "$MNT" || die "umount"
echo ok >"$RESULTS/verdict"
say ok
