#!/usr/bin/env bash
# timeout: 300
# send | receive through the CLI and the daemon's socket, on real files in FUSE
# mounts: a full stream and a chain of two incrementals arrive bit-identical
# (every file's checksum, modes, links, xattrs); a diverged target is refused
# unless -F; truncated, corrupt, out-of-order and foreign streams are refused with
# one line and leave nothing behind; progress shows on a terminal only.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/e2e/fuse_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/fuse_lib.sh"

C=$CACHALOT
T=$(mktmp)
SRC=$T/src
DST=$T/dst

# manifest DIR: one line per entry (path, type, mode, size, link target, sha256).
manifest() {
    (
        cd "$1"
        find . -path ./.cachalot -prune -o -printf '%p %y %m %s %l\n' | sort
        find . -path ./.cachalot -prune -o -type f -print0 | sort -z | xargs -0 -r sha256sum
        find . -path ./.cachalot -prune -o -type f -print0 | sort -z |
            xargs -0 -r getfattr --absolute-names -d -m user. 2>/dev/null | grep -v '^#' || true
    )
}

# same_tree A B MSG
same_tree() {
    diff <(manifest "$1") <(manifest "$2") >"$T/diff" || fail "$3: trees differ: $(head -20 "$T/diff")"
}

# no_leftovers: no hidden receive datasets, and the given names do not exist.
no_leftovers() {
    local all
    all=$(assert_ok "$C" list -H -t all -o name)
    [[ $all != *%* ]] || fail "a hidden receive dataset was left behind: $all"
    for n in "$@"; do
        ! grep -qx "$n" <<<"$all" || fail "$n exists after a failed receive"
    done
}

fuse_pool 1G
fuse_mount tank/src "$SRC" compression=lz4 recordsize=16K

note "source tree: random, compressible, sparse, large, links, xattrs"
mkdir -p "$SRC/db/sub" "$SRC/empty"
head -c 3M /dev/urandom >"$SRC/db/random.bin"
seq 1 300000 >"$SRC/db/text.txt"
truncate -s 64M "$SRC/sparse.img"
printf 'in the middle' | dd of="$SRC/sparse.img" bs=1 seek=$((32 << 20)) conv=notrunc status=none
head -c 12M /dev/urandom >"$SRC/big.bin"
echo small >"$SRC/db/sub/small"
ln -s db/sub/small "$SRC/link"
ln "$SRC/db/sub/small" "$SRC/hard"
chmod 640 "$SRC/db/text.txt"
setfattr -n user.origin -v cachalot "$SRC/db/random.bin"
sync
assert_ok "$C" snapshot tank/src@a
manifest "$SRC" >"$T/at_a"

note "full send, then receive into a new filesystem"
assert_ok "$C" send tank/src@a >"$T/full.stream"
assert_ok "$C" receive tank/dst <"$T/full.stream"
mkdir -p "$DST"
# The copy is checked through its snapshot: reading the live tree would update
# atimes, and a changed target refuses the next incremental (as in zfs).
assert_ok "$C" mount tank/dst "$DST"
same_tree "$SRC" "$DST/.cachalot/snapshot/a" "full receive"
assert_eq "$(assert_ok "$C" list -H -t snapshot -o name tank/dst)" "tank/dst@a" "received snapshot"

note "the same stream through a pipe"
"$C" send tank/src@a | assert_ok "$C" receive tank/piped
mkdir -p "$T/piped"
assert_ok "$C" mount tank/piped "$T/piped"
same_tree "$SRC" "$T/piped/.cachalot/snapshot/a" "piped receive"
assert_ok "$C" unmount tank/piped

note "incremental chain: a -> b -> c"
head -c 1M /dev/urandom | dd of="$SRC/big.bin" bs=1M seek=7 conv=notrunc status=none
rm "$SRC/db/text.txt" "$SRC/hard"
echo new >"$SRC/db/sub/new"
mv "$SRC/db/sub/small" "$SRC/db/moved"
truncate -s 10M "$SRC/sparse.img"
sync
assert_ok "$C" snapshot tank/src@b
echo more >>"$SRC/db/sub/new"
rmdir "$SRC/empty"
head -c 3M /dev/urandom >>"$SRC/db/random.bin"
sync
assert_ok "$C" snapshot tank/src@c
assert_ok "$C" send -i @a tank/src@b >"$T/ab.stream"
assert_ok "$C" send -i tank/src@b tank/src@c >"$T/bc.stream"
ab=$(stat -c %s "$T/ab.stream")
full=$(stat -c %s "$T/full.stream")
((ab < full / 4)) || fail "incremental a->b is $ab bytes, full is $full: not incremental"

