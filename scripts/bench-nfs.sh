#!/usr/bin/env bash
# NFSv3 benchmark: `cachalot bench nfs` (our user-space load generator: several
# connections, one request each in flight) against NFS-Ganesha 4.3 (FSAL_VFS on
# ext4 on a loop file) and against our daemon (a file pool), both files on the
# same disk, in the same run, Ganesha first (the baseline of the ratios).
# The streaming read from disk runs after `sync; echo 3 >/proc/sys/vm/drop_caches`
# (the host page cache: Ganesha's ext4 and our pool file) and, for cachalot, an
# export and import of the pool (a fresh ARC; file handles survive it).
#
#   scripts/bench-nfs.sh [OUT_DIR]   (needs target/ci/cachalot, ganesha.nfsd, rpcbind; root)
#
# Environment: TIME (s per timed row, 5), STREAM (bytes per connection, 128M),
# FILE (random rows' span, 64M), THREADS (4), DROP (0: skip the row from disk),
# CACHALOT_BASE (an older cachalot binary to measure in the same run; BASE_FIRST=1 runs
# it before the newer one), VERS (3; 4.1:
# Ganesha and cachalot over NFSv4.1, Ganesha first, then cachalot over v3 as well: the
# cost of a SEQUENCE per COMPOUND against v3 on the same rows). Runs in private network and
# mount namespaces (its own ports 111 and 2049, its own /run).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
C=${CACHALOT:-$REPO/target/ci/cachalot}
if [[ ${BENCH_NFS_NS:-} != 1 ]]; then
    exec env BENCH_NFS_NS=1 unshare --net --mount --propagation private bash "$0" "$@"
fi
ip link set lo up
ip link add bv0 type veth peer name bv1
ip addr add 192.0.2.1/24 dev bv0 # Ganesha wants a non-loopback address to exist
ip link set bv0 up
ip link set bv1 up
mount -t tmpfs -o mode=755 tmpfs /run
mkdir -p /run/lock /var/lib/nfs/ganesha
mount -t tmpfs -o mode=755 tmpfs /var/lib/nfs/ganesha

OUT=${1:-$(mktemp -d /tmp/bench-nfs.XXXXXX)}
mkdir -p "$OUT"
WORK=$(mktemp -d /var/tmp/bench-nfs.XXXXXX)
pids=()
cleanup() {
    set +e
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    wait 2>/dev/null
    umount "$WORK/ext4" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT
wait_port() { for _ in $(seq 300); do (echo >"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }

# Ganesha on ext4 on a loop file.
truncate -s 2G "$WORK/ext4.img"
mkfs.ext4 -q -F "$WORK/ext4.img"
mkdir -p "$WORK/ext4"
mount -o loop "$WORK/ext4.img" "$WORK/ext4"
rpcbind -f -w &
pids+=($!)
wait_port 111
VERS=${VERS:-3}
case $VERS in
3) protos=3 ;;
4.1) protos="3, 4" ;;
*) echo "VERS must be 3 or 4.1" >&2; exit 2 ;;
esac
# Graceless: Ganesha would otherwise refuse new v4 opens for its first grace period.
cat >"$WORK/ganesha.conf" <<EOF
NFS_CORE_PARAM { Bind_addr = 127.0.0.1; NFS_Port = 2049; MNT_Port = 20048;
    Enable_NLM = false; Enable_RQUOTA = false; Enable_UDP = false; Protocols = $protos;
    Mount_Path_Pseudo = true; }
NFSV4 { Graceless = true; Minor_Versions = 1; }
NFS_KRB5 { Active_krb5 = false; }
EXPORT { Export_Id = 1; Path = $WORK/ext4; Pseudo = /export; Access_Type = RW;
    Squash = No_Root_Squash; SecType = sys; Protocols = $protos; Transports = TCP; FSAL { Name = VFS; } }
LOG { Default_Log_Level = EVENT; }
EOF
ganesha.nfsd -F -f "$WORK/ganesha.conf" -L "$OUT/ganesha.log" -p /run/ganesha.pid &
pids+=($!)
GPID=$!
wait_port 2049 && wait_port 20048

# Ours.
export CACHALOT_SOCKET=$WORK/home/cachalot.sock
mkdir -p "$WORK/home" "$WORK/pool"
"$C" serve --home "$WORK/home" --http none --nfs 127.0.0.1:12049 --portmap off >"$OUT/daemon.log" 2>&1 &
pids+=($!)
CPID=$!
wait_port 12049
"$C" pool create -s 3G tank "$WORK/pool/d0" >/dev/null
"$C" create -o "sharenfs=rw=127.0.0.1,no_root_squash" tank/fs

# CACHALOT_BASE=BINARY: also an older daemon, as target cachalot-base (an A/B
# of two builds of the server in the same run; the load generator is $C).
base=()
if [[ -n ${CACHALOT_BASE:-} ]]; then
    mkdir -p "$WORK/home-base" "$WORK/pool-base"
    CACHALOT_SOCKET=$WORK/home-base/cachalot.sock "$CACHALOT_BASE" serve --home "$WORK/home-base" \
        --http none --nfs 127.0.0.1:12050 --portmap off >"$OUT/daemon-base.log" 2>&1 &
    pids+=($!)
    base=(--target "cachalot-base=127.0.0.1:12050/tank/fs@$!?version=$VERS")
    wait_port 12050
    CACHALOT_SOCKET=$WORK/home-base/cachalot.sock "$C" pool create -s 3G tank "$WORK/pool-base/d0" >/dev/null
    CACHALOT_SOCKET=$WORK/home-base/cachalot.sock "$C" create -o "sharenfs=rw=127.0.0.1,no_root_squash" tank/fs
fi

cat >"$WORK/drop.sh" <<EOF
set -e
case "\$BENCH_TARGET" in
cachalot | cachalot-v3) export CACHALOT_SOCKET=$WORK/home/cachalot.sock; dir=$WORK/pool ;;
cachalot-base) export CACHALOT_SOCKET=$WORK/home-base/cachalot.sock; dir=$WORK/pool-base ;;
*) dir= ;;
esac
if [ -n "\$dir" ]; then
    "$C" pool export tank
    "$C" pool import -d "\$dir" tank >/dev/null
fi
sync
echo 3 >/proc/sys/vm/drop_caches
EOF
drop=(--drop-caches "sh $WORK/drop.sh")
[[ ${DROP:-1} == 1 ]] || drop=() # DROP=0: no row from disk (older binaries)
cmd=("$C" bench nfs --time "${TIME:-5}" --stream "${STREAM:-128M}" --file "${FILE:-64M}"
    --threads "${THREADS:-4}" "${drop[@]}"
    --target "ganesha=127.0.0.1:2049:20048/export@$GPID?version=$VERS")
ours=(--target "cachalot=127.0.0.1:12049/tank/fs@$CPID?version=$VERS")
# BASE_FIRST=1: the older build runs before the newer one (swap the order once
# to see whether a row favours whichever server runs later).
if [[ ${BASE_FIRST:-0} == 1 ]]; then cmd+=("${base[@]}" "${ours[@]}"); else cmd+=("${ours[@]}" "${base[@]}"); fi
[[ $VERS == 3 ]] || cmd+=(--target "cachalot-v3=127.0.0.1:12049/tank/fs@$CPID")
echo "${cmd[*]}" >"$OUT/command"
"${cmd[@]}" | tee "$OUT/report.md"
