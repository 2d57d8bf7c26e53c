#!/usr/bin/env bash
# Install the system packages (and cargo-nextest) that a group of commands needs.
#
#   scripts/install-deps.sh test   # what `make test` needs
#   scripts/install-deps.sh demo   # what `make demo` needs
#
# Idempotent and fast when everything is already there: apt is only touched
# (one `apt-get update`, one `apt-get install`) if a package is missing.
set -euo pipefail

# One line per Debian package: "<package> <group> [<group>...]".
# To add a dependency, add a line here; nothing else needs to change.
PACKAGES='
fuse3            test demo
libfuse3-dev     test demo
pkg-config       test demo
fio              test demo
xxd              test demo
procps           test demo
util-linux       test demo
mariadb-server   test demo
sysbench         test demo
xfsprogs         test
btrfs-progs      test
e2fsprogs        test
mount            test
fonts-dejavu-core test
stress-ng        test
python3          test
attr             test
libnfs-utils     test demo
chromium         test
chromium-driver  test
bash-completion  test
systemd          test
# tests/e2e/test_replication.sh: the raw-pipe baseline of REPL_BENCH (send | socat).
socat            test
# The QEMU guest of tests/guest (the kernel NFS, NBD and iSCSI clients) and the
# peer servers of tests/e2e/test_guest_clients.sh. qemu-system-x86 is deliberately
# not here: Debian 12 qemu-system-x86 7.2 Breaks the qemu-utils 10.0 this machine has, so
# tests/guest/build-guest.sh unpacks it with `apt-get download` and these libraries
# let it run. The client packages start no service when installed (no systemd
# here, and policy-rc.d refuses); the guest uses them through its 9p view of the host root..
busybox-static   test
cpio             test
libcapstone4     test
libfdt1          test
libpmem1         test
libslirp0        test
libvdeplug2      test
iproute2         test
qemu-utils       test
nfs-common       test
open-iscsi       test
nbd-client       test
rpcbind          test
nfs-ganesha      test
nfs-ganesha-vfs  test
tgt              test
libnbd-bin       test
python3-libnbd   test
nbdkit           test
libiscsi-bin     test
qemu-block-extra test
'

usage() {
    echo "usage: $0 test|demo" >&2
    exit 2
}

[[ $# -eq 1 ]] || usage
GROUP=$1
case $GROUP in
    test | demo) ;;
    *) usage ;;
esac

# Make sure rustup's ~/.cargo/bin is on PATH (non-login shells, CI).
if [[ -f ${HOME:-/root}/.cargo/env ]]; then
    # shellcheck disable=SC1091
    . "${HOME:-/root}/.cargo/env"
fi
export PATH="${HOME:-/root}/.cargo/bin:$PATH"

log() { echo "install-deps[$GROUP]: $*" >&2; }

# Packages of the chosen group.
wanted=()
while read -r pkg groups; do
    [[ -n $pkg && $pkg != \#* ]] || continue
    for g in $groups; do
        if [[ $g == "$GROUP" ]]; then
            wanted+=("$pkg")
            break
        fi
    done
done <<<"$PACKAGES"

is_installed() {
    dpkg -s "$1" 2>/dev/null | grep -q '^Status: install ok installed$'
}

missing=()
for pkg in "${wanted[@]}"; do
    is_installed "$pkg" || missing+=("$pkg")
done

if ((${#missing[@]} > 0)); then
    SUDO=()
    if [[ $(id -u) -ne 0 ]]; then
        command -v sudo >/dev/null 2>&1 || {
            log "not root and no sudo: cannot install ${missing[*]}"
            exit 1
        }
        SUDO=(sudo)
    fi
    export DEBIAN_FRONTEND=noninteractive
    log "installing: ${missing[*]}"
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends -o Dpkg::Use-Pty=0 "${missing[@]}"
    # An install can remove a wanted package that was already there: on a machine
    # with qemu-utils 10 from backports, qemu-block-extra pulls Debian 12's QEMU 7.2,
    # which Breaks it. Install whatever is gone once more (the matching version),
    # then require every wanted package.
    gone=()
    for pkg in "${wanted[@]}"; do
        is_installed "$pkg" || gone+=("$pkg")
    done
    if ((${#gone[@]} > 0)); then
        log "installing again what the first install removed: ${gone[*]}"
        "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
            --no-install-recommends -o Dpkg::Use-Pty=0 "${gone[@]}"
    fi
    for pkg in "${wanted[@]}"; do
        is_installed "$pkg" || {
            log "package $pkg is still not installed"
            exit 1
        }
    done
else
    log "all ${#wanted[@]} packages already installed"
fi

# cargo-nextest runs the Rust test suite (only needed by the test group, but
# cheap to check).
if [[ $GROUP == test ]] && ! cargo nextest --version >/dev/null 2>&1; then
    log "installing cargo-nextest"
    cargo install cargo-nextest --locked
fi
