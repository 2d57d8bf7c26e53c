#!/usr/bin/env bash
# timeout: 300
# NBD against the real daemon with real clients (libnbd's nbdinfo, nbdcopy and
# nbdsh, qemu-img, qemu-io, fio's nbd engine): exports switched by sharenbd,
# holes on a sparse volume and after TRIM in `nbdinfo --map` with the space
# really freed, every command and flag, read-only snapshots, errors past the
# end, a share switched off and a volume destroyed under a connected client,
# online grow, and a flushed write surviving kill -9 of the daemon.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

for tool in nbdinfo nbdcopy nbdsh qemu-img qemu-io fio; do
    command -v "$tool" >/dev/null || fail "$tool not installed (scripts/install-deps.sh test)"
done
# nbdsh needs the system python (python3-libnbd), not one first on PATH.
export PATH=/usr/bin:$PATH
/usr/bin/python3 -c 'import nbd' || fail "python3-libnbd not installed"

TMP=$(mktmp)
C=$CACHALOT
DAEMON_ARGS=(--nbd 127.0.0.1:0)

start_daemon
nbd_uri() { echo "nbd://$(cat "$HOME_DIR/nbd.addr")/$1"; }

assert_ok "$C" pool create -s 1G tank "$TMP/pool.img"
assert_ok "$C" create -V 256M -s -b 16K tank/vol
assert_ok "$C" create -V 64M tank/thick
assert_eq "$("$C" get -Hp volsize tank/vol | cut -f3)" 268435456 "volsize"
assert_eq "$("$C" get -Hp reservation tank/thick | cut -f3)" 67108864 "thick volume reserves its size"
assert_eq "$("$C" get -Hp reservation tank/vol | cut -f3)" none "sparse volume reserves nothing"
U=$(nbd_uri tank/vol)

note "not shared: refused"
assert_eq "$("$C" get -Hp sharenbd tank/vol | cut -f3)" off "sharenbd defaults to off"
if nbdinfo "$U" >/dev/null 2>&1; then fail "an unshared volume was served"; fi
assert_ok "$C" set sharenbd=on tank
assert_eq "$("$C" get -H sharenbd tank/vol | cut -f3,4)" "on	inherited from tank" "sharenbd inherits"

note "nbdinfo: flags, contexts, a sparse volume is one hole"
info=$(assert_ok nbdinfo "$U")
echo "$info"
for want in "export-size: 268435456" "base:allocation" "can_flush: true" "can_fua: true" \
    "can_trim: true" "can_zero: true" "can_fast_zero: true" "can_multi_conn: true" \
    "is_read_only: false" "block_size_preferred: 16384" "block_size_maximum: 33554432"; do
    assert_contains "$info" "$want" "nbdinfo"
done
list=$(assert_ok nbdinfo --list "nbd://$(cat "$HOME_DIR/nbd.addr")")
assert_contains "$list" 'export="tank/vol"' "OPT_LIST"
assert_contains "$list" 'export="tank/thick"' "OPT_LIST"
map=$(assert_ok nbdinfo --map "$U")
echo "$map"
assert_eq "$(echo "$map" | awk '{print $1, $2, $4}')" "0 268435456 hole,zero" "sparse volume maps as one hole"
unix_info=$(assert_ok nbdinfo "nbd+unix:///tank/vol?socket=$HOME_DIR/nbd.sock")
assert_contains "$unix_info" "export-size: 268435456" "unix socket export"

note "nbdcopy round trip with checksums"
head -c 48M /dev/urandom >"$TMP/in.bin"
assert_ok nbdcopy "$TMP/in.bin" "$U"
assert_ok nbdcopy "$U" "$TMP/out.bin"
assert_eq "$(head -c 48M "$TMP/out.bin" | sha256sum | cut -d' ' -f1)" \
    "$(sha256sum <"$TMP/in.bin" | cut -d' ' -f1)" "nbdcopy round trip"
assert_eq "$(tail -c +$((48 * 1048576 + 1)) "$TMP/out.bin" | tr -d '\0' | wc -c)" 0 "rest of the volume reads zeros"
map=$(assert_ok nbdinfo --map "$U")
echo "$map"
assert_eq "$(echo "$map" | awk '{print $1, $2, $4}' | tr '\n' ';')" \
    "0 50331648 data;50331648 218103808 hole,zero;" "map after the copy (dirty data seen)"

note "nbdsh: every command and flag"
assert_ok nbdsh --base-allocation -u "$U" -c '
import errno
assert h.can_flush() and h.can_fua() and h.can_trim() and h.can_zero()
assert h.can_fast_zero() and h.can_multi_conn()
assert h.can_meta_context("base:allocation")
size = h.get_size()
assert size == 256 << 20
data = bytes(range(256)) * 64
h.pwrite(data, 1 << 20, nbd.CMD_FLAG_FUA)
assert h.pread(len(data), 1 << 20) == data
h.flush()
h.trim(8 << 20, 16 << 20)
h.trim(1 << 20, 40 << 20, nbd.CMD_FLAG_FUA)
assert h.pread(4096, 20 << 20) == bytes(4096)
h.zero(1 << 20, 30 << 20, nbd.CMD_FLAG_FAST_ZERO)
h.zero(1 << 20, 32 << 20, nbd.CMD_FLAG_NO_HOLE | nbd.CMD_FLAG_FUA)
assert h.pread(1 << 20, 30 << 20) == bytes(1 << 20)
h.flush()
ext = []
def cb(meta, off, entries, err):
    ext.extend(zip(entries[0::2], entries[1::2]))
