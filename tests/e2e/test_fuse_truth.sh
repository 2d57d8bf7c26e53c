#!/usr/bin/env bash
# timeout: 180
# File attributes tell the truth on a real FUSE mount: du/st_blocks of sparse,
# punched and compressed files; SEEK_DATA/SEEK_HOLE with the real lseek against a
# model of the file; suid/sgid dropped by a write and a truncate from another user
# (FUSE_HANDLE_KILLPRIV_V2: no getxattr before each write); a MAP_SHARED mapping of
# an O_DIRECT file (FUSE_DIRECT_IO_ALLOW_MMAP); POSIX ACL and SELinux xattrs
# refused as unsupported; a cold `ls -la` and `find -ls` send no request per entry.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/e2e/fuse_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/fuse_lib.sh"

fuse_pool 1G
T=$(mktmp)
M=$T/m
R=$T/raw
fuse_mount tank/fs "$M" recordsize=16K compression=lz4
fuse_mount tank/raw "$R" recordsize=16K compression=off
NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups)
alloc() { echo $(($(stat -c '%b * %B' "$1"))); }
# A snapshot commits a transaction group: what du says afterwards is exact.
n=0
commit() {
    n=$((n + 1))
    assert_ok "$CACHALOT" snapshot "tank/fs@c$n" "tank/raw@c$n" >/dev/null
}

note "du of a sparse file counts the written record only"
truncate -s 100M "$M/sparse"
dd if=/dev/urandom of="$M/sparse" bs=4k count=1 seek=$((100 * 256)) conv=notrunc status=none
a=$(alloc "$M/sparse")
((a >= 4096 && a <= 65536)) || fail "sparse 100 MiB file: st_blocks says $a bytes before the commit"
commit
a=$(alloc "$M/sparse")
((a >= 4096 && a <= 65536)) || fail "sparse 100 MiB file: st_blocks says $a bytes"
assert_eq "$(du -k --apparent-size "$M/sparse" | cut -f1)" 102404 "apparent size"

note "a punched hole lowers du (compression off)"
dd if=/dev/urandom of="$R/db" bs=1M count=1 status=none
commit
full=$(alloc "$R/db")
((full >= 1048576)) || fail "1 MiB of noise holds only $full bytes"
fallocate -p -o 256K -l 512K "$R/db"
a=$(alloc "$R/db")
((a <= full - 524288 + 32768)) || fail "after punching 512 KiB of $full: $a bytes (before the commit)"
commit
a=$(alloc "$R/db")
((a <= full - 524288 + 32768)) || fail "after punching 512 KiB of $full: $a bytes"
assert_eq "$(stat -c %s "$R/db")" 1048576 "punch keeps the size"

note "du of a compressed file is its compressed size"
head -c 1M < <(yes "INSERT INTO t VALUES (42, 'hello world');") >"$M/dump.sql"
commit
a=$(alloc "$M/dump.sql")
((a <= 327680)) || fail "1 MiB of SQL text holds $a bytes with lz4"

note "SEEK_DATA/SEEK_HOLE through lseek against a model"
python3 - "$M/holey" <<'PY' || fail "SEEK_DATA/SEEK_HOLE disagree with the model"
import errno, os, random, sys
REC, N = 16384, 48
rng = random.Random(7)
model = [rng.random() < 0.4 for _ in range(N)]
model[0] = model[-1] = True
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
for i, d in enumerate(model):
    if d:
        n = 1000 if i == N - 1 else REC
        os.pwrite(fd, os.urandom(n), i * REC)
