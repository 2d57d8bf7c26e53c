#!/bin/bash
# Guest side of tests/e2e/test_guest_clients.sh: runs inside the QEMU guest (through
# tests/guest/run-in-guest.sh) and drives the Linux kernel's NFS client, NBD client
# and iSCSI initiator against servers on the host ($GUEST_HOST, 10.0.2.2).
#
#   clients.sh PART...     PART: nfs3 nfs41 nfs3-restart nbd iscsi
#
# Environment (from the host test): RESULTS (a host directory shared read-write),
# DATA (a file of random bytes on the host, read through the host root share),
# NFS_EXPORT, NBD_PORT, NBD_NAME, ISCSI_PORT, ISCSI_IQN, CHAP_USER, CHAP_SECRET.
#
# Each part writes "PART ok SHA256" or "PART FAIL reason" to $RESULTS/PART and
# goes on with the next part; the exit status is 1 if any part failed. SHA256 is
# the checksum of what the guest read back from the server, compared on the host.
set -uo pipefail

: "${RESULTS:?}" "${DATA:?}" "${GUEST_HOST:?}"
SERVER=$GUEST_HOST
failed=0

now() { date +%s.%N; }
elapsed() { awk -v s="$1" -v e="$(now)" 'BEGIN { printf "%.1f", e - s }'; }
step() { echo "[$CURRENT] $*"; }
# run CMD...: echo it, run it; its output goes to the log.
run() {
    step "\$ $*"
    "$@"
}
part_fail() {
    echo "$CURRENT FAIL $*" >"$RESULTS/$CURRENT"
    echo "[$CURRENT] FAIL: $*"
    failed=1
}
part_ok() { # sha
    echo "$CURRENT ok $1" >"$RESULTS/$CURRENT"
    echo "[$CURRENT] ok in $(elapsed "$PART_START") s"
}
sha_of() { sha256sum "$1" | cut -d' ' -f1; }

# wait_for SECONDS CMD...: retry CMD every 0.2 s until it succeeds.
wait_for() {
    local limit=$1 i
    shift
    for ((i = 0; i < limit * 5; i++)); do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.2
    done
    return 1
}

# ---- NFS: write DATA to the share, read the host's file, unmount, remount, read back.
nfs_round_trip() { # mount-type options
    local type=$1 opts=$2 mnt=/mnt/$CURRENT sha
    mkdir -p "$mnt"
    run mount -t "$type" -o "$opts" "$SERVER:$NFS_EXPORT" "$mnt" || { part_fail "mount failed"; return; }
    grep " $mnt " /proc/mounts
    run cp "$DATA" "$mnt/from-guest-$CURRENT.bin" || { part_fail "write failed"; umount "$mnt"; return; }
    sync
    [[ -f $mnt/from-host.bin ]] || { part_fail "the host's file is not visible"; umount "$mnt"; return; }
    sha_of "$mnt/from-host.bin" >"$RESULTS/$CURRENT.host-file"
    run umount "$mnt" || { part_fail "umount failed"; return; }
    # A fresh mount and no page cache: the data comes from the server.
    echo 3 >/proc/sys/vm/drop_caches
    run mount -t "$type" -o "$opts" "$SERVER:$NFS_EXPORT" "$mnt" || { part_fail "remount failed"; return; }
    sha=$(sha_of "$mnt/from-guest-$CURRENT.bin")
    run umount "$mnt" || { part_fail "umount failed"; return; }
    part_ok "$sha"
}

part_nfs3() {
    # Stock mount.nfs: it asks the host's portmapper (port 111) for the ports.
    nfs_round_trip nfs "vers=3,proto=tcp,hard,nolock,mountproto=tcp"
}

part_nfs41() {
    nfs_round_trip nfs4 "vers=4.1,proto=tcp,hard"
}

# ---- NFSv3 across a server crash: the host kills the server with SIGKILL while a
# write is pending on the hard mount; it completes once the server is back.
# Handshake through $RESULTS: the guest creates kill-nfs-server, the host answers
# nfs-server-killed, then nfs-server-restarting just before it starts the server.
part_nfs3_restart() {
    local mnt=/mnt/$CURRENT opts="vers=3,proto=tcp,hard,nolock,mountproto=tcp" half t0 sha
    half=$(($(stat -c %s "$DATA") / 2))
    mkdir -p "$mnt"
    run mount -t nfs -o "$opts" "$SERVER:$NFS_EXPORT" "$mnt" || { part_fail "mount failed"; return; }
    head -c "$half" "$DATA" >"$mnt/restart.bin" && sync || { part_fail "first half failed"; return; }
    touch "$RESULTS/kill-nfs-server"
    wait_for 60 test -e "$RESULTS/nfs-server-killed" || { part_fail "the host did not kill the server"; return; }
    t0=$(now)
    step "server killed; writing the second half with fsync"
    tail -c +$((half + 1)) "$DATA" | dd of="$mnt/restart.bin" bs=1M oflag=append conv=notrunc,fsync status=none ||
        { part_fail "the write across the restart failed"; return; }
    step "second half durable after $(elapsed "$t0") s"
    [[ -e $RESULTS/nfs-server-restarting ]] ||
        { part_fail "fsync returned while the server was down"; return; }
    run umount "$mnt" || { part_fail "umount failed"; return; }
    echo 3 >/proc/sys/vm/drop_caches
    run mount -t nfs -o "$opts" "$SERVER:$NFS_EXPORT" "$mnt" || { part_fail "remount failed"; return; }
    sha=$(sha_of "$mnt/restart.bin")
    run umount "$mnt"
    part_ok "$sha"
}

