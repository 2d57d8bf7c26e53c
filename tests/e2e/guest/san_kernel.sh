#!/bin/bash
# Guest side of tests/e2e/test_san_kernel.sh: runs inside the QEMU guest and drives
# the Linux kernel's iSCSI initiator (open-iscsi: iscsid + iscsiadm) and NBD client
# (nbd-client) against `cachalot serve` on the host ($GUEST_HOST).
#
# Environment: RESULTS (host dir shared read-write), DATA (4 MiB) and DATA2
# (16 MiB) of random bytes (read through the host root), ISCSI_PORT, ISCSI_IQN,
# CHAP_USER, CHAP_SECRET, NBD_PORT, NBD_NAME, NSMALL (small files per disk).
#
# Phases:
#  1. iSCSI: SendTargets discovery lists the target (its TargetAddress goes to
#     facts); a login with a wrong CHAP secret is refused, the right one logs in;
#     mkfs.xfs, mount, DATA and NSMALL small files, sync.
#  2. NBD: nbd-client, mkfs.xfs, mount, the same files, sync (stays mounted).
#  3. The crash: a writer streams DATA2 with O_DSYNC to the iSCSI file system
#     while the host kills the daemon with SIGKILL, leaves it down 2 s and starts
#     it again (handshake files in $RESULTS: kill-request from the guest, killed
#     and restarting from the host). The kernel initiator must recover the session
#     by itself and the writer finish without an error.
#  4. Read-back from the server: the iSCSI disk unmounted, logged out, caches
#     dropped, logged in again (a new session and a new disk), mounted; the NBD
#     disk (whose connection died with the daemon) unmounted, disconnected,
#     connected again, mounted (xfs log recovery). "NAME SHA256" lines go to
#     $RESULTS/sums, facts to $RESULTS/facts; "ok" or "FAIL reason" to
#     $RESULTS/verdict.
set -uo pipefail

: "${RESULTS:?}" "${DATA:?}" "${DATA2:?}" "${GUEST_HOST:?}" "${ISCSI_PORT:?}" "${ISCSI_IQN:?}"
: "${CHAP_USER:?}" "${CHAP_SECRET:?}" "${NBD_PORT:?}" "${NBD_NAME:?}"
NSMALL=${NSMALL:-200}
PORTAL=$GUEST_HOST:$ISCSI_PORT
IMNT=/mnt/iscsi
NMNT=/mnt/nbd
NBD_DEV=/dev/nbd0

now() { date +%s.%N; }
T0=$(now)
step() { echo "[san-kernel $(awk -v s="$T0" -v e="$(now)" 'BEGIN { printf "%6.1f", e - s }')] $*"; }
die() {
    echo "FAIL $*" >"$RESULTS/verdict"
    step "FAIL: $*"
    dmesg | tail -n 30
    exit 1
}
fact() { echo "$*" >>"$RESULTS/facts"; }
sha_of() { sha256sum "$1" | cut -d' ' -f1; }
source "$(dirname "${BASH_SOURCE[0]}")/common.sh" # wait_file
wait_for() { # SECONDS CMD...
    local limit=$1 i
    shift
    for ((i = 0; i < limit * 5; i++)); do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.2
    done
    return 1
}

# The files every disk gets: DATA and NSMALL small files in one directory.
populate() { # DIR
    cp "$DATA" "$1/data.bin" || return 1
    mkdir -p "$1/small" || return 1
    local i
    for ((i = 1; i <= NSMALL; i++)); do
        printf 'small file %d of %s\n' "$i" "$1" >"$1/small/f$i" || return 1
    done
}
# "NAME SHA" lines of what populate wrote (and crash.bin if present), prefixed.
sums() { # DIR PREFIX
    echo "$2/data.bin $(sha_of "$1/data.bin")"
    [[ ! -e $1/crash.bin ]] || echo "$2/crash.bin $(sha_of "$1/crash.bin")"
    # One process per listing, not one per file: forks are slow under TCG.
    echo "$2/small $(cd "$1" && grep -r '' small | LC_ALL=C sort | sha256sum | cut -d' ' -f1)"
}