size = (N - 1) * REC + 1000
assert os.fstat(fd).st_size == size
def expect(off, data):
    if off >= size:
        return "ENXIO"
    for r in range(off // REC, N):
        if model[r] == data:
            return max(r * REC, off)
    return "ENXIO" if data else size
def got(off, whence):
    try:
        return os.lseek(fd, off, whence)
    except OSError as e:
        assert e.errno == errno.ENXIO, e
        return "ENXIO"
bad = 0
for off in range(0, size + 2 * REC, 3001):
    for whence, data in ((os.SEEK_DATA, True), (os.SEEK_HOLE, False)):
        if got(off, whence) != expect(off, data):
            print(f"whence {whence} at {off}: got {got(off, whence)}, model {expect(off, data)}")
            bad += 1
sys.exit(1 if bad else 0)
PY

note "suid/sgid dropped by a write and a truncate from another user, kept for root"
# Through the cwd: the temp dirs above the mount are not open to nobody.
cd "$M"
T0=$(date +%s)
printf 'x' >suid
chmod 6777 suid
"${NOBODY[@]}" sh -c "printf y >>suid" || fail "nobody cannot write a 0777 file"

assert_eq "$(stat -c %a suid)" 777 "mode after a write by another user"
chmod 6777 suid
"${NOBODY[@]}" truncate -s 1 suid || fail "nobody cannot truncate a 0777 file"
assert_eq "$(stat -c %a suid)" 777 "mode after a truncate by another user"
chmod 6777 suid
printf 'z' >>suid
assert_eq "$(stat -c %a suid)" 6777 "root's write keeps suid/sgid"
chmod 2767 suid
"${NOBODY[@]}" sh -c "printf y >>suid"
assert_eq "$(stat -c %a suid)" 2767 "sgid without group exec stays"
for i in $(seq 1 200); do printf 'w%s' "$i" >>writes; done
T1=$(($(date +%s) + 1))
wait_until 30 "the analytics sampler stores second $((T1 - 1))" analytics_stored $((T1 - 1))
out=$(assert_ok "$CACHALOT" analytics show fuse.ops --by op --filter dataset=tank/fs --from "$T0" --to "$T1" -H -p)
echo "$out" >&2
w=$(awk -F'\t' '$1 == "write" { print $2 }' <<<"$out")
g=$(awk -F'\t' '$1 == "getxattr" { print $2 + 0 } END { if (!NR) print 0 }' <<<"$out")
[[ -n $w ]] || fail "no writes recorded"
python3 -c "import sys; w, g = float(sys.argv[1]), float(sys.argv[2] or 0); sys.exit(0 if g <= w / 20 else 1)" "$w" "${g:-0}" ||
    fail "getxattr still follows writes: $g/s getxattr for $w/s writes"

note "an O_DIRECT file maps MAP_SHARED"
python3 - "$M/mapped" <<'PY' || fail "MAP_SHARED mapping of an O_DIRECT file failed"
import mmap, os, sys
p = sys.argv[1]
with open(p, "wb") as f:
    f.write(b"\0" * 65536)
fd = os.open(p, os.O_RDWR | os.O_DIRECT)
m = mmap.mmap(fd, 65536, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
m[4096:4101] = b"hello"
m.flush()
assert m[4096:4101] == b"hello"
m.close()
os.close(fd)
with open(p, "rb") as f:
    f.seek(4096)
    got = f.read(5)
assert got == b"hello", got
PY

note "POSIX ACLs and SELinux labels are not supported (EOPNOTSUPP), other xattrs are"
mkdir "$M/acl"
python3 - "$M/acl" <<'PY' || fail "xattr support check failed"
import errno, os, sys
p = sys.argv[1]  # a directory: the kernel itself answers a default ACL of a file
for name in ("system.posix_acl_access", "system.posix_acl_default", "security.selinux"):
    for call in (lambda: os.getxattr(p, name), lambda: os.setxattr(p, name, b"\x02\0\0\0"),
                 lambda: os.removexattr(p, name)):
        try:
            call()
            raise SystemExit(f"{name}: no error")
        except OSError as e:
            assert e.errno == errno.EOPNOTSUPP, (name, e)
os.setxattr(p, "security.test", b"1")
assert os.getxattr(p, "security.test") == b"1"
assert "security.test" in os.listxattr(p)
PY

note "ls -la and find -ls of 500 files: no request per entry (READDIRPLUS, no getxattr)"
mkdir "$M/many"
for i in $(seq 500); do : >"$M/many/f$i"; done
sync
echo 3 >/proc/sys/vm/drop_caches
sleep 1
T0=$(date +%s)
[[ $(ls -la "$M/many" | wc -l) == 503 ]] || fail "ls -la does not list 500 files"
echo 3 >/proc/sys/vm/drop_caches
[[ $(find "$M/many" -ls | wc -l) == 501 ]] || fail "find -ls does not list 500 files"
T1=$(($(date +%s) + 1))
wait_until 30 "the analytics sampler stores second $((T1 - 1))" analytics_stored $((T1 - 1))
out=$(assert_ok "$CACHALOT" analytics show fuse.ops --by op --filter dataset=tank/fs --from "$T0" --to "$T1" -H -p)
echo "$out" >&2
total=$(awk -F'\t' -v s=$((T1 - T0)) '{ t += $2 * s } END { printf "%.0f", t }' <<<"$out")
((total < 100)) || fail "listing 500 files twice sent $total FUSE requests (one per entry is 1,000)"
cd /
echo PASS
