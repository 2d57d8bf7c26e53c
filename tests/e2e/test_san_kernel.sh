#!/usr/bin/env bash
# timeout: 300
# Issue 15's kernel initiators: in the QEMU guest (tests/guest/run-in-guest.sh),
# the Linux kernel's iSCSI initiator (open-iscsi: iscsid + iscsiadm, CHAP) and NBD
# client (nbd-client) against OUR daemon (`cachalot serve --iscsi --nbd`), each on
# its own sparse volume: SendTargets discovery, a wrong CHAP secret refused,
# mkfs.xfs, mount, checksummed files (tests/e2e/guest/san_kernel.sh). Then, while
# an O_DSYNC writer streams 16 MiB to the iSCSI file system, the host kills the
# daemon with SIGKILL, leaves it down 2 s and starts it again on the same ports:
# the kernel initiator recovers its session by itself and the writer finishes
# without an error. After a new login (iSCSI) and a reconnect (NBD, whose
# connection died with the daemon; xfs replays its log) every checksum equals
# what the host expects. lib.sh fails the test if the daemon panics or does not
# stop cleanly. One guest boot.
source "$(dirname "${BASH_SOURCE[0]}")/guest_lib.sh"
guest_private_namespaces "$@"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
guest_lib_init

C=$CACHALOT
NSMALL=${NSMALL:-200}
# A private network namespace: the standard ports are ours alone.
ISCSI_PORT=3260
NBD_PORT=10809
DAEMON_ISCSI=127.0.0.1:$ISCSI_PORT
SERVE_ARGS="--nfs off --nbd 127.0.0.1:$NBD_PORT"
export DAEMON_ISCSI SERVE_ARGS
IQN=iqn.2026-11.org.cachalot:tank.lun
CHAP_USER=guestuser
CHAP_SECRET=guest-secret-12 # open-iscsi wants 12 to 16 characters

T=$(mktmp)
mkdir -p "$T/results" "$T/expected"
chmod 777 "$T/results"
DATA=$T/data.bin
DATA2=$T/data2.bin
head -c $((4 << 20)) /dev/urandom >"$DATA"
head -c $((16 << 20)) /dev/urandom >"$DATA2"

# expected_sums PREFIX [crash]: the lines the guest writes for one disk (its
# mount point is /mnt/PREFIX), computed on a local copy.
expected_sums() {
    local d=$T/expected/$1 i
    mkdir -p "$d/small"
    cp "$DATA" "$d/data.bin"
    [[ -z ${2:-} ]] || cp "$DATA2" "$d/crash.bin"
    for ((i = 1; i <= NSMALL; i++)); do
        printf 'small file %d of %s\n' "$i" "/mnt/$1" >"$d/small/f$i"
    done
    echo "$1/data.bin $(sha256sum "$d/data.bin" | cut -d' ' -f1)"
    [[ -z ${2:-} ]] || echo "$1/crash.bin $(sha256sum "$d/crash.bin" | cut -d' ' -f1)"
    echo "$1/small $(cd "$d" && grep -r '' small | LC_ALL=C sort | sha256sum | cut -d' ' -f1)"
}

start_daemon
assert_contains "$(cat "$ARTIFACTS/daemon.log")" "iscsi listening on 127.0.0.1:$ISCSI_PORT"
D=$(mktmp)
assert_ok "$C" pool create -s 2G tank "$D/d0" >/dev/null
# mkfs.xfs wants at least 300 MiB.
assert_ok "$C" create -s -V 512M tank/lun >/dev/null
assert_ok "$C" create -s -V 512M tank/nbdvol >/dev/null
assert_ok "$C" set iscsi:chap_user="$CHAP_USER" tank/lun
assert_ok "$C" set iscsi:chap_secret="$CHAP_SECRET" tank/lun
assert_ok "$C" set shareiscsi=on tank/lun
assert_ok "$C" set sharenbd=on tank/nbdvol

note "booting the guest"
guest_start=$(date +%s)
guest_run --timeout 240 --share "$T/results" \
    --env RESULTS="$T/results" --env DATA="$DATA" --env DATA2="$DATA2" \
    --env ISCSI_PORT="$ISCSI_PORT" --env ISCSI_IQN="$IQN" \
    --env CHAP_USER="$CHAP_USER" --env CHAP_SECRET="$CHAP_SECRET" \
    --env NBD_PORT="$NBD_PORT" --env NBD_NAME=tank/nbdvol --env NSMALL="$NSMALL" \
    --env ISCSID_DEBUG="${ISCSID_DEBUG:-0}" \
    "$GUEST_LIB_DIR/guest/san_kernel.sh" &
guest_pid=$!
# The crash: when the guest's writer is half way, SIGKILL the daemon, leave it down
# 2 s (the initiator retries meanwhile), start it on the same ports and pool.
if wait_file "$T/results/kill-request" 200 "$guest_pid"; then
    kill9_daemon
    touch "$T/results/killed"
    sleep 2
    touch "$T/results/restarting"
    start_daemon
    note "daemon restarted $(($(date +%s) - guest_start)) s after the guest started"
fi
guest_rc=0
wait "$guest_pid" || guest_rc=$?
note "guest run: exit $guest_rc in $(($(date +%s) - guest_start)) s"
cp "$T/results/iscsid.log" "$ARTIFACTS/" 2>/dev/null || true

verdict=$(cat "$T/results/verdict" 2>/dev/null || echo "FAIL no verdict (guest exit $guest_rc)")
[[ $verdict == ok ]] || fail "guest: $verdict (guest output: $ARTIFACTS/guest-output.log)"
[[ $guest_rc -eq 0 ]] || fail "the guest script exited with $guest_rc"
cat "$T/results/facts"
facts=$(cat "$T/results/facts")
assert_contains "$facts" "iscsi-size $((512 << 20))" "iSCSI disk size"
assert_contains "$facts" "nbd-size $((512 << 20))" "NBD disk size"
assert_contains "$facts" "crash-size $((16 << 20))" "size of the file written across the crash"
grep -q 'CHAP failed' "$ARTIFACTS/daemon.log" || fail "the wrong CHAP secret was not logged as a CHAP failure"

expected=$(expected_sums iscsi crash && expected_sums nbd)
got=$(cat "$T/results/sums")
if [[ $got != "$expected" ]]; then
    diff <(echo "$expected") <(echo "$got") >&2 || true
    fail "the kernel initiators read back content that differs from what they wrote (diff: expected < > guest)"
fi
echo "guest read-back after the restart: all checksums equal ($(echo "$got" | wc -l) lines)"
stop_daemon
assert_eq "$DAEMON_EXIT" 0 "clean exit"
echo "kernel iSCSI initiator and NBD client against cachalot: xfs, kill -9 recovery ok"