iscsi_disk() { # prints the sdX of the logged-in session
    local b
    for b in /sys/class/iscsi_session/session*/device/target*/*:*:*:*/block/*; do
        [[ -e $b ]] && { basename "$b"; return 0; }
    done
    return 1
}
iscsi_login() { # sets DEV
    local disk
    iscsiadm -m node -T "$ISCSI_IQN" -p "$PORTAL" --login || return 1
    wait_for 30 iscsi_disk || return 1
    disk=$(iscsi_disk)
    wait_for 10 test -b "/dev/$disk" || return 1
    DEV=/dev/$disk
}
iscsi_logout() { iscsiadm -m node -T "$ISCSI_IQN" -p "$PORTAL" --logout; }
iscsi_set() { # NAME VALUE
    iscsiadm -m node -T "$ISCSI_IQN" -p "$PORTAL" -o update -n "$1" -v "$2"
}

mkdir -p "$IMNT" "$NMNT"

step "iSCSI: iscsid, SendTargets discovery on $PORTAL"
# In the foreground, its log kept for the host (ISCSID_DEBUG=1..8 for more).
iscsid -f -d "${ISCSID_DEBUG:-0}" >"$RESULTS/iscsid.log" 2>&1 &
wait_for 10 test -f /run/iscsid.pid || sleep 1
found=$(iscsiadm -m discovery -t sendtargets -p "$PORTAL") || die "discovery failed"
echo "$found"
[[ $found == *" $ISCSI_IQN"* ]] || die "discovery did not list $ISCSI_IQN"
fact "sendtargets $(grep -F " $ISCSI_IQN" <<<"$found" | head -n 1 | cut -d' ' -f1)"
# Discovery made the node record with the address the target answered; a target
# that answers with an address the guest cannot reach (its own 127.0.0.1 as seen
# through QEMU's NAT) needs a record made by hand.
if ! iscsiadm -m node -T "$ISCSI_IQN" -p "$PORTAL" >/dev/null 2>&1; then
    iscsiadm -m node -o new -T "$ISCSI_IQN" -p "$PORTAL" >/dev/null || die "iscsiadm -o new failed"
fi
iscsi_set node.session.auth.authmethod CHAP || die "iscsiadm update failed"
iscsi_set node.session.auth.username "$CHAP_USER" || die "iscsiadm update failed"
iscsi_set node.session.auth.password "wrong-$CHAP_SECRET" || die "iscsiadm update failed"
# Recover a dropped session quickly, and give up only long after the restart.
iscsi_set node.session.timeo.replacement_timeout 120 || die "iscsiadm update failed"
if iscsi_login; then
    die "a login with a wrong CHAP secret succeeded"
fi
step "login with a wrong CHAP secret refused"
iscsi_set node.session.auth.password "$CHAP_SECRET" || die "iscsiadm update failed"
iscsi_login || die "login failed (or no disk appeared)"
IDEV=$DEV
fact "iscsi-size $(blockdev --getsize64 "$IDEV")"
step "iSCSI disk $IDEV: mkfs.xfs, mount, $NSMALL small files"
mkfs.xfs -q -f "$IDEV" || die "mkfs.xfs on iSCSI failed"
mount "$IDEV" "$IMNT" || die "mount of the iSCSI disk failed"
populate "$IMNT" || die "writing to the iSCSI disk failed"
sync || die "sync"

step "NBD: nbd-client -N $NBD_NAME $GUEST_HOST $NBD_PORT"
nbd-client -N "$NBD_NAME" "$GUEST_HOST" "$NBD_PORT" "$NBD_DEV" || die "nbd-client failed"
fact "nbd-size $(blockdev --getsize64 "$NBD_DEV")"
mkfs.xfs -q -f "$NBD_DEV" || die "mkfs.xfs on NBD failed"
mount "$NBD_DEV" "$NMNT" || die "mount of the NBD disk failed"
populate "$NMNT" || die "writing to the NBD disk failed"
sync || die "sync"
step "both disks written and synced"

step "crash phase: O_DSYNC writer of DATA2 on the iSCSI disk"
half=$(($(stat -c %s "$DATA2") / 2))
{
    head -c "$half" "$DATA2"
    touch "$RESULTS/kill-request"
    wait_file "$RESULTS/killed" 120 || echo "the host did not kill the daemon" >"$RESULTS/writer-note"
    tail -c +$((half + 1)) "$DATA2"
} | dd of="$IMNT/crash.bin" bs=256k iflag=fullblock oflag=dsync conv=fsync status=none &
writer=$!
wait_file "$RESULTS/killed" 180 || die "the host did not kill the daemon"
kill -0 "$writer" 2>/dev/null || die "the writer finished before the daemon was killed"
step "daemon killed; the writer is still running"
wrc=0
wait "$writer" || wrc=$?
step "writer finished (exit $wrc)"
[[ $wrc -eq 0 ]] || die "the writer failed across the restart (dd exit $wrc)"
[[ -e $RESULTS/restarting ]] || die "the writer finished while the daemon was down"
[[ ! -e $RESULTS/writer-note ]] || die "$(cat "$RESULTS/writer-note")"

step "iSCSI read-back: umount, logout, drop caches, login (a new session), mount"
umount "$IMNT" || die "umount of the iSCSI disk failed"
iscsi_logout || die "logout failed"
echo 3 >/proc/sys/vm/drop_caches
iscsi_login || die "login after the restart failed"
mount -o ro "$DEV" "$IMNT" || die "remount of the iSCSI disk failed"
sums "$IMNT" iscsi >>"$RESULTS/sums" || die "reading the iSCSI disk back failed"
fact "crash-size $(stat -c %s "$IMNT/crash.bin")"
umount "$IMNT" || die "final umount of the iSCSI disk failed"
iscsi_logout || die "final logout failed"

step "NBD read-back: its connection died with the daemon; umount, disconnect, reconnect, mount"
# The file system may have shut itself down on a write error after the kill:
# unmounting is all that is asked of it.
umount "$NMNT" || die "umount of the NBD disk failed"
nbd-client -d "$NBD_DEV" || true
echo 3 >/proc/sys/vm/drop_caches
wait_for 20 nbd-client -N "$NBD_NAME" "$GUEST_HOST" "$NBD_PORT" "$NBD_DEV" || die "NBD reconnect failed"
mount "$NBD_DEV" "$NMNT" || die "remount of the NBD disk failed (xfs log recovery)"
sums "$NMNT" nbd >>"$RESULTS/sums" || die "reading the NBD disk back failed"
umount "$NMNT" || die "final umount of the NBD disk failed"
nbd-client -d "$NBD_DEV" || die "final NBD disconnect failed"
echo ok >"$RESULTS/verdict"
step "ok"
