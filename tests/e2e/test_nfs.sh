#!/usr/bin/env bash
# timeout: 180
# NFSv3 through the real daemon with libnfs's own tools (nfs-ls, nfs-cp,
# nfs-cat): copy files in and out with checksums, the same data seen through a
# FUSE mount of the same dataset (one Fs shared by both), `share list`, a
# refused client and an unshared dataset, kill -9 of the daemon and restart
# with the data still served, destroy of a shared dataset, and nfs.ops
# analytics by client and op.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

for t in nfs-ls nfs-cp nfs-cat; do
    command -v "$t" >/dev/null || fail "$t is not installed (libnfs-utils)"
done
C=$CACHALOT

free_port() {
    local p
    while true; do
        p=$((20000 + RANDOM % 30000))
        (echo >"/dev/tcp/127.0.0.1/$p") 2>/dev/null || {
            echo "$p"
            return
        }
    done
}
PORT=$(free_port)
SERVE_ARGS="--nfs 127.0.0.1:$PORT --portmap off"
export SERVE_ARGS
url() { echo "nfs://127.0.0.1/$1?version=3&nfsport=$PORT&mountport=$PORT"; }

# refused URL WHAT: nfs-ls must fail (libnfs exits with -errno, so not via
# assert_fails) and say WHAT.
refused() {
    local err rc=0
    err=$(nfs-ls "$1" 2>&1 >/dev/null) || rc=$?
    ((rc != 0)) || fail "nfs-ls $1 succeeded"
    assert_contains "$err" "$2" "nfs-ls $1"
}

start_daemon
assert_contains "$(cat "$ARTIFACTS/daemon.log")" "nfs: NFSv3 and MOUNT v3 listening on 127.0.0.1:$PORT"
D=$(mktmp)
assert_ok "$C" pool create -s 1G tank "$D/d0" >/dev/null
assert_ok "$C" create -o "sharenfs=rw=127.0.0.1,no_root_squash" tank/fs
assert_ok "$C" create tank/private
assert_fails "$C" set sharenfs=rw=300.1.1.1 tank/fs
assert_contains "$LAST_STDERR" "not an IPv4 address"

note "share list"
out=$(assert_ok "$C" share list -H)
assert_eq "$out" "$(printf 'tank/fs\tnfs\t/tank/fs\trw=127.0.0.1\tonline (127.0.0.1:%s)' "$PORT")" "share list"
out=$(assert_ok "$C" share list)
assert_contains "$out" "PATH-OR-TARGET"

note "copy in and out with checksums"
W=$(mktmp)
head -c $((24 << 20)) /dev/urandom >"$W/big.bin"
printf 'hello over nfs\n' >"$W/small.txt"
assert_ok nfs-cp "$W/big.bin" "$(url tank/fs/big.bin)" >/dev/null
assert_ok nfs-cp "$W/small.txt" "$(url tank/fs/small.txt)" >/dev/null
assert_ok nfs-cp "$(url tank/fs/big.bin)" "$W/back.bin" >/dev/null
assert_eq "$(sha256sum <"$W/back.bin")" "$(sha256sum <"$W/big.bin")" "big file round trip"
assert_eq "$(nfs-cat "$(url tank/fs/small.txt)")" "hello over nfs" "nfs-cat"
out=$(assert_ok nfs-ls "$(url tank/fs)")
assert_contains "$out" "big.bin"
assert_contains "$out" "$((24 << 20))"
assert_contains "$out" "small.txt"

note "the FUSE mount of the same dataset sees the same files (one Fs for both)"
M=$(mktmp)/fs
mkdir -p "$M"
assert_ok "$C" mount tank/fs "$M"
assert_eq "$(sha256sum <"$M/big.bin")" "$(sha256sum <"$W/big.bin")" "NFS write seen over FUSE"
printf 'from fuse\n' >"$M/fuse.txt"
assert_eq "$(nfs-cat "$(url tank/fs/fuse.txt)")" "from fuse" "FUSE write seen over NFS"
assert_ok "$C" unmount tank/fs

note "refused clients and unshared datasets"
refused "$(url tank/private)" MNT3ERR_ACCES
assert_ok "$C" set sharenfs=rw=10.0.0.0/8 tank/fs
refused "$(url tank/fs)" MNT3ERR_ACCES
assert_ok "$C" set "sharenfs=rw=127.0.0.1,no_root_squash" tank/fs

note "kill -9 and restart: the data is still served"
assert_ok nfs-cp "$W/small.txt" "$(url tank/fs/after-crash.txt)" >/dev/null
kill9_daemon
start_daemon
assert_ok "$C" pool list >/dev/null
assert_ok nfs-cp "$(url tank/fs/big.bin)" "$W/back2.bin" >/dev/null
assert_eq "$(sha256sum <"$W/back2.bin")" "$(sha256sum <"$W/big.bin")" "big file after kill -9"
assert_eq "$(nfs-cat "$(url tank/fs/after-crash.txt)")" "hello over nfs" "acknowledged copy after kill -9"

note "analytics: nfs.ops by op and client, innodb.ops for MySQL files"
assert_ok nfs-cp "$W/small.txt" "$(url tank/fs/ibdata1)" >/dev/null
assert_eq "$(nfs-cat "$(url tank/fs/ibdata1)")" "hello over nfs" "ibdata1"
T1=$(date +%s)
wait_until 30 "the analytics sampler stores second $T1" analytics_stored "$T1"
out=$(assert_ok "$C" analytics list)
assert_contains "$out" "nfs.ops"
assert_contains "$out" "nfs.bytes"
out=$(assert_ok "$C" analytics show nfs.ops --by op --last 60s -H)
assert_contains "$out" "read"
out=$(assert_ok "$C" analytics show nfs.bytes --by client --last 60s -H)
assert_contains "$out" "127.0.0.1"
out=$(assert_ok "$C" analytics show nfs.ops --by file --filter share=tank/fs --last 60s -H)
assert_contains "$out" "/big.bin"
out=$(assert_ok "$C" analytics show innodb.ops --by kind --filter dataset=tank/fs --last 60s -H)
assert_contains "$out" "system"

note "destroying a shared dataset stops serving it"
assert_ok "$C" destroy tank/fs
refused "$(url tank/fs)" MNT3ERR_ACCES # now a path below the unshared root
out=$(assert_ok "$C" share list -H)
assert_eq "$out" "" "no shares left"
stop_daemon
assert_eq "$DAEMON_EXIT" 0 "clean exit"
