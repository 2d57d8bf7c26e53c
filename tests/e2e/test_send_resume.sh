#!/usr/bin/env bash
# timeout: 300
# Resumable receive through the CLI and the daemon, as zfs's receive -s / send -t
# / receive -A: a cut stream leaves a resume token (get and list show it), the
# rest of the stream completes it bit-identical; a kill -9 of the daemon in the
# middle of a receive keeps the last checkpoint, and the next send -t resumes
# from there (re-sending far less than the whole); corrupt streams are refused
# with one line naming the snapshot and the target; a token that can no longer
# be honoured is refused on the source and replaced by a whole stream; holds
# keep a snapshot from destroy, destroy -r and rollback -r until released or -f.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/e2e/fuse_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/fuse_lib.sh"

C=$CACHALOT
T=$(mktmp)
SRC=$T/src

# cut_receive BYTES STREAM FS: receive -s the first BYTES of STREAM; it must fail.
cut_receive() {
    head -c "$1" "$2" >"$T/cut"
    assert_fails "$C" receive -s "$3" <"$T/cut"
}

token() { assert_ok "$C" get -H -o value receive_resume_token "$1"; }

# same_files SNAP SNAPDIR: the files of SNAPDIR equal those of the source's SNAP.
same_files() {
    diff <(cd "$SRC/.cachalot/snapshot/$1" && sha256sum big small) <(cd "$2" && sha256sum big small) ||
        fail "files of $2 differ from the source's snapshot $1"
}

fuse_pool 2G
fuse_mount tank/src "$SRC" compression=lz4
head -c 96M /dev/urandom >"$SRC/big"
seq 1 100000 >"$SRC/small"
sync
assert_ok "$C" snapshot tank/src@a
assert_ok "$C" send tank/src@a >"$T/full"
full=$(stat -c %s "$T/full")

note "a cut stream with -s keeps a resume token; send -t completes it"
cut_receive $((full / 3)) "$T/full" tank/dst
assert_contains "$LAST_STDERR" "tank/src@a" "the error names the snapshot"
assert_contains "$LAST_STDERR" "tank/dst" "the error names the target"
tok=$(token tank/dst)
[[ $tok == 1-* ]] || fail "no resume token: $tok"
assert_ok "$C" send -t "$tok" >"$T/rest"
rest=$(stat -c %s "$T/rest")
note "cut at $((full / 3)) of $full bytes: the resumed stream is $rest bytes"
((rest < full * 3 / 4)) || fail "resumed stream is $rest bytes of $full: it re-sends what arrived"
assert_ok "$C" receive -s tank/dst <"$T/rest"
assert_eq "$(token tank/dst)" "-" "no token after a completed receive"
mkdir -p "$T/dst"
assert_ok "$C" mount tank/dst "$T/dst"
same_files a "$T/dst/.cachalot/snapshot/a"
assert_ok "$C" unmount tank/dst

note "an incremental cut shows its token in list -o; the old token is refused after more arrived"
head -c 8M /dev/urandom | dd of="$SRC/big" bs=1M seek=40 conv=notrunc status=none
echo more >>"$SRC/small"
sync
assert_ok "$C" snapshot tank/src@b
assert_ok "$C" send -i @a tank/src@b >"$T/inc"
inc=$(stat -c %s "$T/inc")
cut_receive $((inc / 4)) "$T/inc" tank/dst
tok1=$(token tank/dst)
listed=$(assert_ok "$C" list -H -o name,receive_resume_token tank/dst)
assert_eq "$listed" "tank/dst	$tok1" "list -o receive_resume_token"
assert_ok "$C" send -t "$tok1" >"$T/inc_rest1"
cut_receive $(($(stat -c %s "$T/inc_rest1") / 2)) "$T/inc_rest1" tank/dst
tok2=$(token tank/dst)
[[ $tok2 != "$tok1" ]] || fail "the token did not move"
assert_ok "$C" send -t "$tok2" >"$T/inc_rest2"
assert_ok "$C" receive -s tank/dst <"$T/inc_rest2"
assert_eq "$(assert_ok "$C" list -H -t snapshot -o name tank/dst | tr '\n' ' ')" "tank/dst@a tank/dst@b " "snapshots"
assert_ok "$C" mount tank/dst "$T/dst"
same_files b "$T/dst/.cachalot/snapshot/b"
assert_ok "$C" unmount tank/dst

note "corrupt streams: one line naming the snapshot and the target; the target is unchanged"
cp "$T/full" "$T/bad"
flip_byte "$T/bad" $((full / 2))
assert_fails "$C" receive tank/copy <"$T/bad"
assert_contains "$LAST_STDERR" "'tank/src@a' into 'tank/copy'" "corrupt stream"
assert_contains "$LAST_STDERR" "checksum" "corrupt stream"
assert_fails "$C" get -H -o value receive_resume_token tank/copy
all=$(assert_ok "$C" list -H -t all -o name)
[[ $all != *copy* && $all != *%* ]] || fail "a refused stream left something: $all"

