#!/usr/bin/env bash
# timeout: 300
# Data integrity under load on a FUSE mount: fio with verify=crc32c (random and
# sequential, O_DIRECT and buffered, several jobs), stress-ng filesystem
# stressors, and a full pool: ENOSPC reaches the writer, nothing else breaks,
# space comes back after rm, scrub is clean.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/e2e/fuse_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/fuse_lib.sh"

command -v fio >/dev/null || fail "fio is not installed"
command -v stress-ng >/dev/null || fail "stress-ng is not installed"
fuse_pool 2G
M=$(mktmp)/m
fuse_mount tank/io "$M" recordsize=16K
D=$(mktmp)/d
fuse_mount tank/db "$D" recordsize=16K compression=off

# fio runs in a scratch directory: at the end of a verify job it writes
# local-JOB-N-verify.state into its working directory (the repository otherwise).
FIO_CWD=$(mktmp)
run_fio() {
    local name=$1
    shift
    (cd "$FIO_CWD" && fio --name="$name" --output="$ARTIFACTS/fio-$name.log" --verify=crc32c \
        --verify_fatal=1 --do_verify=1 --group_reporting "$@") || {
        tail -n 30 "$ARTIFACTS/fio-$name.log" >&2
        fail "fio $name failed"
    }
    grep -q "err= 0" "$ARTIFACTS/fio-$name.log" || fail "fio $name reported errors"
    note "fio $name ok"
}
run_fio randdirect --directory="$D" --rw=randwrite --bs=16k --size=64M --numjobs=4 \
    --direct=1 --ioengine=libaio --iodepth=8
run_fio seqbuffered --directory="$M" --rw=write --bs=128k --size=96M --numjobs=2 \
    --ioengine=psync
run_fio randsync --directory="$M" --rw=randwrite --bs=4k --size=8M --numjobs=2 \
    --sync=1 --ioengine=psync
run_fio mixed --directory="$D" --rw=randrw --bs=16k --size=32M --numjobs=2 --direct=1 \
    --ioengine=psync --verify_backlog=64 --time_based=0

note "stress-ng filesystem stressors"
mkdir -p "$M/stress"
chmod 777 "$M/stress"
stress-ng --temp-path "$M/stress" --timeout 20s --metrics-brief --verify \
    --dir 2 --dentry 2 --rename 2 --link 2 --symlink 2 --hdd 2 --hdd-bytes 16M \
    --fallocate 1 --fallocate-bytes 16M --xattr 1 --lockf 1 --flock 1 --seek 1 \
    --seek-size 64M >"$ARTIFACTS/stress-ng.log" 2>&1 || {
    tail -n 40 "$ARTIFACTS/stress-ng.log" >&2
    fail "stress-ng failed"
}
note "stress-ng ok: $(grep -o 'successful run completed.*' "$ARTIFACTS/stress-ng.log")"
assert_ok "$CACHALOT" unmount tank/io
assert_ok "$CACHALOT" unmount tank/db
assert_ok "$CACHALOT" destroy tank/io
assert_ok "$CACHALOT" destroy tank/db

note "full pool: ENOSPC reaches the application"
F=$(mktmp)/f
fuse_mount tank/full "$F" compression=off
dd if=/dev/urandom of="$F/keep" bs=1M count=8 status=none
keep=$(md5sum <"$F/keep")
sync
err=$(dd if=/dev/urandom of="$F/fill" bs=1M count=4000 conv=fsync 2>&1 >/dev/null) &&
    fail "filling the pool succeeded"
assert_contains "$err" "No space left on device" "dd error"
assert_eq "$(md5sum <"$F/keep")" "$keep" "existing file after ENOSPC"
echo "small" >"$F/after" 2>/dev/null || true
rm -f "$F/fill"
sync
sleep 6
dd if=/dev/urandom of="$F/again" bs=1M count=64 conv=fsync status=none ||
    fail "space did not come back after rm"
assert_eq "$(md5sum <"$F/keep")" "$keep" "existing file at the end"
assert_ok "$CACHALOT" unmount tank/full
assert_ok "$CACHALOT" pool scrub -w tank
st=$("$CACHALOT" pool status tank)
assert_contains "$st" "ONLINE"
echo "PASS"
