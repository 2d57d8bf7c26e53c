#!/bin/sh
# /init of the Cachalot test guest (busybox sh; built into the initramfs by
# tests/guest/build-guest.sh, booted by tests/guest/run-in-guest.sh).
#
# Contract with the runner (keep both sides in step):
# - kernel command line: cachalot.job=DIR (a directory on the host, seen through the
#   9p share "hostroot"), cachalot.nonce=N (random, per run), cachalot.name=
#   (the host name), and with a tap cachalot.ip=ADDR/LEN and cachalot.gw=ADDR;
# - DIR/job.sh is run with bash, chrooted into the host's root (9p, read-only)
#   under a tmpfs overlay, so the guest sees every host file and may write anywhere
#   (writes stay in guest memory); DIR/shares lists "TAG PATH" lines, 9p shares
#   mounted read-write at PATH; the initramfs's busybox is at
#   /run/cachalot-guest/bin and its modules at /lib/modules/KVER;
# - the job's stdout and stderr go to the second serial port (ttyS1), followed by
#   the line "@@CACHALOT-GUEST-EXIT-N RC"; a failure of this init itself is the
#   line "@@CACHALOT-GUEST-ERROR-N MESSAGE". The kernel's console is ttyS0.
# - the guest always ends with `poweroff -f` (if /init died, panic=1 and QEMU's
#   -no-reboot end it too).
export PATH=/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev

KVER=$(cat /etc/guest-kernel)
JOB=
NONCE=none
NAME=cachalot-guest
for word in $(cat /proc/cmdline); do
    case $word in
        cachalot.job=*) JOB=${word#cachalot.job=} ;;
        cachalot.nonce=*) NONCE=${word#cachalot.nonce=} ;;
        cachalot.name=*) NAME=${word#cachalot.name=} ;;
        cachalot.ip=*) GUEST_IP=${word#cachalot.ip=} ;;
        cachalot.gw=*) GUEST_GW=${word#cachalot.gw=} ;;
    esac
done
OUT=/dev/ttyS1
stty -F $OUT raw -echo 2>/dev/null

log() { echo "guest-init: $*" >/dev/console; }
since_boot() { cut -d' ' -f1 /proc/uptime; }
power_off() {
    sync
    poweroff -f
    sleep 10
}
error() {
    log "ERROR: $*"
    echo "@@CACHALOT-GUEST-ERROR-$NONCE $*" >$OUT
    power_off
}

[ -n "$JOB" ] || error "no cachalot.job= on the kernel command line"
log "init started at $(since_boot) s"

for m in $(cat /etc/guest-modules); do
    modprobe "$m" || error "modprobe $m failed"
done
log "modules loaded at $(since_boot) s"

# QEMU user networking: the guest is 10.0.2.15, the host (gateway) 10.0.2.2; with
# a tap (run-in-guest.sh --tap) the runner chose both addresses.
ip link set lo up
ip link set eth0 up || error "no eth0 (virtio_net)"
ip addr add "${GUEST_IP:-10.0.2.15/24}" dev eth0 || error "cannot set address ${GUEST_IP:-}"
ip route add default via "${GUEST_GW:-10.0.2.2}"
hostname "$NAME"

P9="trans=virtio,version=9p2000.L,msize=262144"
mount -t 9p -o "$P9,ro" hostroot /host || error "cannot mount the host root over 9p"
mount -t tmpfs -o mode=755 tmpfs /rw
mkdir -p /rw/upper /rw/work
R=/newroot
mount -t overlay -o lowerdir=/host,upperdir=/rw/upper,workdir=/rw/work overlay $R ||
    error "cannot mount the overlay of the host root"
mount -t proc proc $R/proc
mount -t sysfs sysfs $R/sys
mount -t devtmpfs devtmpfs $R/dev
mkdir -p $R/dev/pts $R/dev/shm
mount -t devpts devpts $R/dev/pts
mount -t tmpfs tmpfs $R/dev/shm
mount -t tmpfs -o mode=755 tmpfs $R/run # not the host's pid files and sockets
mkdir -p $R/run/lock
mkdir -p "$R/lib/modules/$KVER" $R/run/cachalot-guest/bin
mount -o bind "/lib/modules/$KVER" "$R/lib/modules/$KVER"
# busybox (modprobe, lsmod, ...) for what the host lacks, last on the job's PATH.
mount -o bind /bin $R/run/cachalot-guest/bin
[ -f "$R$JOB/job.sh" ] || error "job script $JOB/job.sh not visible in the guest"
if [ -f "$R$JOB/shares" ]; then
    while read -r tag path; do
        [ -n "$tag" ] || continue
        mkdir -p "$R$path"
        mount -t 9p -o "$P9" "$tag" "$R$path" || error "cannot mount share $tag at $path"
    done <"$R$JOB/shares"
fi
log "root ready at $(since_boot) s; running $JOB/job.sh"

env -i TERM=dumb chroot $R /bin/bash "$JOB/job.sh" >$OUT 2>&1 </dev/null
rc=$?
log "job exited with $rc at $(since_boot) s"
echo "@@CACHALOT-GUEST-EXIT-$NONCE $rc" >$OUT
power_off
