#!/usr/bin/env bash
# Builds (once, cached) what tests/guest/run-in-guest.sh boots: Debian's own kernel,
# an initramfs with busybox, the guest /init (tests/guest/init.sh) and the kernel
# modules of the NFS, NBD and iSCSI clients with their dependency closure, and a
# QEMU (qemu-system-x86_64) unpacked from Debian's package.
#
#   tests/guest/build-guest.sh        # prints the cache directory it built or found
#
# The cache directory is $CACHALOT_GUEST_CACHE (default /var/cache/cachalot-guest,
# shared by every worktree on the machine), one subdirectory per kernel version and
# hash of this script and init.sh, so editing either rebuilds. Builds are serialised
# with flock and published by an atomic rename: concurrent callers never see half a
# build. A build takes about a minute (70 MB download, unpack, depmod, cpio).
#
# Why QEMU is unpacked rather than installed: Debian 12's qemu-system-x86 (7.2) Breaks
# the qemu-utils 10.0 this machine has from backports, so `apt-get install` would
# remove qemu-img/qemu-nbd. The unpacked binary runs against libraries that
# scripts/install-deps.sh installs (libcapstone4, libfdt1, libpmem1, libslirp0,
# libvdeplug2). Environment overrides:
#   CACHALOT_GUEST_CACHE   cache root
#   CACHALOT_GUEST_KERNEL  kernel package, e.g. linux-image-6.1.0-56-amd64
#                          (default: what linux-image-amd64 depends on)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${CACHALOT_GUEST_CACHE:-/var/cache/cachalot-guest}

# Modules the guest loads at boot, in this order (each with its dependencies).
# crc32c_generic first: xfs, ext4 and iSCSI digests ask the crypto API for crc32c,
# and the guest's default CPU (qemu64) has no SSE4.2 for crc32c_intel.
BOOT_MODULES='crc32c_generic virtio_pci virtio_net 9pnet_virtio 9p overlay nbd iscsi_tcp sd_mod'
# Modules in the initramfs that the kernel loads when first asked (mount -t nfs,
# nfs4, xfs, ext4; losetup), through request_module and busybox modprobe: loading
# the NFS stack and xfs at every boot would cost 2-3 s under TCG.
ON_DEMAND_MODULES='sunrpc nfs nfsv3 nfsv4 loop ext4 xfs'
MODULES="$BOOT_MODULES $ON_DEMAND_MODULES"
QEMU_PACKAGES=(qemu-system-x86 qemu-system-common qemu-system-data seabios ipxe-qemu)

log() { echo "build-guest: $*" >&2; }
die() {
    log "$*"
    exit 1
}

for tool in apt-get dpkg cpio gzip flock sha256sum; do
    command -v "$tool" >/dev/null || die "missing tool: $tool (run scripts/install-deps.sh test)"
done
BUSYBOX=/bin/busybox # busybox-static's; the initramfs has no libc
if [[ ! -x $BUSYBOX ]] || ldd "$BUSYBOX" >/dev/null 2>&1; then
    die "missing a static $BUSYBOX (apt-get install busybox-static)"
fi

kernel_package() {
    if [[ -n ${CACHALOT_GUEST_KERNEL:-} ]]; then
        echo "$CACHALOT_GUEST_KERNEL"
        return
    fi
    apt-cache depends linux-image-amd64 2>/dev/null |
        awk '/Depends: linux-image-[0-9]/ { print $2; exit }'
}

KPKG=$(kernel_package)
if [[ -z $KPKG ]] && ! ls "$CACHE"/*/ready >/dev/null 2>&1; then
    log "no apt package lists: apt-get update"
    apt-get update -qq >&2 || true
    KPKG=$(kernel_package)
fi
if [[ -z $KPKG ]]; then
    # No apt lists (offline, before apt-get update): reuse the newest build.
    newest=$(ls -1dt "$CACHE"/*/ready 2>/dev/null | head -n 1 || true)
    [[ -n $newest ]] || die "cannot name a kernel package: run apt-get update (or set CACHALOT_GUEST_KERNEL)"
    dirname "$newest"
    exit 0
