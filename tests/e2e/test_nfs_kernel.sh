#!/usr/bin/env bash
# timeout: 420
# Issue 13's kernel client: the Linux kernel's NFSv3 client in the QEMU guest
# (tests/guest/run-in-guest.sh) mounts a share of OUR daemon (`cachalot serve
# --nfs`) with vers=3,proto=tcp,hard,nolock and runs tests/e2e/guest/nfs_kernel.sh:
# create, write, rename over a file, hard link, truncate down and up, a sparse
# file, a directory of $NDIR files, fsync. Then, while a guest writer holds a file
# open and writes 16 MiB with O_DSYNC (and another creates small files), the host
# kills the daemon with SIGKILL, leaves it down 2 s and starts it again on the same
# port: the hard mount must recover by itself, both writers finish without an
# error, and after a remount (no client cache) every checksum equals the content
# the host expects. The host then reads the same files through a FUSE mount of the
# dataset (what the daemon stored) and compares again. lib.sh fails the test if
# the daemon panics or does not stop cleanly. One guest boot.
source "$(dirname "${BASH_SOURCE[0]}")/guest_lib.sh"
guest_private_namespaces "$@"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
guest_lib_init

C=$CACHALOT
NDIR=${NDIR:-2000}
# A private network namespace: the standard port is ours alone.
NFS_PORT=2049
SERVE_ARGS="--nfs 127.0.0.1:$NFS_PORT --portmap off"
export SERVE_ARGS

T=$(mktmp)
mkdir -p "$T/results" "$T/expected"
chmod 777 "$T/results"
DATA=$T/data.bin
DATA2=$T/data2.bin
head -c $((4 << 20)) /dev/urandom >"$DATA"
head -c $((16 << 20)) /dev/urandom >"$DATA2"

# expected_tree DIR: the guest's workload, done on a local directory.
expected_tree() {
    local d=$1 i
    cp "$DATA" "$d/target.bin"
    mkdir -p "$d/sub" "$d/big" "$d/crash"
    cp "$DATA" "$d/sub/link.bin"
    cp "$DATA" "$d/trunc.bin"
    truncate -s 300000 "$d/trunc.bin"
    truncate -s 500000 "$d/trunc.bin"
    head -c 1000 "$DATA" | dd of="$d/trunc.bin" bs=1000 seek=450 conv=notrunc status=none
    truncate -s 64M "$d/sparse.bin"
    head -c 65536 "$DATA" | dd of="$d/sparse.bin" bs=64k seek=512 conv=notrunc status=none
    printf 'start\n' | dd of="$d/sparse.bin" conv=notrunc status=none
    printf 'end\n' | dd of="$d/sparse.bin" bs=1 seek=$((64 * 1048576 - 4)) conv=notrunc status=none
    for ((i = 1; i <= NDIR; i++)); do
        printf 'entry %d\n' "$i" >"$d/big/f$i"
    done
    rm "$d/big/f7" "$d/big/f77"
    mv "$d/big/f8" "$d/big/renamed8"
    cp "$DATA2" "$d/crash/stream.bin"
    while read -r n; do
        printf 'small %d\n' "${n#s}" >"$d/crash/$n"
    done <"$T/results/created"
}

# sums_of DIR: the lines the guest writes to $RESULTS/sums, computed on DIR.
sums_of() (
    cd "$1" || exit 1
    for f in target.bin sub/link.bin trunc.bin sparse.bin crash/stream.bin; do
        echo "$f $(sha256sum "$f" | cut -d' ' -f1)"
    done
    # One process per listing, not one per file: forks are slow under TCG.
    echo "big $(grep -r '' big | LC_ALL=C sort | sha256sum | cut -d' ' -f1)"
    echo "crash-small $(sed 's|^|crash/|' "$T/results/created" | xargs grep -H '' | LC_ALL=C sort | sha256sum | cut -d' ' -f1)"
    echo "root-listing $(find . -mindepth 1 -maxdepth 1 -printf '%f\n' | LC_ALL=C sort | tr '\n' ' ')"
)

start_daemon
assert_contains "$(cat "$ARTIFACTS/daemon.log")" "nfs: NFSv3 and MOUNT v3 listening on 127.0.0.1:$NFS_PORT"
D=$(mktmp)
assert_ok "$C" pool create -s 2G tank "$D/d0" >/dev/null
# The guest's connections arrive through QEMU user networking, from 127.0.0.1.
assert_ok "$C" create -o "sharenfs=rw=127.0.0.1,no_root_squash" tank/fs

note "booting the guest"
guest_start=$(date +%s)
guest_run --timeout 330 --share "$T/results" \
    --env RESULTS="$T/results" --env DATA="$DATA" --env DATA2="$DATA2" \
    --env NFS_EXPORT=/tank/fs --env NFS_PORT="$NFS_PORT" --env NDIR="$NDIR" \
    "$GUEST_LIB_DIR/guest/nfs_kernel.sh" &
guest_pid=$!
# The crash: when the guest's writer is half way, SIGKILL the daemon, leave it down
# 2 s (the guest writes meanwhile), start it on the same port and pool.
if wait_file "$T/results/kill-request" 300 "$guest_pid"; then
    kill9_daemon
    touch "$T/results/killed"
    sleep 2
    touch "$T/results/restarting"
    start_daemon
    note "daemon restarted $(($(date +%s) - guest_start)) s after the guest started"
fi
guest_rc=0
wait "$guest_pid" || guest_rc=$?
note "guest run: exit $guest_rc in $(($(date +%s) - guest_start)) s"

verdict=$(cat "$T/results/verdict" 2>/dev/null || echo "FAIL no verdict (guest exit $guest_rc)")
[[ $verdict == ok ]] || fail "guest: $verdict (guest output: $ARTIFACTS/guest-output.log)"
[[ $guest_rc -eq 0 ]] || fail "the guest script exited with $guest_rc"
cat "$T/results/facts"
facts=$(cat "$T/results/facts")
assert_contains "$facts" "nlink 2" "hard link count"
assert_contains "$facts" "nlink-after 2" "hard link count after the remount"
assert_contains "$facts" "big-entries $((NDIR - 2))" "entries of the large directory"
assert_contains "$facts" "sizes 500000 $((64 << 20)) $((16 << 20))" "file sizes"
ncreated=$(wc -l <"$T/results/created")
note "the guest created $ncreated small files across the crash"

note "expected content, computed on the host"
expected_tree "$T/expected"
expected=$(sums_of "$T/expected")
got=$(cat "$T/results/sums")
if [[ $got != "$expected" ]]; then
    diff <(echo "$expected") <(echo "$got") >&2 || true
    fail "the kernel client read back content that differs from what it wrote (diff: expected < > guest)"
fi
echo "guest read-back: all checksums equal ($(echo "$got" | wc -l) lines)"

note "what the daemon stored: the same files through a FUSE mount"
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
echo "kernel NFSv3 client against cachalot: workload and kill -9 recovery ok"
