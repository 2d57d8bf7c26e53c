#!/usr/bin/env bash
# timeout: 180
# fsync after namespace changes on a real FUSE mount goes through the intent log:
# creates, renames, unlinks, mkdir, symlink, link, chmod/chown/utimes and
# truncate, each followed by an fsync of the file or of its directory, commit
# the log (zil.commits) and not transaction groups (txg.commits). Then the
# daemon is killed with -9 right after the last fsync returned: after the
# restart (it re-mounts) every change is there, none half-made.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/e2e/fuse_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/fuse_lib.sh"

C=$CACHALOT
fuse_pool 512M
T=$(mktmp)
M=$T/m
fuse_mount tank/fs "$M" recordsize=16K
mkdir "$M/d" "$M/empty"
echo victim >"$M/d/victim"
echo keep >"$M/d/keep"
assert_ok "$C" pool sync tank

N=${N:-150}
T0=$(date +%s)
python3 - "$M" "$N" >"$T/expected" <<'PY' || fail "the namespace workload failed"
import os, sys
m, n = sys.argv[1], int(sys.argv[2])
def fsync_path(p):
    fd = os.open(p, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
d = f"{m}/d"
for i in range(n):
    p = f"{d}/f{i}"
    fd = os.open(p, os.O_CREAT | os.O_WRONLY, 0o644)
    os.write(fd, b"data %d\n" % i)
    os.fsync(fd)
    os.close(fd)
    os.rename(p, f"{d}/r{i}")
    fsync_path(d)
    if i % 3 == 1:
        os.unlink(f"{d}/r{i}")
        fsync_path(d)
    elif i % 3 == 2:
        os.link(f"{d}/r{i}", f"{d}/l{i}")
        fsync_path(d)
os.mkdir(f"{m}/newdir", 0o750)
fsync_path(m)
os.symlink("d/keep", f"{m}/sl")
fsync_path(m)
os.rmdir(f"{m}/empty")
fsync_path(m)
os.unlink(f"{d}/victim")
fsync_path(d)
os.chmod(f"{d}/keep", 0o600)
os.chown(f"{d}/keep", 1234, 5678)
os.utime(f"{d}/keep", (1_000_000_000, 1_100_000_000))
fsync_path(f"{d}/keep")
os.truncate(f"{d}/r0", 2)
fsync_path(f"{d}/r0")
# What must be there after the crash: every name with its mode, owner, links,
# size, mtime and content (atime and ctime left out).
for root, dirs, files in os.walk(m):
    for name in sorted(dirs + files):
        p = os.path.join(root, name)
        st = os.lstat(p)
        body = ""
        if os.path.islink(p):
            body = os.readlink(p)
        elif os.path.isfile(p):
            body = open(p, "rb").read().hex()
        print(p[len(m):], oct(st.st_mode), st.st_uid, st.st_gid, st.st_nlink,
              st.st_size, int(st.st_mtime), body)
PY
T1=$(($(date +%s) + 1))
note "$((N * 2 + N * 2 / 3 + 6)) namespace changes with an fsync each took $((T1 - T0 - 1)) s"
# Rates over the same seconds: the intent log commits, transaction groups do not.
rate() {
    "$C" analytics show "$1" --by "$2" --from "$T0" --to "$T1" -H -p |
        awk -v k="$3" '$1 == k { print $2; found = 1 } END { if (!found) print 0 }'
}
wait_until 30 "the analytics sampler stores second $((T1 - 1))" analytics_stored $((T1 - 1))
zil=$(rate zil.commits dataset tank/fs)
txg=$(rate txg.commits pool tank)
note "per second: $zil intent log commits of tank/fs, $txg txg commits of tank"
python3 -c "import sys; z, t = float('$zil'), float('$txg'); sys.exit(0 if z > 20 * max(t, 0.2) else 1)" ||
    fail "fsync after namespace changes: $zil log commits/s against $txg txg commits/s"

# The queries above take a second or more; a txg that commits meanwhile would
# leave nothing to replay. One more fsync'd change, and the kill sent by the
# same process the moment its fsyncs return: a txg commit in between would
# also leave nothing to replay, and python's exit before bash's kill took
# 15-100 ms on a loaded machine (a 5 s txg timer: about one run in a hundred).
python3 - "$M" "$DAEMON_PID" >>"$T/expected" <<'PY' || fail "the last fsync'd change failed"
import os, signal, sys
m, daemon = sys.argv[1], int(sys.argv[2])
p = f"{m}/last"  # at the root: the walk does not list the root's own mtime
fd = os.open(p, os.O_CREAT | os.O_WRONLY, 0o644)
os.write(fd, b"last\n")
os.close(fd)
st = os.lstat(p)
print(p[len(m):], oct(st.st_mode), st.st_uid, st.st_gid, st.st_nlink,
      st.st_size, int(st.st_mtime), open(p, "rb").read().hex(), flush=True)
for q in (p, m):  # fsync the file, then its directory (left open: the mount dies)
    os.fsync(os.open(q, os.O_RDONLY))
os.kill(daemon, signal.SIGKILL)
PY
kill9_daemon
start_daemon
grep -q " $M fuse" /proc/mounts || fail "$M not re-mounted after the daemon restart"
python3 - "$M" >"$T/got" <<'PY'
import os, sys
m = sys.argv[1]
for root, dirs, files in os.walk(m):
    for name in sorted(dirs + files):
        p = os.path.join(root, name)
        st = os.lstat(p)
        body = ""
        if os.path.islink(p):
            body = os.readlink(p)
        elif os.path.isfile(p):
            body = open(p, "rb").read().hex()
        print(p[len(m):], oct(st.st_mode), st.st_uid, st.st_gid, st.st_nlink,
              st.st_size, int(st.st_mtime), body)
PY
if ! diff -u <(sort "$T/expected") <(sort "$T/got") >"$T/diff"; then
    head -20 "$T/diff" >&2
    fail "the tree after kill -9 differs from what the fsyncs acknowledged"
fi
note "$(wc -l <"$T/got") names intact after kill -9"
status=$(assert_ok "$C" pool status tank)
assert_contains "$status" "replayed" "pool status reports the intent log replay"
assert_ok "$C" pool scrub -w tank
status=$(assert_ok "$C" pool status tank)
assert_contains "$status" "No known data errors" "scrub after the replay"
stop_daemon
