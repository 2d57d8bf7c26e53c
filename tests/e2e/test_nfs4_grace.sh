#!/usr/bin/env bash
# timeout: 300
# Issue 14: the daemon killed with -9 while the kernel's NFSv4.1 client holds a
# lock on an open file. The restarted daemon finds the client in its stable
# record (HOME/nfs4-clients) and starts in grace; the client reclaims its open and
# its lock (nfs.locks "reclaim"), writes on through the same file descriptor,
# unlocks, and the file holds exactly what it wrote. Guest side:
# tests/e2e/guest/nfs4_grace.sh. One guest boot.
source "$(dirname "${BASH_SOURCE[0]}")/guest_lib.sh"
guest_private_namespaces "$@"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
guest_lib_init

C=$CACHALOT
T=$(mktmp)
mkdir -p "$T/results"
chmod 777 "$T/results"
DATA=$T/data.bin
head -c $((4 << 20)) /dev/urandom >"$DATA"
SERVE_ARGS="--nfs 127.0.0.1:2049 --portmap off --nfs4-lease 20"
export SERVE_ARGS
start_daemon
D=$(mktmp)
assert_ok "$C" pool create -s 1G tank "$D/d0" >/dev/null
assert_ok "$C" create -o "sharenfs=rw=127.0.0.1,no_root_squash" tank/db

note "booting the guest"
guest_run --timeout 240 --share "$T/results" --env RESULTS="$T/results" \
    --env DATA="$DATA" --env NFS_EXPORT=/tank/db "$GUEST_LIB_DIR/guest/nfs4_grace.sh" &
guest_pid=$!
if wait_file "$T/results/held" 200 "$guest_pid"; then
    [[ -s $HOME_DIR/nfs4-clients ]] || fail "no stable record of the client"
    kill9_daemon
    sleep 2
    start_daemon
    touch "$T/results/restarted"
fi
guest_rc=0
wait "$guest_pid" || guest_rc=$?
verdict=$(cat "$T/results/verdict" 2>/dev/null || echo "FAIL no verdict (guest exit $guest_rc)")
[[ $verdict == ok ]] || fail "guest: $verdict"
assert_eq "$(cat "$T/results/sum")" "$(sha256sum "$DATA" | cut -d' ' -f1)" "the file holds what was written across the crash"
locks=$("$C" analytics show nfs.locks --by event -H 2>&1 || true)
echo "$locks"
assert_contains "$locks" "reclaim" "the client reclaimed its state in the grace period"
stop_daemon
assert_eq "$DAEMON_EXIT" 0 "clean exit"
echo "NFSv4.1: open and lock reclaimed after kill -9, writes went on"