note "kill -9 of the daemon in the middle of a receive -s: the checkpoint survives"
fifo=$T/fifo
mkfifo "$fifo"
"$C" receive -s tank/crash <"$fifo" 2>"$T/crash.err" &
recv_pid=$!
# Feed about 3/4 of the stream, then hold the pipe open without more data.
# (exec: the feeder's pid is the sleep's, so killing it closes the pipe.)
(
    head -c $((full * 3 / 4)) "$T/full"
    exec sleep 60
) >"$fifo" &
feed_pid=$!
for ((i = 0; i < 300; i++)); do
    t=$("$C" get -H -o value receive_resume_token tank/crash 2>/dev/null || true)
    [[ $t == 1-* ]] && break
    sleep 0.1
done
[[ $t == 1-* ]] || fail "no checkpoint within 30 s of a 3/4 stream"
# The token shows before the receive's commit of it ends: commit the pool, so
# the kill lands after the checkpoint (a fixed 2 s was a race on a loaded
# machine; the stream is stalled at 3/4, so the receive cannot end meanwhile).
assert_ok "$C" debug call pool.sync '{"name":"tank"}' >/dev/null
kill9_daemon
kill "$feed_pid" 2>/dev/null || true
wait "$feed_pid" 2>/dev/null || true
wait "$recv_pid" 2>/dev/null || true
start_daemon
tok=$(token tank/crash)
[[ $tok == 1-* ]] || fail "the resume token did not survive kill -9: $tok"
assert_ok "$C" send -t "$tok" >"$T/crash_rest"
crest=$(stat -c %s "$T/crash_rest")
note "kill -9 after $((full * 3 / 4)) of $full bytes: the resumed stream is $crest bytes"
((crest < full * 3 / 4)) || fail "after kill -9 the resumed stream is $crest of $full bytes"
assert_ok "$C" receive -s tank/crash <"$T/crash_rest"
mkdir -p "$T/crash"
assert_ok "$C" mount tank/crash "$T/crash"
same_files a "$T/crash/.cachalot/snapshot/a"
assert_ok "$C" unmount tank/crash

note "a token that can no longer be honoured; receive -A; a whole stream replaces stale state"
cut_receive $((full / 5)) "$T/full" tank/stale
tok=$(token tank/stale)
assert_ok "$C" receive -A tank/stale
assert_fails "$C" get -H -o value receive_resume_token tank/stale
assert_fails "$C" receive -A tank/stale
assert_contains "$LAST_STDERR" "no partially received state" "receive -A twice"
cut_receive $((full / 5)) "$T/full" tank/stale
tok=$(token tank/stale)
assert_ok "$C" destroy tank/src@a
assert_fails "$C" send -t "$tok"
assert_contains "$LAST_STDERR" "cannot be honoured" "send -t of a destroyed snapshot"
assert_fails "$C" send -t "1-not-a-token"
assert_contains "$LAST_STDERR" "invalid resume token" "garbage token"
assert_ok "$C" snapshot tank/src@c
"$C" send tank/src@c | "$C" receive -s tank/stale 2>"$T/stale.err" || fail "whole stream over stale state: $(cat "$T/stale.err")"
assert_contains "$(cat "$T/stale.err")" "discarded the partial receive of 'tank/src@a'" "stale state replaced"
assert_eq "$(token tank/stale)" "-" "no token after the whole stream"

note "holds: a held snapshot is not destroyed without -f"
assert_ok "$C" hold keep tank/dst@b
assert_eq "$(assert_ok "$C" holds -H tank/dst@b)" "tank/dst@b	keep" "holds"
assert_fails "$C" destroy tank/dst@b
assert_contains "$LAST_STDERR" "held by keep" "destroy of a held snapshot"
assert_fails "$C" destroy -r tank/dst
assert_fails "$C" rollback -r tank/dst@a
assert_fails "$C" hold keep tank/dst@b
assert_ok "$C" release keep tank/dst@b
assert_fails "$C" release keep tank/dst@b
assert_ok "$C" hold keep tank/dst@b
assert_ok "$C" destroy -f tank/dst@b
assert_eq "$(assert_ok "$C" list -H -t snapshot -o name tank/dst)" "tank/dst@a" "after destroy -f"

note "the pool is clean"
assert_ok "$C" pool scrub -w tank
assert_contains "$(assert_ok "$C" pool status tank)" "No known data errors" "scrub"
