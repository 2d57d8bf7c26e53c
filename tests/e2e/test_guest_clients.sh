#!/usr/bin/env bash
# timeout: 420
# The Linux kernel's own clients, in the QEMU guest (tests/guest/run-in-guest.sh),
# against well-known servers on the host; one guest boot runs all four parts:
#   nfs3   mount.nfs vers=3,proto=tcp,hard (ports from rpcbind) -> NFS-Ganesha 4.3
#   nfs41  mount -t nfs4 vers=4.1 -> NFS-Ganesha 4.3
#   nfs3-restart  Ganesha killed with SIGKILL while a write waits on the hard v3
#          mount, restarted 2 s later: fsync returns after the restart, data intact
#   nbd    nbd-client -> qemu-nbd serving a raw file; mkfs.ext4, mount, write
#   iscsi  iscsid + iscsiadm (SendTargets discovery, CHAP) -> tgt, file LUN; mkfs.xfs
# Each part writes a file of random bytes, drops the client's cache (unmount,
# disconnect or logout, then connect again) and reads it back; the host compares the
# checksums with its own, and also checks what the server stored: the file in
# Ganesha's export directory, the file inside the NBD image (debugfs). This is the
# template for the protocol tests of our own servers: swap the peer for `cachalot
# serve` (and kill9_peer for kill9_daemon) and keep the guest side
# (tests/e2e/guest/clients.sh).
source "$(dirname "${BASH_SOURCE[0]}")/guest_lib.sh"
guest_private_namespaces "$@"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
guest_lib_init

PARTS=${GUEST_PARTS:-nfs3 nfs41 nfs3-restart nbd iscsi}
IQN=iqn.2026-11.org.cachalot:peer-tgt
CHAP_USER=guestuser
CHAP_SECRET=guest-secret-12 # tgt/open-iscsi want 12 to 16 characters

T=$(mktmp)
mkdir -p "$T/export" "$T/results"
chmod 777 "$T/results"
DATA=$T/data.bin
head -c $((8 << 20)) /dev/urandom >"$DATA"
DATA_SHA=$(sha256sum "$DATA" | cut -d' ' -f1)
head -c $((1 << 20)) /dev/urandom >"$T/export/from-host.bin"
HOST_FILE_SHA=$(sha256sum "$T/export/from-host.bin" | cut -d' ' -f1)
truncate -s 128M "$T/nbd.img"
truncate -s 320M "$T/iscsi.img" # mkfs.xfs wants at least 300 MiB

note "starting the peers"
start_rpcbind
start_ganesha "$T/export"
start_qemu_nbd "$T/nbd.img" peer
start_tgtd
tgt_add_file_lun 1 "$IQN" "$T/iscsi.img" "$CHAP_USER" "$CHAP_SECRET"

note "booting the guest for: $PARTS"
guest_start=$(date +%s)
# shellcheck disable=SC2086 # PARTS is a list of words
guest_run --timeout 300 --share "$T/results" \
    --env RESULTS="$T/results" --env DATA="$DATA" --env NFS_EXPORT=/export \
    --env NBD_PORT=10809 --env NBD_NAME=peer --env ISCSI_PORT=3260 \
    --env ISCSI_IQN="$IQN" --env CHAP_USER="$CHAP_USER" --env CHAP_SECRET="$CHAP_SECRET" \
    "$GUEST_LIB_DIR/guest/clients.sh" $PARTS &
guest_pid=$!
if [[ " $PARTS " == *" nfs3-restart "* ]]; then
    # The crash: when the guest asks, SIGKILL Ganesha, leave it down 2 s (the guest
    # writes meanwhile), start it again on the same ports and export.
    if wait_file "$T/results/kill-nfs-server" 240 "$guest_pid"; then
        kill9_peer ganesha
        touch "$T/results/nfs-server-killed"
        sleep 2
        touch "$T/results/nfs-server-restarting"
        start_ganesha "$T/export"
    fi
fi
guest_rc=0
wait "$guest_pid" || guest_rc=$?
note "guest run: exit $guest_rc in $(($(date +%s) - guest_start)) s"
stop_peers # flushes qemu-nbd and tgtd before the host reads their files

# Each part: the guest's verdict and read-back checksum, then the server's copy.
bad=()
for part in $PARTS; do
    result=$(cat "$T/results/$part" 2>/dev/null || echo "$part FAIL no result (guest exit $guest_rc)")
    read -r _ verdict sha <<<"$result"
    if [[ $verdict != ok ]]; then
        echo "PART $part: $result"
        bad+=("$part")
        continue
    fi
    if [[ $sha != "$DATA_SHA" ]]; then
        echo "PART $part: FAIL: read back $sha, wrote $DATA_SHA"
        bad+=("$part")
        continue
    fi
    server=
    case $part in
        nfs3-restart)
            server=$(sha256sum "$T/export/restart.bin" 2>/dev/null | cut -d' ' -f1)
            ;;
        nfs3 | nfs41)
            server=$(sha256sum "$T/export/from-guest-$part.bin" 2>/dev/null | cut -d' ' -f1)
            seen=$(cat "$T/results/$part.host-file" 2>/dev/null)
            if [[ $seen != "$HOST_FILE_SHA" ]]; then
                echo "PART $part: FAIL: the guest read the host's file as $seen, not $HOST_FILE_SHA"
                bad+=("$part")
                continue
            fi
            ;;
        nbd)
            debugfs -R "dump /from-guest.bin $T/nbd-dump.bin" "$T/nbd.img" >/dev/null 2>&1
            server=$(sha256sum "$T/nbd-dump.bin" 2>/dev/null | cut -d' ' -f1)
            ;;
        iscsi) server=$DATA_SHA ;; # xfs: the host has no reader; the guest re-read after a new login
    esac
    if [[ $server != "$DATA_SHA" ]]; then
        echo "PART $part: FAIL: the server's copy has checksum ${server:-none}, wrote $DATA_SHA"
        bad+=("$part")
        continue
    fi
    echo "PART $part: ok (8 MiB written, read back after reconnect, checksums equal)"
done

((${#bad[@]} == 0)) || fail "kernel client parts failed: ${bad[*]} (guest output: $ARTIFACTS/guest-output.log)"
[[ $guest_rc -eq 0 ]] || fail "guest script exited with $guest_rc although every part passed"
echo "all kernel client parts passed: $PARTS"
