#!/usr/bin/env bash
# Runs a script inside a QEMU guest that has the Linux kernel's NFS client, NBD client
# and iSCSI initiator, and returns its output and exit status.
#
#   tests/guest/run-in-guest.sh [OPTIONS] SCRIPT [ARGS...]
#
# SCRIPT is a path on the host. The guest sees the host's whole root file system
# (read-only 9p under a tmpfs overlay: it may write anywhere, writes stay in the
# guest), so SCRIPT, its ARGS and the host's binaries (mount.nfs, iscsiadm,
# nbd-client, mkfs.xfs, mariadb, fio...) are all there at their usual paths. SCRIPT
# runs as root in that chroot with bash (or directly if it is executable), in the
# caller's working directory, PATH=/usr/local/sbin:...:/bin, GUEST_HOST=10.0.2.2
# (the host: a server bound to 127.0.0.1 on the host is reached at 10.0.2.2) and
# CACHALOT_GUEST=1. The guest is 10.0.2.15 (QEMU user networking: the guest can
# connect to the host, not the reverse).
#
# SCRIPT's stdout and stderr arrive, merged and as they come, on this command's
# stdout; this command's own messages go to stderr. The exit status is SCRIPT's,
# or, when the guest did not report one:
#   124  the guest ran past --timeout (it is killed)
#   125  the guest failed before or after SCRIPT (boot, modules, 9p, QEMU itself)
# and the last lines of the guest's kernel console are printed to stderr.
#
# Options:
#   --mem MIB        guest memory (default 1024; the writable overlay is a tmpfs in it)
#   --smp N          guest CPUs (default 1; TCG, each is a host thread)
#   --timeout S      whole run, boot to power-off (default 300)
#   --share DIR      make host DIR writable in the guest, at the same path (repeatable):
#                    the way to return files to the host
#   --env NAME=VAL   export NAME in SCRIPT's environment (repeatable)
#   --console FILE   keep the guest's kernel console log in FILE
#   --name NAME      guest host name and NFSv4 client identity (nfs.nfs4_unique_id;
#                    default cachalot-guest): give each of two guests that run at
#                    once its own, or an NFSv4 server sees one client
#   --tap            a tap device instead of user networking (only inside a private
#                    network namespace, see tests/e2e/guest_lib.sh): the host side
#                    is 198.51.100.(4i+1)/30, the guest .(4i+2); GUEST_HOST is the
#                    host side, servers must listen on it (or 0.0.0.0), and they see
#                    the guest's own address (a real TCP peer, no NAT)
#
# A guest boots in 8-20 s under TCG (no KVM here; more when the host is busy); guests
# are independent: several may run at once. Built once by tests/guest/build-guest.sh.
# See docs/testing-guests.md.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

usage() {
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//' >&2
    exit 2
}
say() { echo "run-in-guest: $*" >&2; }

MEM=1024
SMP=1
TIMEOUT=300
SHARES=()
ENVS=()
CONSOLE_KEEP=
NAME=cachalot-guest
TAP=0
while (($# > 0)); do
    case $1 in
        --mem) MEM=${2:?}; shift 2 ;;
        --smp) SMP=${2:?}; shift 2 ;;
        --timeout) TIMEOUT=${2:?}; shift 2 ;;
        --share)
            dir=$(realpath -e "${2:?}" 2>/dev/null) && [[ -d $dir ]] || { say "--share: no such directory: $2"; exit 2; }
            SHARES+=("$dir")
            shift 2
            ;;
        --env)
            [[ ${2:-} =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || { say "--env wants NAME=VALUE"; exit 2; }
            ENVS+=("$2")
            shift 2
            ;;
        --console) CONSOLE_KEEP=${2:?}; shift 2 ;;
        --name) NAME=${2:?}; shift 2 ;;
        --tap) TAP=1; shift ;;
        -h | --help) usage ;;
        --) shift; break ;;
        -*) say "unknown option $1"; usage ;;
        *) break ;;
    esac
