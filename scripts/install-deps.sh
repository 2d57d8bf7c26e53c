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
chromium         test
chromium-driver  test
libiscsi-bin     test
tgt              test
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
    for pkg in "${missing[@]}"; do
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
