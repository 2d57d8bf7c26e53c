#!/usr/bin/env bash
# timeout: 120
# Issue 15: one volume through both block protocols, its snapshots over iSCSI, and
# how the target answers several connections and sessions. Real clients: libiscsi's
# iscsi-ls and iscsi-inq, QEMU's qemu-io (NBD and iSCSI block drivers) and the raw
# initiator tests/e2e/iscsi_probe.py.
#  1. SendTargets answers each initiator with the address it connected to: the
#     portal listens on 0.0.0.0, discovery through 127.0.0.1 and 127.0.0.2.
#  2. NBD and iSCSI serve the daemon's one handle per volume: a pattern written
#     through NBD reads back through iSCSI and the reverse; a destroyed volume
#     re-created under the same name reads as the new one through both.
#  3. A volume snapshot over iSCSI, read-only, as VOLUME-TARGET:SNAP: it reads the
#     snapshot's content (not later writes to the volume); WRITE and UNMAP get
#     DATA PROTECT, MODE SENSE shows WP; SendTargets=All does not list it; after
#     the snapshot is destroyed its target is gone.
#  4. MaxConnections=1: a second connection to a live session is refused with "too
#     many connections", one naming no session with "session does not exist"; two
#     sessions (two ISIDs) on one LUN read each other's writes.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

for tool in iscsi-ls iscsi-inq qemu-io python3; do
    command -v "$tool" >/dev/null || fail "$tool not installed (scripts/install-deps.sh test)"
done
C=$CACHALOT
HERE=$(dirname "${BASH_SOURCE[0]}")

# Every address of the host, so the same portal is reached as 127.0.0.1 and 127.0.0.2.
DAEMON_ISCSI=0.0.0.0:0
SERVE_ARGS="--nfs off --nbd 127.0.0.1:0"
export DAEMON_ISCSI SERVE_ARGS
start_daemon
PORT=$(sed 's/.*://' "$HOME_DIR/iscsi.addr")
ADDR=127.0.0.1:$PORT
NBD=$(cat "$HOME_DIR/nbd.addr")
D=$(mktmp)
assert_ok "$C" pool create -s 1G tank "$D/d0" >/dev/null
assert_ok "$C" create -s -V 64M tank/vol >/dev/null
assert_ok "$C" set shareiscsi=on tank/vol
assert_ok "$C" set sharenbd=on tank/vol
IQN=iqn.2026-11.org.cachalot:tank.vol

qio() { # URL COMMAND...: qemu-io on URL; fails the test on an error or a pattern mismatch
    local url=$1 out
    shift
    local args=()
    for c in "$@"; do args+=(-c "$c"); done
    out=$(qemu-io -f raw "${args[@]}" "$url" 2>&1) || fail "qemu-io $* on $url: $out"
    [[ $out != *"Pattern verification failed"* && $out != *"failed:"* ]] || fail "qemu-io $* on $url: $out"
}
iscsi_url() { echo "iscsi://$ADDR/$1/0"; }
nbd_url() { echo "nbd://$NBD/$1"; }

note "1. SendTargets: the address the initiator connected to"
for ip in 127.0.0.1 127.0.0.2; do
    out=$(assert_ok timeout 10 iscsi-ls "iscsi://$ip:$PORT")
    echo "$out"
    assert_contains "$out" "Target:$IQN Portal:$ip:$PORT,1" "SendTargets through $ip"
done

note "2. one handle per volume: NBD writes, iSCSI reads, and the reverse"
qio "$(nbd_url tank/vol)" 'write -P 0x11 0 1M' 'flush'
qio "$(iscsi_url "$IQN")" 'read -P 0x11 0 1M' 'write -P 0x22 2M 1M' 'flush'
qio "$(nbd_url tank/vol)" 'read -P 0x22 2M 1M' 'read -P 0x11 0 1M'

note "3. a snapshot over iSCSI, read-only"
assert_ok "$C" snapshot tank/vol@s1
SNAP_IQN=$IQN:s1
qio "$(nbd_url tank/vol)" 'write -P 0x33 0 1M' 'flush'
out=$(assert_ok python3 "$HERE/iscsi_probe.py" "$ADDR" "$SNAP_IQN" readonly)
echo "$out"
assert_contains "$out" "first-bytes 11111111" "the snapshot reads as it was when taken"
qemu-io -r -f raw -c 'read -P 0x11 0 1M' -c 'read -P 0x22 2M 1M' "$(iscsi_url "$SNAP_IQN")" >"$D/qio" 2>&1 ||
    fail "qemu-io read of the snapshot: $(cat "$D/qio")"
grep -q 'Pattern verification failed' "$D/qio" && fail "snapshot content: $(cat "$D/qio")"
qio "$(iscsi_url "$IQN")" 'read -P 0x33 0 1M'
out=$(assert_ok timeout 10 iscsi-ls "iscsi://$ADDR")
[[ $out != *":s1 "* ]] || fail "SendTargets=All lists the snapshot: $out"
assert_ok "$C" destroy tank/vol@s1
assert_fails timeout 10 iscsi-inq "$(iscsi_url "$SNAP_IQN")"

note "2b. a destroyed volume re-created under the same name: no stale handle"
assert_ok "$C" destroy tank/vol
assert_ok "$C" create -s -V 64M -o shareiscsi=on -o sharenbd=on tank/vol >/dev/null
qio "$(iscsi_url "$IQN")" 'read -P 0x00 0 4M'
qio "$(nbd_url tank/vol)" 'write -P 0x44 1M 1M' 'flush'
qio "$(iscsi_url "$IQN")" 'read -P 0x44 1M 1M' 'read -P 0x00 0 1M'

note "4. one connection per session; two sessions on one LUN"
out=$(assert_ok python3 "$HERE/iscsi_probe.py" "$ADDR" "$IQN" sessions)
echo "$out"
assert_contains "$(cat "$ARTIFACTS/daemon.log")" "only one connection per session"
stop_daemon
assert_eq "$DAEMON_EXIT" 0 "clean exit"
echo "SAN sharing: SendTargets address, one handle for NBD and iSCSI, snapshot LUN, sessions ok"