fi
KVER=${KPKG#linux-image-}
INPUT_HASH=$(cat "${BASH_SOURCE[0]}" "$HERE/init.sh" | sha256sum | cut -c1-12)
OUT=$CACHE/$KVER-$INPUT_HASH

if [[ -f $OUT/ready ]]; then
    touch "$OUT/ready" # last use, for the pruning below
    echo "$OUT"
    exit 0
fi

mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9
if [[ -f $OUT/ready ]]; then # built by someone else while we waited
    echo "$OUT"
    exit 0
fi

start=$(date +%s)
WORK=$(mktemp -d "$CACHE/.build.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
log "building $OUT (kernel package $KPKG)"

# 1. Download and unpack. apt's _apt user must be able to write the directory.
mkdir -p "$WORK/debs" "$WORK/kernel" "$WORK/stage/qemu"
chmod 755 "$WORK"
chmod 777 "$WORK/debs"
(cd "$WORK/debs" && apt-get download -q "$KPKG" "${QEMU_PACKAGES[@]}" >/dev/null) ||
    die "apt-get download $KPKG ${QEMU_PACKAGES[*]} failed"
dpkg -x "$WORK"/debs/linux-image-*.deb "$WORK/kernel"
for p in "${QEMU_PACKAGES[@]}"; do
    dpkg -x "$WORK"/debs/"${p}"_*.deb "$WORK/stage/qemu"
done
cp "$WORK/kernel/boot/vmlinuz-$KVER" "$WORK/stage/vmlinuz"

# 2. Module closure from modules.dep (busybox depmod: the .deb ships none).
MODROOT=$WORK/kernel
"$BUSYBOX" depmod -b "$MODROOT" "$KVER"
DEP=$MODROOT/lib/modules/$KVER/modules.dep
declare -A path_of=() seen=()
while IFS=: read -r path _; do
    name=${path##*/}
    name=${name%%.ko*}
    path_of[${name//-/_}]=$path
done <"$DEP"
closure=()
add_module() { # path (relative to lib/modules/KVER)
    local path=$1 deps d
    [[ -z ${seen[$path]:-} ]] || return 0
    seen[$path]=1
    deps=$(awk -F': *' -v p="$path" '$1 == p { print $2; exit }' "$DEP")
    for d in $deps; do add_module "$d"; done
    closure+=("$path")
}
for m in $MODULES; do
    p=${path_of[${m//-/_}]:-}
    [[ -n $p ]] || die "module $m not found in $KPKG"
    add_module "$p"
done

# 3. The initramfs: busybox, /init, the modules and a modules.dep for them.
ROOT=$WORK/initramfs
mkdir -p "$ROOT"/{bin,sbin,etc,proc,sys,dev,host,rw,newroot,tmp} "$ROOT/lib/modules/$KVER"
for applet in $("$BUSYBOX" --list); do
    ln -s busybox "$ROOT/bin/$applet"
done
rm -f "$ROOT/bin/busybox"
cp "$BUSYBOX" "$ROOT/bin/busybox" # after the links, or /init fails with ELOOP
ln -s ../bin/modprobe "$ROOT/sbin/modprobe" # the kernel's request_module helper
for p in "${closure[@]}"; do
    mkdir -p "$ROOT/lib/modules/$KVER/${p%/*}"
    cp "$MODROOT/lib/modules/$KVER/$p" "$ROOT/lib/modules/$KVER/$p"
done
cp "$MODROOT/lib/modules/$KVER"/modules.{order,builtin,builtin.modinfo} \
    "$ROOT/lib/modules/$KVER/" 2>/dev/null || true
"$BUSYBOX" depmod -b "$ROOT" "$KVER"
cp "$HERE/init.sh" "$ROOT/init"
chmod 755 "$ROOT/init"
printf '%s\n' $BOOT_MODULES >"$ROOT/etc/guest-modules" # one a line
echo "$KVER" >"$ROOT/etc/guest-kernel"
(cd "$ROOT" && find . -print0 | cpio --null -o -H newc --quiet) | gzip -1 >"$WORK/stage/initrd.gz"

# 4. Check that the unpacked QEMU runs (its libraries come from install-deps.sh).
if ! missing=$(LC_ALL=C ldd "$WORK/stage/qemu/usr/bin/qemu-system-x86_64" | grep 'not found'); then
    missing=
fi
[[ -z $missing ]] || die "qemu-system-x86_64 lacks libraries (run scripts/install-deps.sh test): $missing"

{
    echo "kernel_package=$KPKG"
    echo "kernel_version=$KVER"
    echo "modules=${#closure[@]}"
    echo "qemu=$("$WORK/stage/qemu/usr/bin/qemu-system-x86_64" --version | head -n 1)"
} >"$WORK/stage/info"
printf '%s\n' "${closure[@]}" >"$WORK/stage/modules.list"
touch "$WORK/stage/ready"
rm -rf "$OUT"
mv "$WORK/stage" "$OUT"
# Builds of other kernels or other versions of these scripts (other worktrees may
# still use them) go when unused for 3 days.
find "$CACHE" -mindepth 2 -maxdepth 2 -name ready -mtime +3 -printf '%h\0' |
    xargs -0 -r rm -rf
log "built in $(($(date +%s) - start)) s: ${#closure[@]} modules, initrd $(du -h "$OUT/initrd.gz" | cut -f1)"
echo "$OUT"
