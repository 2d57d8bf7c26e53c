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
#
# Guests are cheap to start (about 8 s of boot under TCG, no KVM here) and
# independent: several may run at once. Built once by tests/guest/build-guest.sh.
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
while (($# > 0)); do
    case $1 in
        --mem) MEM=${2:?}; shift 2 ;;
        --smp) SMP=${2:?}; shift 2 ;;
        --timeout) TIMEOUT=${2:?}; shift 2 ;;
        --share) SHARES+=("$(realpath -e "${2:?}")"); shift 2 ;;
        --env)
            [[ ${2:-} == [A-Za-z_]*=* ]] || { say "--env wants NAME=VALUE"; exit 2; }
            ENVS+=("$2")
            shift 2
            ;;
        --console) CONSOLE_KEEP=${2:?}; shift 2 ;;
        -h | --help) usage ;;
        --) shift; break ;;
        -*) say "unknown option $1"; usage ;;
        *) break ;;
    esac
done
(($# >= 1)) || usage
SCRIPT=$(realpath -e "$1") || { say "no such script: $1"; exit 2; }
shift
[[ $MEM =~ ^[0-9]+$ && $SMP =~ ^[0-9]+$ && $TIMEOUT =~ ^[0-9]+$ ]] ||
    { say "--mem, --smp and --timeout take numbers"; exit 2; }

GUEST=$("$HERE/build-guest.sh") || { say "building the guest failed"; exit 125; }
QEMU_ROOT=$GUEST/qemu

# The job directory: on the host, seen by the guest through the host root share.
JOB=$(mktemp -d "${TMPDIR:-/tmp}/cachalot-guest.XXXXXX")
QEMU_PID=
cleanup() {
    local rc=$?
    if [[ -n $QEMU_PID ]] && kill -0 "$QEMU_PID" 2>/dev/null; then
        kill -KILL "$QEMU_PID" 2>/dev/null || true
        wait "$QEMU_PID" 2>/dev/null || true
    fi
    rm -rf "$JOB"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
chmod 755 "$JOB"
NONCE=$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')

{
    echo 'export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/run/cachalot-guest/bin'
    echo 'export HOME=/root LANG=C.UTF-8 GUEST_HOST=10.0.2.2 CACHALOT_GUEST=1'
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
QEMU_CMD=(
    "$QEMU_ROOT/usr/bin/qemu-system-x86_64"
    -L "$QEMU_ROOT/usr/share/qemu" -L "$QEMU_ROOT/usr/share/seabios"
    -L "$QEMU_ROOT/usr/lib/ipxe/qemu"
    -nodefaults -no-user-config -display none -monitor none -no-reboot
    -m "$MEM" -smp "$SMP"
    -kernel "$GUEST/vmlinuz" -initrd "$GUEST/initrd.gz"
    -append "console=ttyS0 panic=1 cachalot.job=$JOB cachalot.nonce=$NONCE"
    -chardev "file,id=console,path=$JOB/console.log"
    -serial chardev:console
    -chardev "file,id=out,path=$JOB/out"
    -serial chardev:out
    -netdev user,id=n0 -device virtio-net-pci,netdev=n0,romfile=
    "${VIRTFS[@]}"
)
mkfifo "$JOB/out"

# filter: print the job's lines, record its exit status (or the init's error), stop
# at the end marker. A marker may follow output that did not end with a newline.
filter() {
    local line prefix marker kind
    local exit_marker="@@CACHALOT-GUEST-EXIT-$NONCE " err_marker="@@CACHALOT-GUEST-ERROR-$NONCE "
    local end_marker="@@CACHALOT-GUEST-END-$NONCE"
    while IFS= read -r line || [[ -n $line ]]; do
        kind=
        for marker in "$exit_marker" "$err_marker" "$end_marker"; do
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
        case $kind in
            "$exit_marker") echo "${line#*"$kind"}" >"$JOB/rc" ;;
            "$err_marker") echo "${line#*"$kind"}" >"$JOB/error" ;;
            *) return 0 ;;
        esac
    done
}

start=$(date +%s.%N)
# We hold the FIFO open read-write, so neither side blocks on open and the
# filter gets no EOF: it stops at the end marker written after QEMU exits.
exec 3<>"$JOB/out"
filter <&3 &
FILTER_PID=$!
QEMU_MODULE_DIR=$QEMU_ROOT/usr/lib/x86_64-linux-gnu/qemu \
    timeout -k 5 "$TIMEOUT" "${QEMU_CMD[@]}" </dev/null >"$JOB/qemu.log" 2>&1 &
QEMU_PID=$!
qemu_rc=0
wait "$QEMU_PID" || qemu_rc=$?
QEMU_PID=
# Everything QEMU wrote is in the FIFO: mark its end, let the filter drain it.
printf '@@CACHALOT-GUEST-END-%s\n' "$NONCE" >&3
exec 3>&-
wait "$FILTER_PID" 2>/dev/null || true
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
