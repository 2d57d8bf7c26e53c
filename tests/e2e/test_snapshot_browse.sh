#!/usr/bin/env bash
# timeout: 180
# Snapshot browsing on a real FUSE mount: MOUNT/.cachalot/snapshot/NAME shows each
# snapshot's files as they were, read-only (EROFS for every change), hidden from
# the root's listing, and follows snapshots being taken, destroyed and re-taken.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/e2e/fuse_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/fuse_lib.sh"

C=$CACHALOT
T=$(mktmp)
M=$T/mnt
S=$M/.cachalot/snapshot

# erofs CMD...: CMD must fail with "Read-only file system".
erofs() {
    local err
    if err=$("$@" 2>&1); then
        fail "succeeded under a snapshot: $*"
    fi
    assert_contains "$err" "Read-only file system" "$*"
}

fuse_pool 256M
fuse_mount tank/fs "$M"

mkdir -p "$M/db/deep"
seq 1 100000 >"$M/db/t1.ibd"
echo one >"$M/db/deep/f"
ln -s db/t1.ibd "$M/link"
setfattr -n user.k -v v1 "$M/db/deep/f"
sum1=$(sha256sum <"$M/db/t1.ibd")
sync
assert_ok "$C" snapshot tank/fs@one

echo two >"$M/db/deep/f"
rm "$M/db/t1.ibd"
mkdir "$M/later"
sync
assert_ok "$C" snapshot tank/fs@two

note "each snapshot shows its own files"
assert_eq "$(sha256sum <"$S/one/db/t1.ibd")" "$sum1" "file of snapshot one"
assert_eq "$(cat "$S/one/db/deep/f")" "one" "snapshot one"
assert_eq "$(cat "$S/two/db/deep/f")" "two" "snapshot two"
[[ ! -e $S/two/db/t1.ibd ]] || fail "a file deleted before snapshot two is in it"
[[ -d $S/two/later && ! -e $S/one/later ]] || fail "directories of the wrong snapshot"
assert_eq "$(readlink "$S/one/link")" "db/t1.ibd" "symlink in a snapshot"
assert_eq "$(getfattr --absolute-names --only-values -n user.k "$S/one/db/deep/f")" "v1" "xattr in a snapshot"
assert_eq "$(ls "$S" | tr '\n' ' ')" "one two " "listing of .cachalot/snapshot"
assert_eq "$(ls "$M/.cachalot")" "snapshot" "listing of .cachalot"
assert_eq "$(cat "$M/db/deep/f")" "two" "the live file"

note "hidden from the root's listing (MariaDB scans its datadir)"
ls -a "$M" | grep -qx '.cachalot' && fail ".cachalot is listed in the root"
find "$M" -name .cachalot | grep -q . && fail "find sees .cachalot"

note "inode numbers differ between the live tree and snapshots"
i_live=$(stat -c %i "$M/db/deep/f")
i_one=$(stat -c %i "$S/one/db/deep/f")
i_two=$(stat -c %i "$S/two/db/deep/f")
[[ $i_live != "$i_one" && $i_one != "$i_two" ]] || fail "inode numbers collide: $i_live $i_one $i_two"

note "everything under .cachalot is read-only"
erofs sh -c "echo x > '$S/one/db/deep/f'"
erofs sh -c "echo x >> '$S/one/db/deep/f'"
erofs touch "$S/one/new"
erofs mkdir "$S/one/newdir"
erofs rm "$S/one/db/deep/f"
erofs mv "$S/one/db/deep/f" "$S/one/db/g"
erofs chmod 777 "$S/one/db/deep/f"
erofs truncate -s 0 "$S/one/db/t1.ibd"
erofs setfattr -n user.k -v v2 "$S/one/db/deep/f"
erofs mkdir "$S/new"
erofs ln "$S/one/db/deep/f" "$S/one/db/hard"
assert_eq "$(cat "$S/one/db/deep/f")" "one" "snapshot unchanged after refused writes"
out=$(mkdir "$M/.cachalot" 2>&1) && fail "mkdir .cachalot succeeded"
assert_contains "$out" "File exists" "mkdir .cachalot in the root"

note "snapshots come and go"
assert_ok "$C" destroy tank/fs@one
[[ ! -e $S/one ]] || fail "destroyed snapshot still browsable"
assert_eq "$(ls "$S" | tr '\n' ' ')" "two " "listing after destroy"
echo three >"$M/db/deep/f"
sync
assert_ok "$C" snapshot tank/fs@one
assert_eq "$(cat "$S/one/db/deep/f")" "three" "a re-taken snapshot shows its new content"

note "a held snapshot file does not block the live tree"
exec 7<"$S/two/db/deep/f"
echo four >"$M/db/deep/f"
assert_eq "$(cat <&7)" "two" "reading an open snapshot file"
exec 7<&-

note "the daemon log has no internal errors"
if grep -q "internal error" "$ARTIFACTS/daemon.log"; then
    fail "internal error in the daemon log"
fi