note "out of order: b->c before a->b is refused"
assert_ok "$C" unmount tank/dst
assert_fails "$C" receive tank/dst <"$T/bc.stream"
no_leftovers
assert_ok "$C" receive tank/dst <"$T/ab.stream"
assert_ok "$C" receive tank/dst <"$T/bc.stream"
assert_ok "$C" mount tank/dst "$DST"
same_tree "$SRC" "$DST/.cachalot/snapshot/c" "after the incremental chain"
assert_eq "$(assert_ok "$C" list -H -t snapshot -o name tank/dst | tr '\n' ' ')" "tank/dst@a tank/dst@b tank/dst@c " "snapshots after the chain"

note "every received snapshot holds what the source's did"
same_tree "$SRC/.cachalot/snapshot/b" "$DST/.cachalot/snapshot/b" "snapshot b"
diff <(manifest "$DST/.cachalot/snapshot/a") "$T/at_a" >/dev/null || fail "snapshot a of the copy differs"

note "a diverged target is refused unless -F"
same_tree "$SRC" "$DST" "the live copy"
echo local change >"$DST/local"
sync
assert_ok "$C" unmount tank/dst
echo tail >>"$SRC/db/sub/new"
sync
assert_ok "$C" snapshot tank/src@d
assert_ok "$C" send -i @c tank/src@d >"$T/cd.stream"
assert_fails "$C" receive tank/dst <"$T/cd.stream"
assert_contains "$LAST_STDERR" "-F" "the refusal names -F"
assert_ok "$C" receive -F tank/dst <"$T/cd.stream"
assert_ok "$C" mount tank/dst "$DST"
same_tree "$SRC" "$DST" "after a forced incremental"
[[ ! -e $DST/local ]] || fail "the local change survived receive -F"

note "a mounted target is busy"
assert_fails "$C" receive -F tank/dst <"$T/full.stream"
assert_contains "$LAST_STDERR" "busy" "refusal of a mounted target"

note "hostile streams change nothing"
used_before=$(assert_ok "$C" list -H -p -o used tank)
for cut in 100 5000 $((full / 2)) $((full - 1)); do
    head -c "$cut" "$T/full.stream" >"$T/cut.stream"
    assert_fails "$C" receive tank/cut <"$T/cut.stream"
done
for off in 60 $((full / 3)) $((full - 10)); do
    cp "$T/full.stream" "$T/bad.stream"
    flip_byte "$T/bad.stream" "$off"
    assert_fails "$C" receive tank/bad <"$T/bad.stream"
done
{ printf 'JUNK'; head -c 1M /dev/urandom; } >"$T/noise"
assert_fails "$C" receive tank/noise <"$T/noise"
assert_contains "$LAST_STDERR" "not a cachalot send stream" "noise"
assert_fails "$C" receive tank/empty </dev/null
assert_fails "$C" receive tank/dst <"$T/full.stream"
assert_contains "$LAST_STDERR" "already exists" "full stream onto an existing dataset"
no_leftovers tank/cut tank/bad tank/noise tank/empty
assert_ok "$C" pool sync tank
used_after=$(assert_ok "$C" list -H -p -o used tank)
((used_after <= used_before + 1048576)) || fail "failed receives left space behind: $used_before -> $used_after"

note "bad names and arguments"
assert_fails "$C" send tank/src@nosuch
assert_fails "$C" send tank/src
assert_fails "$C" send -i @d tank/src@a
assert_fails "$C" send -i tank/dst@a tank/src@b
assert_fails "$C" receive tank/nosuchparent/x <"$T/full.stream"
assert_fails "$C" receive "tank/bad@name" <"$T/full.stream"
assert_fails "$C" receive tank <"$T/full.stream"
no_leftovers tank/nosuchparent/x

note "progress is shown on a terminal only"
assert_ok "$C" destroy -r tank/piped
out=$(script -qec "$C receive tank/piped < $T/full.stream" /dev/null)
assert_contains "$out" "received tank/piped@a" "summary line on a terminal"
err=$("$C" send tank/src@a 2>&1 >/dev/null)
assert_eq "$err" "" "nothing on stderr when it is not a terminal"
out=$(script -qec "$C send tank/src@a" /dev/null || true)
assert_contains "$out" "terminal" "a stream is not written to a terminal"

note "the pool is clean"
assert_ok "$C" pool scrub -w tank
status=$(assert_ok "$C" pool status tank)
assert_contains "$status" "No known data errors" "scrub after all of it"
