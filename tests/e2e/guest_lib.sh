# shellcheck shell=bash
# Helpers for e2e tests that use the QEMU guest (tests/guest/run-in-guest.sh) and
# well-known peer servers (NFS-Ganesha + rpcbind, tgt, qemu-nbd). Use it like this:
#
#   source "$(dirname "${BASH_SOURCE[0]}")/guest_lib.sh"
#   guest_private_namespaces "$@"    # re-runs this script in its own net+mount ns
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
#   guest_lib_init                   # cleanup of the servers started below
#
# Private namespaces: the script runs in a new network namespace (its own loopback,
# so the standard ports 111, 2049, 3260, 10809 are free and nothing collides with
# other tests or helpers running at the same time) and a new mount namespace with
# its own tmpfs on /run and /var/lib/nfs/ganesha (pid files, rpcbind's and tgtd's
# sockets, Ganesha's recovery state). The QEMU guest started from inside reaches
# this namespace's 127.0.0.1 as 10.0.2.2. Everything ends with the script.
#
# Helpers: guest_run, start_peer, stop_peers, kill9_peer, wait_port, wait_file,
# start_rpcbind, start_ganesha, start_tgtd, tgt_add_file_lun, start_qemu_nbd.

GUEST_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
GUEST_RUNNER=$GUEST_LIB_DIR/../guest/run-in-guest.sh

# guest_private_namespaces "$@": unless already inside, re-exec the calling script
# under `unshare --net --mount`; inside, set up loopback, a veth pair (Ganesha
# resolves its Bind_addr with AI_ADDRCONFIG, which wants a non-loopback address)
# and the private tmpfs mounts.
guest_private_namespaces() {
    if [[ ${CACHALOT_GUEST_NS:-} != 1 ]]; then
        # Build (or find) the guest first: the new namespace has no network for apt.
        "$GUEST_LIB_DIR/../guest/build-guest.sh" >/dev/null ||
            { echo "FAIL: cannot build the QEMU guest" >&2; exit 1; }
        exec env CACHALOT_GUEST_NS=1 unshare --net --mount --propagation private \
            bash "${BASH_SOURCE[1]}" "$@"
    fi
    ip link set lo up
    ip link add gv0 type veth peer name gv1
    ip addr add 192.0.2.1/24 dev gv0
    ip link set gv0 up
    ip link set gv1 up
    mount -t tmpfs -o mode=755 tmpfs /run
    mkdir -p /run/lock /var/lib/nfs/ganesha
    mount -t tmpfs -o mode=755 tmpfs /var/lib/nfs/ganesha
}

PEER_PIDS=()
PEER_NAMES=()
PEER_SIGNALS=()

# guest_lib_init: after lib.sh; stops the peers on exit, then lib.sh's cleanup.
guest_lib_init() {
    trap _guest_lib_cleanup EXIT
}
_guest_lib_cleanup() {
    local rc=$?
    set +e
    stop_peers
    (exit "$rc")
    _e2e_cleanup
}

# start_peer [--signal SIG] NAME CMD...: start a server in the background, output to
# $ARTIFACTS/NAME.log; stopped by stop_peers or at exit with SIG (default TERM;
# KILL after 5 s). CMD must stay in the foreground (no daemonizing).
start_peer() {
    local sig=TERM
    if [[ $1 == --signal ]]; then
        sig=$2
        shift 2
    fi
    local name=$1
    shift
    # The parent-death signal ends the peer even if this script dies by SIGKILL.
    setpriv --pdeathsig KILL -- "$@" >>"$ARTIFACTS/$name.log" 2>&1 &
    PEER_PIDS+=($!)
    PEER_NAMES+=("$name")
    PEER_SIGNALS+=("$sig")
    note "started $name (pid $!): $*"
}

