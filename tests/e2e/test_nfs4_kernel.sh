#!/usr/bin/env bash
# timeout: 300
# Issue 14's kernel client: the Linux kernel's NFSv4.1 client in the QEMU guest
# mounts a share of OUR daemon (`cachalot serve --nfs`) with
# vers=4.1,proto=tcp,hard (through the pseudo file system: / -> tank -> fs) and
# runs tests/e2e/guest/nfs4_kernel.sh: create, write, rename over a file, hard
# link, symlink, truncate down and up, chown (owner strings), a directory of
# $NDIR files; then a remount (no client cache) and checksums, which must equal
# what the host computes for the same workload on a local directory, and what
# the daemon stored (read back through a FUSE mount). The same guest runs the same
# workload against NFS-Ganesha's NFSv4.1 as the control (same sums expected).
# One guest boot.
source "$(dirname "${BASH_SOURCE[0]}")/guest_lib.sh"
guest_private_namespaces "$@"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
guest_lib_init

C=$CACHALOT
NDIR=${NDIR:-300}
NFS_PORT=2049
SERVE_ARGS="--nfs 127.0.0.1:$NFS_PORT --portmap off"
export SERVE_ARGS

T=$(mktmp)
mkdir -p "$T/results" "$T/expected"
chmod 777 "$T/results"
DATA=$T/data.bin
head -c $((4 << 20)) /dev/urandom >"$DATA"

expected_tree() {
    local d=$1 i
    cp "$DATA" "$d/target.bin"
    mkdir -p "$d/sub" "$d/big"
    cp "$DATA" "$d/sub/link.bin"
    ln -s target.bin "$d/sym"
    cp "$DATA" "$d/trunc.bin"
    truncate -s 300000 "$d/trunc.bin"
    truncate -s 500000 "$d/trunc.bin"
    head -c 1000 "$DATA" | dd of="$d/trunc.bin" bs=1000 seek=450 conv=notrunc status=none
    for ((i = 1; i <= NDIR; i++)); do
        printf 'entry %d\n' "$i" >"$d/big/f$i"
    done
    rm "$d/big/f7" "$d/big/f77"
    mv "$d/big/f8" "$d/big/renamed8"
}

sums_of() (
    cd "$1" || exit 1
    for f in target.bin sub/link.bin trunc.bin; do
        echo "$f $(sha256sum "$f" | cut -d' ' -f1)"
    done
    echo "big $(grep -r '' big | LC_ALL=C sort | sha256sum | cut -d' ' -f1)"
    echo "root-listing $(find . -mindepth 1 -maxdepth 1 -printf '%f\n' | LC_ALL=C sort | tr '\n' ' ')"
)

start_rpcbind
mkdir -p "$T/ganesha"
start_ganesha "$T/ganesha" 2050 20048
start_daemon
assert_contains "$(cat "$ARTIFACTS/daemon.log")" "nfs: NFSv4.1 on the same port"
D=$(mktmp)
assert_ok "$C" pool create -s 1G tank "$D/d0" >/dev/null
assert_ok "$C" create -o "sharenfs=rw=127.0.0.1,no_root_squash" tank/fs

note "booting the guest"
guest_start=$(date +%s)
guest_rc=0
guest_run --timeout 240 --share "$T/results" \
    --env RESULTS="$T/results" --env DATA="$DATA" \
    --env TARGETS="cachalot:/tank/fs:$NFS_PORT ganesha:/export:2050" --env NDIR="$NDIR" \
    "$GUEST_LIB_DIR/guest/nfs4_kernel.sh" || guest_rc=$?
note "guest run: exit $guest_rc in $(($(date +%s) - guest_start)) s"

verdict=$(cat "$T/results/verdict" 2>/dev/null || echo "FAIL no verdict (guest exit $guest_rc)")
[[ $verdict == ok ]] || fail "guest: $verdict (guest output: $ARTIFACTS/guest-output.log)"
cat "$T/results/cachalot-facts"
facts=$(cat "$T/results/cachalot-facts")
assert_contains "$facts" "nlink 2" "hard link count"
assert_contains "$facts" "nlink-after 2" "hard link count after the remount"
assert_contains "$facts" "symlink target.bin" "symlink"
assert_contains "$facts" "owner 1234:2345" "owner strings carry the ids"
assert_contains "$facts" "owner-after 1234:2345" "owners after the remount"
assert_contains "$facts" "big-entries $((NDIR - 2))" "entries of the large directory"
assert_contains "$facts" "sizes 500000 $((4 << 20))" "file sizes"

expected_tree "$T/expected"
expected=$(sums_of "$T/expected")
got=$(cat "$T/results/cachalot-sums")
control=$(cat "$T/results/ganesha-sums")
echo "NFS-Ganesha (control): $(grep owner "$T/results/ganesha-facts" | tr '\n' ' ')"
if [[ $control != "$expected" ]]; then
    diff <(echo "$expected") <(echo "$control") >&2 || true
    fail "the control (NFS-Ganesha) read back other content: the workload or its expectation is wrong"
fi
if [[ $got != "$expected" ]]; then
    diff <(echo "$expected") <(echo "$got") >&2 || true
    fail "the kernel client read back content that differs from what it wrote (diff: expected < > guest)"
fi
echo "guest read-back over NFSv4.1: all checksums equal ($(echo "$got" | wc -l) lines)"

M=$(mktmp)/fs
mkdir -p "$M"
assert_ok "$C" mount tank/fs "$M"
served=$(sums_of "$M")
assert_ok "$C" unmount tank/fs
if [[ $served != "$expected" ]]; then
    diff <(echo "$expected") <(echo "$served") >&2 || true
    fail "the dataset's content differs from what the guest wrote (diff: expected < > FUSE)"
fi
echo "FUSE read of the dataset: all checksums equal"
stop_daemon
assert_eq "$DAEMON_EXIT" 0 "clean exit"
echo "kernel NFSv4.1 client against cachalot: workload ok"