# ---- NBD: ext4 on /dev/nbd0; the host checks the file in the image with debugfs.
part_nbd() {
    local dev=/dev/nbd0 mnt=/mnt/nbd sha
    mkdir -p "$mnt"
    run nbd-client -N "$NBD_NAME" "$SERVER" "$NBD_PORT" "$dev" || { part_fail "nbd-client failed"; return; }
    run blockdev --getsize64 "$dev"
    run mkfs.ext4 -q -F "$dev" || { part_fail "mkfs.ext4 failed"; nbd-client -d "$dev"; return; }
    run mount "$dev" "$mnt" || { part_fail "mount failed"; nbd-client -d "$dev"; return; }
    run cp "$DATA" "$mnt/from-guest.bin" && sync ||
        { part_fail "write failed"; umount "$mnt"; nbd-client -d "$dev"; return; }
    run umount "$mnt"
    run nbd-client -d "$dev"
    # Reconnect: a new connection, no page cache of the old one.
    run nbd-client -N "$NBD_NAME" "$SERVER" "$NBD_PORT" "$dev" || { part_fail "reconnect failed"; return; }
    run mount -o ro "$dev" "$mnt" || { part_fail "remount failed"; nbd-client -d "$dev"; return; }
    sha=$(sha_of "$mnt/from-guest.bin")
    run umount "$mnt"
    run nbd-client -d "$dev"
    part_ok "$sha"
}

# ---- iSCSI: iscsid + iscsiadm (discovery, CHAP, login), xfs, logout, login, read.
iscsi_disk() { # prints the sdX of the logged-in session
    local b
    for b in /sys/class/iscsi_session/session*/device/target*/*:*:*:*/block/*; do
        [[ -e $b ]] && { basename "$b"; return 0; }
    done
    return 1
}
iscsi_login() { # sets DEV to the disk of the new session
    local portal=$SERVER:$ISCSI_PORT disk
    run iscsiadm -m node -T "$ISCSI_IQN" -p "$portal" --login || return 1
    wait_for 30 iscsi_disk || return 1
    disk=$(iscsi_disk)
    wait_for 10 test -b "/dev/$disk" || return 1
    DEV=/dev/$disk
}
iscsi_logout() {
    run iscsiadm -m node -T "$ISCSI_IQN" -p "$SERVER:$ISCSI_PORT" --logout
}
iscsi_set_chap() { # user secret
    local n
    for n in authmethod=CHAP username="$1" password="$2"; do
        iscsiadm -m node -T "$ISCSI_IQN" -p "$SERVER:$ISCSI_PORT" -o update \
            -n "node.session.auth.${n%%=*}" -v "${n#*=}" || { part_fail "iscsiadm update failed"; return 1; }
    done
}
part_iscsi() {
    local portal=$SERVER:$ISCSI_PORT dev mnt=/mnt/iscsi sha n
    mkdir -p "$mnt"
    # iscsid keeps its node database in /etc/iscsi and /var/lib/iscsi: writable here,
    # as the guest's root is an overlay.
    run iscsid || { part_fail "iscsid did not start"; return; }
    wait_for 10 test -f /run/iscsid.pid
    local found
    found=$(run iscsiadm -m discovery -t sendtargets -p "$portal") || { part_fail "discovery failed"; return; }
    echo "$found"
    [[ $found == *" $ISCSI_IQN"* ]] || { part_fail "discovery did not list $ISCSI_IQN"; return; }
    # SendTargets answers with the address the target sees itself on (127.0.0.1 on
    # the host), which the guest cannot reach: the node record names 10.0.2.2.
    run iscsiadm -m node -o new -T "$ISCSI_IQN" -p "$portal" || { part_fail "iscsiadm -o new failed"; return; }
    # CHAP is enforced: a wrong secret is refused, the right one logs in.
    iscsi_set_chap "$CHAP_USER" "wrong-$CHAP_SECRET" || return
    if iscsi_login; then
        part_fail "login with a wrong CHAP secret succeeded"
        iscsi_logout
        return
    fi
    step "login with a wrong CHAP secret refused, as it should be"
    iscsi_set_chap "$CHAP_USER" "$CHAP_SECRET" || return
    iscsi_login || { part_fail "login failed (or no disk appeared)"; return; }
    dev=$DEV
    step "disk $dev, $(blockdev --getsize64 "$dev") bytes"
    run mkfs.xfs -q -f -K "$dev" || { part_fail "mkfs.xfs failed"; iscsi_logout; return; }
    run mount "$dev" "$mnt" || { part_fail "mount failed"; iscsi_logout; return; }
    run cp "$DATA" "$mnt/from-guest.bin" && sync ||
        { part_fail "write failed"; umount "$mnt"; iscsi_logout; return; }
    run umount "$mnt"
    iscsi_logout
    # A new session: the disk is a new device, read from the target.
    iscsi_login || { part_fail "second login failed"; return; }
    dev=$DEV
    run mount -o ro "$dev" "$mnt" || { part_fail "remount failed"; iscsi_logout; return; }
    sha=$(sha_of "$mnt/from-guest.bin")
    run umount "$mnt"
    iscsi_logout
    part_ok "$sha"
}

for CURRENT in "$@"; do
    PART_START=$(now)
    echo "=== $CURRENT"
    case $CURRENT in
        nfs3 | nfs41 | nfs3-restart | nbd | iscsi) "part_${CURRENT//-/_}" ;;
        *) part_fail "unknown part" ;;
    esac
done
exit "$failed"
