#!/bin/bash
# Guest side of tests/e2e/test_nfs_kernel.sh: runs inside the QEMU guest and drives
# the Linux kernel's NFSv3 client (vers=3,proto=tcp,hard) against `cachalot serve`
# on the host ($GUEST_HOST). Environment: RESULTS (host dir shared read-write),
# DATA (4 MiB) and DATA2 (16 MiB) of random bytes (read through the host root),
# NFS_EXPORT, NFS_PORT, NDIR (entries of the large directory).
#
# Phases: the workload (create, write, rename over a file, hard link, truncate
# down and up, a sparse file, a large directory, fsync); then the crash: a writer
# holds a file open and writes DATA2 with O_DSYNC while the host kills the daemon
# with SIGKILL and restarts it (handshake files in $RESULTS: kill-request from
# the guest, killed and restarting from the host); a second writer creates small
# files across the crash. Both must finish by themselves without an error. Then
# unmount, drop caches, mount again and write "NAME SHA256" lines to
# $RESULTS/sums, facts to $RESULTS/facts; "ok" or "FAIL reason" to $RESULTS/verdict.
set -uo pipefail

: "${RESULTS:?}" "${DATA:?}" "${DATA2:?}" "${GUEST_HOST:?}" "${NFS_EXPORT:?}" "${NFS_PORT:?}" "${NDIR:?}"
MNT=/mnt/cachalot
OPTS="vers=3,proto=tcp,hard,nolock,port=$NFS_PORT,mountport=$NFS_PORT,mountproto=tcp"

now() { date +%s.%N; }
T0=$(now)
step() { echo "[nfs-kernel $(awk -v s="$T0" -v e="$(now)" 'BEGIN { printf "%6.1f", e - s }')] $*"; }
die() {
    echo "FAIL $*" >"$RESULTS/verdict"
    step "FAIL: $*"
    exit 1
}
fact() { echo "$*" >>"$RESULTS/facts"; }
sha_of() { sha256sum "$1" | cut -d' ' -f1; }
source "$(dirname "${BASH_SOURCE[0]}")/common.sh" # wait_file

mkdir -p "$MNT"
step "mount -o $OPTS $GUEST_HOST:$NFS_EXPORT"
mount -t nfs -o "$OPTS" "$GUEST_HOST:$NFS_EXPORT" "$MNT" || die "mount failed"
grep " $MNT " /proc/mounts
cd "$MNT" || die "cd failed"

step "workload: create, write, rename over a file, hard link"
cp "$DATA" a.bin || die "write a.bin"
printf 'to be replaced\n' >target.bin || die "write target.bin"
mv a.bin target.bin || die "rename a.bin over target.bin"
[[ ! -e a.bin ]] || die "a.bin still exists after the rename"
ln target.bin link.bin || die "hard link"
fact "nlink $(stat -c %h target.bin)"
{ mkdir -p sub && mv link.bin sub/link.bin; } || die "rename into a subdirectory"

step "workload: truncate down and up"
cp "$DATA" trunc.bin || die "write trunc.bin"
truncate -s 300000 trunc.bin || die "truncate down"
truncate -s 500000 trunc.bin || die "truncate up"
head -c 1000 "$DATA" | dd of=trunc.bin bs=1000 seek=450 conv=notrunc status=none || die "write into the extended tail"

step "workload: sparse file (64 MiB, data at 0, 32 MiB and the end)"
truncate -s 64M sparse.bin || die "create sparse.bin"
head -c 65536 "$DATA" | dd of=sparse.bin bs=64k seek=512 conv=notrunc status=none || die "write at 32 MiB"
printf 'start\n' | dd of=sparse.bin conv=notrunc status=none || die "write at 0"
printf 'end\n' | dd of=sparse.bin bs=1 seek=$((64 * 1048576 - 4)) conv=notrunc status=none || die "write at the end"

step "workload: a directory of $NDIR files"
mkdir big || die "mkdir big"
for ((i = 1; i <= NDIR; i++)); do
    printf 'entry %d\n' "$i" >"big/f$i" || die "create big/f$i"
done
rm big/f7 big/f77 || die "remove from big"
mv big/f8 big/renamed8 || die "rename in big"
fact "big-entries $(find big -mindepth 1 | wc -l)"
sync || die "sync"
step "workload done"

step "crash phase: writer of DATA2 (O_DSYNC, one open file), creator of small files"
mkdir crash || die "mkdir crash"
half=$(($(stat -c %s "$DATA2") / 2))
{
    head -c "$half" "$DATA2"
    touch "$RESULTS/kill-request"
    wait_file "$RESULTS/killed" 120 || echo "the host did not kill the daemon" >"$RESULTS/writer-note"
    tail -c +$((half + 1)) "$DATA2"
} | dd of=crash/stream.bin bs=256k iflag=fullblock oflag=dsync conv=fsync status=none &
writer=$!
(
    i=0 after=0
    while ((after < 20)); do
        i=$((i + 1))
        printf 'small %d\n' "$i" >"crash/s$i" || { echo "create crash/s$i failed" >"$RESULTS/creator-note"; exit 1; }
        echo "s$i" >>"$RESULTS/created"
        [[ -e $RESULTS/restarting ]] && after=$((after + 1))
        ((i < 5000)) || exit 1
    done
    sync
) &
creator=$!
wait_file "$RESULTS/killed" 180 || die "the host did not kill the daemon"
kill -0 "$writer" 2>/dev/null || die "the writer finished before the daemon was killed"
step "daemon killed; the writer is still running"
wrc=0
wait "$writer" || wrc=$?
step "writer finished (exit $wrc)"
[[ $wrc -eq 0 ]] || die "the writer failed across the restart (dd exit $wrc)"
[[ -e $RESULTS/restarting ]] || die "the writer finished while the daemon was down"
crc=0
wait "$creator" || crc=$?
[[ $crc -eq 0 ]] || die "the creator failed across the restart: $(cat "$RESULTS/creator-note" 2>/dev/null)"
step "creator finished ($(wc -l <"$RESULTS/created") files)"
[[ ! -e $RESULTS/writer-note ]] || die "$(cat "$RESULTS/writer-note")"

step "unmount, drop caches, mount again, checksums"
{ cd / && umount "$MNT"; } || die "umount failed"
echo 3 >/proc/sys/vm/drop_caches
mount -t nfs -o "$OPTS" "$GUEST_HOST:$NFS_EXPORT" "$MNT" || die "remount failed"
cd "$MNT" || die "cd failed"
{
    for f in target.bin sub/link.bin trunc.bin sparse.bin crash/stream.bin; do
        echo "$f $(sha_of "$f")"
    done
    # One process per listing, not one per file: forks are slow under TCG.
    echo "big $(grep -r '' big | LC_ALL=C sort | sha256sum | cut -d' ' -f1)"
    echo "crash-small $(sed 's|^|crash/|' "$RESULTS/created" | xargs grep -H '' | LC_ALL=C sort | sha256sum | cut -d' ' -f1)"
    echo "root-listing $(find . -mindepth 1 -maxdepth 1 -printf '%f\n' | LC_ALL=C sort | tr '\n' ' ')"
} >"$RESULTS/sums" || die "reading back failed"
fact "sizes $(stat -c %s trunc.bin sparse.bin crash/stream.bin | tr '\n' ' ')"
fact "nlink-after $(stat -c %h target.bin)"
{ cd / && umount "$MNT"; } || die "final umount failed"
echo ok >"$RESULTS/verdict"
step "ok"