done
(($# >= 1)) || usage
SCRIPT=$(realpath -e "$1" 2>/dev/null) || { say "no such script: $1"; exit 2; }
shift
[[ $MEM =~ ^[0-9]+$ && $SMP =~ ^[0-9]+$ && $TIMEOUT =~ ^[0-9]+$ ]] ||
    { say "--mem, --smp and --timeout take numbers"; exit 2; }
[[ $NAME =~ ^[A-Za-z0-9][A-Za-z0-9.-]{0,62}$ ]] || { say "--name: letters, digits, dots and dashes"; exit 2; }

GUEST=$("$HERE/build-guest.sh") || { say "building the guest failed"; exit 125; }
QEMU_ROOT=$GUEST/qemu

# The job directory: on the host, seen by the guest through the host root share.
JOB=$(mktemp -d "${TMPDIR:-/tmp}/cachalot-guest.XXXXXX")
QEMU_PID=
FILTER_PID=
TAP_DEV=
# On any exit (also TERM/INT from a test's timeout): QEMU (by its pid file, as
# `timeout` would only pass TERM on), its timeout and the output filter all end.
cleanup() {
    local rc=$? qemu
    if [[ -n $QEMU_PID ]]; then
        qemu=$(cat "$JOB/qemu.pid" 2>/dev/null || true)
        [[ -z $qemu ]] || kill -KILL "$qemu" 2>/dev/null || true
        kill -KILL "$QEMU_PID" 2>/dev/null || true
        wait "$QEMU_PID" 2>/dev/null || true
    fi
    if [[ -n $FILTER_PID ]]; then
        kill -KILL "$FILTER_PID" 2>/dev/null || true
        wait "$FILTER_PID" 2>/dev/null || true
    fi
    [[ -z $TAP_DEV ]] || ip link del "$TAP_DEV" 2>/dev/null || true
    rm -rf "$JOB"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
chmod 755 "$JOB"

# Networking: QEMU's user networking, or a tap of our own in this (private) netns.
GUEST_HOST=10.0.2.2
NET_APPEND=
NETDEV=(-netdev "user,id=n0")
if ((TAP)); then
    [[ $(readlink /proc/self/ns/net) != "$(readlink /proc/1/ns/net)" ]] ||
        { say "--tap only inside a private network namespace (guest_private_namespaces)"; exit 2; }
    for ((i = 0; i < 64; i++)); do
        if ip tuntap add dev "cgtap$i" mode tap 2>/dev/null; then
            TAP_DEV=cgtap$i
            break
        fi
    done
    [[ -n $TAP_DEV ]] || { say "cannot create a tap device"; exit 125; }
    GUEST_HOST=198.51.100.$((4 * i + 1))
    ip addr add "$GUEST_HOST/30" dev "$TAP_DEV"
    ip link set "$TAP_DEV" up
    NET_APPEND=" cachalot.ip=198.51.100.$((4 * i + 2))/30 cachalot.gw=$GUEST_HOST"
    NETDEV=(-netdev "tap,id=n0,ifname=$TAP_DEV,script=no,downscript=no")
fi
NONCE=$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')

{
    echo 'export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/run/cachalot-guest/bin'
    echo "export HOME=/root LANG=C.UTF-8 GUEST_HOST=$GUEST_HOST CACHALOT_GUEST=1"
    for e in "${ENVS[@]}"; do
        printf 'export %s=%q\n' "${e%%=*}" "${e#*=}"
    done
    printf 'cd %q 2>/dev/null || cd /\n' "$PWD"
    if [[ -x $SCRIPT ]]; then
        printf 'exec %q' "$SCRIPT"
    else
        printf 'exec bash %q' "$SCRIPT"
    fi
    printf ' %q' "$@"
    echo
} >"$JOB/job.sh"

VIRTFS=(-virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap")
: >"$JOB/shares"
for i in "${!SHARES[@]}"; do
    VIRTFS+=(-virtfs "local,path=${SHARES[$i]},mount_tag=share$i,security_model=none,multidevs=remap")
    echo "share$i ${SHARES[$i]}" >>"$JOB/shares"
done

# ttyS0: the kernel console (to a file); ttyS1: the job's output (to our stdout,
# through the filter below, which strips the markers). ttyS1 is an output-only
# "file" chardev on a FIFO: a "pipe" chardev would also read the FIFO as the
# port's input and eat bytes of the output.
# shellcheck disable=SC2054 # the commas are inside QEMU's option values
QEMU_CMD=(
    "$QEMU_ROOT/usr/bin/qemu-system-x86_64"
    -L "$QEMU_ROOT/usr/share/qemu" -L "$QEMU_ROOT/usr/share/seabios"
    -L "$QEMU_ROOT/usr/lib/ipxe/qemu"
    -nodefaults -no-user-config -display none -monitor none -no-reboot
    -pidfile "$JOB/qemu.pid"
    -m "$MEM" -smp "$SMP"
    -kernel "$GUEST/vmlinuz" -initrd "$GUEST/initrd.gz"
    -append "console=ttyS0 panic=1 cachalot.job=$JOB cachalot.nonce=$NONCE cachalot.name=$NAME nfs.nfs4_unique_id=$NAME$NET_APPEND"
    -chardev "file,id=console,path=$JOB/console.log"
    -serial chardev:console
    -chardev "file,id=out,path=$JOB/out"
    -serial chardev:out
    "${NETDEV[@]}" -device virtio-net-pci,netdev=n0,romfile=
    "${VIRTFS[@]}"
)
mkfifo "$JOB/out"

# filter: print the job's lines and record its exit status (or the init's error)
# until the end of the stream. A marker may follow output without a newline.
filter() {
    local line prefix marker kind
    local exit_marker="@@CACHALOT-GUEST-EXIT-$NONCE " err_marker="@@CACHALOT-GUEST-ERROR-$NONCE "
    while IFS= read -r line || [[ -n $line ]]; do
        kind=
        for marker in "$exit_marker" "$err_marker"; do
            if [[ $line == *"$marker"* ]]; then
                kind=$marker
                break
            fi
        done
        if [[ -z $kind ]]; then
            printf '%s\n' "$line"
            continue
        fi
        prefix=${line%%"$kind"*}
        [[ -z $prefix ]] || printf '%s\n' "$prefix"
        if [[ $kind == "$exit_marker" ]]; then
            echo "${line#*"$kind"}" >"$JOB/rc"
        else
            echo "${line#*"$kind"}" >"$JOB/error"
        fi
    done
}

start=$(date +%s.%N)
# Only this script's fd 3 (read-write: the open does not block) and QEMU hold the
# FIFO open for writing, and fd 3 stays open until QEMU has ended: so neither open
# blocks, and the filter reads to the end of the stream and then sees EOF, also
# when this script is killed (its fd 3 closes, QEMU gets its parent-death signal).
exec 3<>"$JOB/out"
filter <"$JOB/out" 3>&- &
FILTER_PID=$!
# --foreground keeps QEMU in our process group, so a test runner that kills the
# group (scripts/run-tests.sh does) kills QEMU too; the parent-death signals end
# timeout and QEMU even if this script is killed with SIGKILL alone.
QEMU_MODULE_DIR=$QEMU_ROOT/usr/lib/x86_64-linux-gnu/qemu \
    setpriv --pdeathsig KILL -- timeout --foreground -k 5 "$TIMEOUT" \
    setpriv --pdeathsig KILL -- "${QEMU_CMD[@]}" </dev/null >"$JOB/qemu.log" 2>&1 3>&- &
QEMU_PID=$!
qemu_rc=0
wait "$QEMU_PID" || qemu_rc=$?
QEMU_PID=
exec 3>&-
wait "$FILTER_PID" 2>/dev/null || true
FILTER_PID=
secs=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
[[ -z $CONSOLE_KEEP ]] || cp "$JOB/console.log" "$CONSOLE_KEEP" 2>/dev/null || true

show_console() {
    say "---- last 25 lines of the guest console ----"
    tail -n 25 "$JOB/console.log" >&2 2>/dev/null || true
    if [[ -s $JOB/qemu.log ]]; then
        say "---- qemu ----"
        tail -n 10 "$JOB/qemu.log" >&2
    fi
}

if [[ -f $JOB/rc ]]; then
    rc=$(<"$JOB/rc")
    say "guest finished in ${secs} s: $(basename "$SCRIPT") exited with $rc"
    exit "$rc"
fi
if [[ $qemu_rc -eq 124 || $qemu_rc -eq 137 ]]; then
    say "guest timed out after ${TIMEOUT} s (killed)"
    show_console
    exit 124
fi
if [[ -f $JOB/error ]]; then
    say "guest failed: $(<"$JOB/error")"
else
    say "guest ended without reporting a status (qemu exit $qemu_rc, ${secs} s)"
fi
show_console
exit 125
