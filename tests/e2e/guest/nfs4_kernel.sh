#!/bin/bash
# Guest side of tests/e2e/test_nfs4_kernel.sh: the Linux kernel's NFSv4.1 client
# (vers=4.1,proto=tcp,hard) against `cachalot serve` on the host ($GUEST_HOST).
# Environment: RESULTS (host dir shared read-write), DATA (4 MiB of random
# bytes), TARGETS ("NAME:EXPORT:PORT ...", e.g. our daemon and NFS-Ganesha as the
# control), NDIR. For each target: a workload (create, write, rename over a file,
# hard link, truncate down and up, chown, a directory of NDIR files, symlink),
# unmount, drop caches, mount again, and "NAME SHA256" lines to
# $RESULTS/TARGET-sums, facts to $RESULTS/TARGET-facts. "ok" or "FAIL reason" to
# $RESULTS/verdict.
set -uo pipefail

: "${RESULTS:?}" "${DATA:?}" "${GUEST_HOST:?}" "${TARGETS:?}" "${NDIR:?}"

now() { date +%s.%N; }
T0=$(now)
step() { echo "[nfs4-kernel $(awk -v s="$T0" -v e="$(now)" 'BEGIN { printf "%6.1f", e - s }')] $*"; }
die() {
    echo "FAIL $*" >"$RESULTS/verdict"
    step "FAIL: $*"
    exit 1
}
fact() { echo "$*" >>"$RESULTS/$NAME-facts"; }

one_target() { # NAME EXPORT PORT
NAME=$1
local NFS_EXPORT=$2 MNT=/mnt/$1 OPTS="vers=4.1,proto=tcp,hard,port=$3"
mkdir -p "$MNT"
step "$NAME: mount -t nfs4 -o $OPTS $GUEST_HOST:$NFS_EXPORT"
mount -t nfs4 -o "$OPTS" "$GUEST_HOST:$NFS_EXPORT" "$MNT" || die "mount failed"
line=$(grep " $MNT " /proc/mounts)
echo "$line"
[[ $line == *vers=4.1* ]] || die "not an NFSv4.1 mount: $line"
cd "$MNT" || die "cd failed"

step "workload: create, write, rename over a file, hard link, symlink"
cp "$DATA" a.bin || die "write a.bin"
printf 'to be replaced\n' >target.bin || die "write target.bin"
mv a.bin target.bin || die "rename a.bin over target.bin"
[[ ! -e a.bin ]] || die "a.bin still exists after the rename"
ln target.bin link.bin || die "hard link"
fact "nlink $(stat -c %h target.bin)"
{ mkdir -p sub && mv link.bin sub/link.bin; } || die "rename into a subdirectory"
ln -s target.bin sym || die "symlink"
fact "symlink $(readlink sym)"

step "workload: truncate down and up, chown"
cp "$DATA" trunc.bin || die "write trunc.bin"
truncate -s 300000 trunc.bin || die "truncate down"
truncate -s 500000 trunc.bin || die "truncate up"
head -c 1000 "$DATA" | dd of=trunc.bin bs=1000 seek=450 conv=notrunc status=none || die "write into the extended tail"
chown 1234:2345 trunc.bin || die "chown"
fact "owner $(stat -c '%u:%g' trunc.bin)"

step "workload: a directory of $NDIR files"
mkdir big || die "mkdir big"
for ((i = 1; i <= NDIR; i++)); do
    printf 'entry %d\n' "$i" >"big/f$i" || die "create big/f$i"
done
rm big/f7 big/f77 || die "remove from big"
mv big/f8 big/renamed8 || die "rename in big"
fact "big-entries $(find big -mindepth 1 | wc -l)"
sync || die "sync"

step "unmount, drop caches, mount again"
cd / && umount "$MNT" || die "umount failed"
echo 3 >/proc/sys/vm/drop_caches
mount -t nfs4 -o "$OPTS" "$GUEST_HOST:$NFS_EXPORT" "$MNT" || die "remount failed"
cd "$MNT" || die "cd after remount"
fact "nlink-after $(stat -c %h target.bin)"
fact "owner-after $(stat -c '%u:%g' trunc.bin)"
fact "sizes $(stat -c %s trunc.bin) $(stat -c %s target.bin)"
{
    for f in target.bin sub/link.bin trunc.bin; do
        echo "$f $(sha256sum "$f" | cut -d' ' -f1)"
    done
    echo "big $(grep -r '' big | LC_ALL=C sort | sha256sum | cut -d' ' -f1)"
    echo "root-listing $(find . -mindepth 1 -maxdepth 1 -printf '%f\n' | LC_ALL=C sort | tr '\n' ' ')"
} >"$RESULTS/$NAME-sums"
cd / && umount "$MNT" || die "final umount"
step "$NAME done"
}

for t in $TARGETS; do
    IFS=: read -r name export port <<<"$t"
    one_target "$name" "$export" "$port"
done
echo ok >"$RESULTS/verdict"