h.block_status(48 << 20, 0, cb)
M = 1 << 20
# nbdcopy filled 0..48M; TRIM 16-24M and 40-41M, ZERO 30-31M and 32-33M.
want = [(16*M, 0), (8*M, 3), (6*M, 0), (M, 3), (M, 0), (M, 3), (7*M, 0), (M, 3), (7*M, 0)]
assert ext == want, ext
one = []
h.block_status(64 << 20, 0, lambda m, o, e, err: one.extend(e), nbd.CMD_FLAG_REQ_ONE)
assert len(one) == 2, one
# libnbd checks ranges itself unless told not to: let the server answer.
h.set_strict_mode(0)
for op, args, code in [
    ("pread", (8, size - 4), errno.EINVAL),
    ("pwrite", (b"x" * 8, size - 4), errno.ENOSPC),
    ("trim", (8, size), errno.EINVAL),
    ("zero", (4096, size - 1), errno.ENOSPC),
]:
    try:
        getattr(h, op)(*args)
        raise SystemExit(op + " past the end succeeded")
    except nbd.Error as e:
        assert e.errnum == code, (op, e.errnum, e)
print("nbdsh ok")
'

note "trimmed space is freed in the pool"
assert_ok "$C" pool sync tank
before=$("$C" get -Hp referenced tank/vol | cut -f3)
assert_ok nbdsh -u "$U" -c 'h.trim(32 << 20, 0); h.flush()'
assert_ok "$C" pool sync tank
assert_ok "$C" pool sync tank
after=$("$C" get -Hp referenced tank/vol | cut -f3)
note "referenced $before -> $after"
((after + 20 * 1048576 < before)) || fail "trim freed too little: $before -> $after"
map=$(assert_ok nbdinfo --map "$U")
assert_eq "$(echo "$map" | head -1 | awk '{print $1, $2, $4}')" "0 34603008 hole,zero" "map after TRIM (0-32M trimmed, 32-33M zeroed)"

note "qemu-img convert/compare, qemu-io"
head -c 16M /dev/urandom >"$TMP/q.raw"
assert_ok qemu-img convert -n -f raw -O raw "$TMP/q.raw" "$U"
assert_ok qemu-img convert -f raw -O raw "$U" "$TMP/back.raw"
head -c 16M "$TMP/back.raw" | cmp - "$TMP/q.raw" || fail "qemu-img convert round trip differs"
out=$(assert_ok qemu-img compare -f raw -F raw "$TMP/back.raw" "$U")
assert_contains "$out" "Images are identical" "qemu-img compare"
head -c 4096 /dev/urandom | dd of="$TMP/back.raw" bs=4096 seek=1000 conv=notrunc status=none
if qemu-img compare -f raw -F raw "$TMP/back.raw" "$U" >/dev/null 2>&1; then
    fail "qemu-img compare missed a difference"
fi
out=$(assert_ok qemu-io -f raw -c 'write -P 0xa5 -f 32M 64k' -c 'flush' -c 'read -P 0xa5 32M 64k' \
    -c 'write -z -n -u 33M 1M' -c 'read -P 0 33M 1M' -c 'discard 34M 1M' -c 'read -P 0 34M 1M' "$U")
echo "$out"
[[ $out != *"Pattern verification failed"* ]] || fail "qemu-io pattern mismatch"

note "fio nbd engine with verify=crc32c"
out=$(assert_ok fio --name=nbdverify --ioengine=nbd --uri="$U" --rw=randwrite --bs=16k \
    --size=32M --offset=64M --iodepth=8 --verify=crc32c --do_verify=1 --verify_fatal=1 --verify_state_save=0)
echo "$out" | grep -E "err=|IOPS" || true
assert_contains "$out" "err= 0" "fio verify"

note "snapshots are served read-only"
assert_ok nbdsh -u "$U" -c 'h.pwrite(b"snap" * 1024, 0, nbd.CMD_FLAG_FUA)'
assert_ok "$C" snapshot tank/vol@s1
assert_ok nbdsh -u "$U" -c 'h.pwrite(b"head" * 1024, 0, nbd.CMD_FLAG_FUA)'
sinfo=$(assert_ok nbdinfo "$(nbd_uri tank/vol@s1)")
assert_contains "$sinfo" "is_read_only: true" "snapshot export"
assert_ok nbdsh -u "$(nbd_uri tank/vol@s1)" -c '
import errno
assert h.is_read_only()
assert h.pread(8, 0) == b"snapsnap"
try:
    h.pwrite(b"x", 0)
    raise SystemExit("write to a snapshot succeeded")
except nbd.Error as e:
    assert e.errnum == errno.EPERM, e.errnum