# kill9_peer NAME: SIGKILL the running peer NAME (a crash) and reap it; start it
# again with its start_ function.
kill9_peer() {
    local i pid
    for ((i = ${#PEER_PIDS[@]} - 1; i >= 0; i--)); do
        pid=${PEER_PIDS[$i]}
        [[ ${PEER_NAMES[$i]} == "$1" && -n $pid ]] && _alive "$pid" || continue
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        PEER_PIDS[i]=
        note "killed $1 (pid $pid) with SIGKILL"
        return 0
    done
    fail "kill9_peer: no running peer named $1"
}

# stop_peers: stop every peer, last started first; say which had died by themselves.
stop_peers() {
    local i pid k rc
    for ((i = ${#PEER_PIDS[@]} - 1; i >= 0; i--)); do
        pid=${PEER_PIDS[$i]}
        [[ -n $pid ]] || continue # killed by kill9_peer
        if ! _alive "$pid"; then
            rc=0
            wait "$pid" 2>/dev/null || rc=$?
            note "${PEER_NAMES[$i]} (pid $pid) had already exited (status $rc)"
            continue
        fi
        kill "-${PEER_SIGNALS[$i]}" "$pid" 2>/dev/null || true
        for ((k = 0; k < 50; k++)); do
            _alive "$pid" || break
            sleep 0.1
        done
        if _alive "$pid"; then
            kill -KILL "$pid" 2>/dev/null || true
        fi
        wait "$pid" 2>/dev/null || true
        note "stopped ${PEER_NAMES[$i]}"
    done
    PEER_PIDS=()
    PEER_NAMES=()
    PEER_SIGNALS=()
}

# wait_port PORT [SECONDS]: until something accepts TCP connections on 127.0.0.1:PORT.
wait_port() {
    local port=$1 limit=${2:-20} i
    for ((i = 0; i < limit * 10; i++)); do
        (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
        sleep 0.1
    done
    fail "nothing listens on 127.0.0.1:$port after ${limit} s"
}

# wait_file FILE SECONDS [PID]: until FILE exists (the guest's signal through a
# --share directory); false after SECONDS or as soon as PID (the guest run) ends.
wait_file() {
    local file=$1 limit=$2 pid=${3:-} i
    for ((i = 0; i < limit * 10; i++)); do
        [[ -e $file ]] && return 0
        [[ -z $pid ]] || _alive "$pid" || return 1
        sleep 0.1
    done
    return 1
}

# guest_run [run-in-guest options] SCRIPT [ARGS]: run SCRIPT in a fresh guest; its
# output goes to stdout and $ARTIFACTS/guest-output.log, the guest's kernel log to
# $ARTIFACTS/guest-console.log. Returns SCRIPT's exit status (124: timeout, 125:
# the guest itself failed).
guest_run() {
    local rc=0
    "$GUEST_RUNNER" --console "$ARTIFACTS/guest-console.log" "$@" 2>&1 |
        tee -a "$ARTIFACTS/guest-output.log" || rc=$?
    return "$rc"
}

# guest_role ROLE NAME SCRIPT [runner options...]: one of several guests run at once,
# each its own NFS client (--name NAME), running `SCRIPT ROLE`; its console goes to
# ARTIFACTS/console-ROLE.log and its output to ARTIFACTS/output-ROLE.log. Run it in
# the background (`guest_role ... &`): it execs the runner, so $! is the runner
# itself, and killing it kills that guest's QEMU.
guest_role() {
    local role=$1 name=$2 script=$3
    shift 3
    exec "$GUEST_RUNNER" --name "$name" "$@" --console "$ARTIFACTS/console-$role.log" \
        "$script" "$role" >"$ARTIFACTS/output-$role.log" 2>&1
}

# start_rpcbind: the portmapper on port 111 (NFS-Ganesha registers with it; stock
# mount.nfs asks it for the NFS and MOUNT ports).
start_rpcbind() {
    start_peer rpcbind rpcbind -f -w
    wait_port 111
}

# start_ganesha DIR [NFS_PORT] [MNT_PORT] [BIND]: NFS-Ganesha 4.3 (FSAL_VFS) exporting
# DIR as /export (v3 path and v4 pseudo path), NFSv3 + NFSv4.1, TCP, no root squash,
# no NLM (clients mount v3 with nolock), on BIND (default 127.0.0.1; 0.0.0.0 for
# guests with --tap). Needs start_rpcbind first.
start_ganesha() {
    local dir=$1 nfs_port=${2:-2049} mnt_port=${3:-20048} bind=${4:-127.0.0.1} conf
    conf=$(mktmp)/ganesha.conf
    cat >"$conf" <<EOF
NFS_CORE_PARAM {
    Bind_addr = $bind;
    NFS_Port = $nfs_port;
    MNT_Port = $mnt_port;
    Enable_NLM = false;
    Enable_RQUOTA = false;
    Enable_UDP = false;
    Protocols = 3, 4;
    Mount_Path_Pseudo = true; # NFSv3 mounts /export too, as v4 does
}
NFSV4 { Grace_Period = 5; Lease_Lifetime = 10; Minor_Versions = 1, 2; }
NFS_KRB5 { Active_krb5 = false; }
EXPORT {
    Export_Id = 1;
    Path = $dir;
    Pseudo = /export;
    Access_Type = RW;
    Squash = No_Root_Squash;
    SecType = sys;
    Protocols = 3, 4;
    Transports = TCP;
    FSAL { Name = VFS; }
}
LOG { Default_Log_Level = EVENT; }
EOF
    start_peer ganesha ganesha.nfsd -F -f "$conf" -L "$ARTIFACTS/ganesha.log" \
        -p /run/ganesha.pid
    wait_port "$nfs_port"
    wait_port "$mnt_port"
}

# start_tgtd [PORT] [BIND]: Debian's tgt iSCSI target on BIND:PORT (default
# 127.0.0.1:3260; 0.0.0.0 for guests with --tap).
start_tgtd() {
    local port=${1:-3260} bind=${2:-127.0.0.1} i
    # tgtd ignores SIGTERM; its file LUN is written with pwrite, so KILL loses nothing.
    start_peer --signal KILL tgtd tgtd -f --iscsi "portal=$bind:$port"
    wait_port "$port"
    for ((i = 0; i < 50; i++)); do
        tgtadm --lld iscsi --mode target --op show >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    fail "tgtadm cannot reach tgtd"
}

# tgt_add_file_lun TID IQN FILE [CHAP_USER CHAP_SECRET]: target TID named IQN with
# FILE as LUN 1, open to every initiator, with one-way CHAP if a user is given.
tgt_add_file_lun() {
    local tid=$1 iqn=$2 file=$3 user=${4:-} secret=${5:-}
    assert_ok tgtadm --lld iscsi --mode target --op new --tid "$tid" -T "$iqn"
    assert_ok tgtadm --lld iscsi --mode logicalunit --op new --tid "$tid" --lun 1 -b "$file"
    assert_ok tgtadm --lld iscsi --mode target --op bind --tid "$tid" -I ALL
    if [[ -n $user ]]; then
        assert_ok tgtadm --lld iscsi --mode account --op new --user "$user" --password "$secret"
        assert_ok tgtadm --lld iscsi --mode account --op bind --tid "$tid" --user "$user"
    fi
}

# start_qemu_nbd FILE NAME [PORT] [BIND]: qemu-nbd serving raw FILE as export NAME on
# BIND:PORT (default 127.0.0.1:10809), persistent (several connections in turn).
start_qemu_nbd() {
    local file=$1 name=$2 port=${3:-10809} bind=${4:-127.0.0.1}
    start_peer qemu-nbd qemu-nbd -f raw -x "$name" -b "$bind" -p "$port" -t "$file"
    wait_port "$port"
}