'

note "clones and received copies of a volume are volumes with its contents"
assert_ok "$C" clone tank/vol@s1 tank/clone
assert_ok "$C" send tank/vol@s1 >"$TMP/vol.stream"
assert_ok "$C" receive tank/copy <"$TMP/vol.stream"
for v in tank/clone tank/copy; do
    assert_eq "$("$C" get -Hp volsize "$v" | cut -f3)" 268435456 "$v volsize"
    assert_ok nbdsh -u "$(nbd_uri "$v")" -c 'assert h.pread(8, 0) == b"snapsnap"; assert not h.is_read_only()'
done
assert_ok "$C" destroy tank/clone
assert_ok "$C" destroy -r tank/copy

note "online grow: new connections see the new size"
assert_ok "$C" set volsize=512M tank/vol
assert_contains "$(assert_ok nbdinfo "$U")" "export-size: 536870912" "grown volume"
assert_fails "$C" set volsize=128M tank/vol

note "share list shows clients; sharenbd=off disconnects at once"
# A client that keeps reading until its connection is closed.
/usr/bin/python3 - "$U" "$TMP/watch" <<'EOF' &
import nbd, sys, time
h = nbd.NBD(); h.connect_uri(sys.argv[1])
open(sys.argv[2] + ".up", "w").close()
try:
    for _ in range(600):
        h.pread(512, 0); time.sleep(0.05)
    open(sys.argv[2] + ".timeout", "w").close()
except nbd.Error:
    open(sys.argv[2] + ".closed", "w").close()
EOF
watcher=$!
for _ in $(seq 100); do [[ -e $TMP/watch.up ]] && break; sleep 0.1; done
shares=$(assert_ok "$C" share list)
echo "$shares"
assert_contains "$shares" "PATH-OR-TARGET" "share list header"
row=$("$C" share list -H | grep "^tank/vol	")
assert_eq "$(echo "$row" | cut -f2,3,5)" "nbd	tank/vol	online" "share list row"
assert_contains "$(echo "$row" | cut -f4)" "127.0.0.1:" "share list shows the client"
assert_ok "$C" set sharenbd=off tank/vol
for _ in $(seq 100); do [[ -e $TMP/watch.closed ]] && break; sleep 0.1; done
wait "$watcher" || true
[[ -e $TMP/watch.closed ]] || fail "client not disconnected after sharenbd=off"
if nbdinfo "$U" >/dev/null 2>&1; then fail "served after sharenbd=off"; fi
assert_ok "$C" inherit sharenbd tank/vol

note "destroying a served volume stops serving it"
assert_ok "$C" create -V 16M -s tank/gone
/usr/bin/python3 - "$(nbd_uri tank/gone)" "$TMP/gone" <<'EOF' &
import nbd, sys, time
h = nbd.NBD(); h.connect_uri(sys.argv[1])
open(sys.argv[2] + ".up", "w").close()
try:
    for _ in range(600):
        h.pread(512, 0); time.sleep(0.05)
except nbd.Error:
    open(sys.argv[2] + ".closed", "w").close()
EOF
watcher=$!
for _ in $(seq 100); do [[ -e $TMP/gone.up ]] && break; sleep 0.1; done
# A destroy refused for another reason (a held snapshot) leaves the client
# connected: nothing changes on a refusal.
assert_ok "$C" snapshot tank/gone@keep
assert_ok "$C" hold keep tank/gone@keep
assert_fails "$C" destroy -r tank/gone
sleep 0.5
[[ -e $TMP/gone.closed ]] && fail "a refused destroy disconnected the volume's client"
assert_ok "$C" release keep tank/gone@keep
assert_ok "$C" destroy -r tank/gone
for _ in $(seq 100); do [[ -e $TMP/gone.closed ]] && break; sleep 0.1; done
wait "$watcher" || true
[[ -e $TMP/gone.closed ]] || fail "client of a destroyed volume not disconnected"

note "analytics: nbd.ops by op"
ops=$(assert_ok "$C" analytics show nbd.ops --by op --last 300s)
echo "$ops"
for op in read write flush trim write_zeroes block_status; do
    assert_contains "$ops" "$op" "nbd.ops has $op"
done

note "a flushed write survives kill -9"
head -c 4M /dev/urandom >"$TMP/durable.bin"
assert_ok nbdcopy --flush "$TMP/durable.bin" "$U"
assert_ok nbdsh -u "$U" -c 'h.pwrite(b"F" * 65536, 8 << 20, nbd.CMD_FLAG_FUA)'
kill9_daemon
start_daemon
U=$(nbd_uri tank/vol)
assert_ok nbdcopy "$U" "$TMP/after.bin"
head -c 4M "$TMP/after.bin" | cmp - "$TMP/durable.bin" || fail "flushed data lost after kill -9"
assert_ok nbdsh -u "$U" -c 'assert h.pread(65536, 8 << 20) == b"F" * 65536'
assert_eq "$("$C" get -Hp volsize tank/vol | cut -f3)" 536870912 "grown size kept"
stop_daemon
note "nbd e2e passed"
