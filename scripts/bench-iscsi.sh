#!/usr/bin/env bash
# Read IOPS through iSCSI, ours against Debian's tgt in the same run (not part of the
# test suite; ratios are reported, never asserted). iscsi-perf, random reads of
# BLOCKS x 512 B with DEPTH requests in flight, ROUNDS interleaved rounds of SECS
# seconds against a VOL_SIZE volume (filled first) and a tgt file LUN of the same
# size and content.
#
#   scripts/bench-iscsi.sh      (needs target/ci/cachalot, root, libiscsi-bin, tgt,
#                                qemu-block-extra)
#
# Results: test-artifacts/bench-iscsi/results.txt
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../tests/e2e/lib.sh"

BLOCKS=${BLOCKS:-8}
DEPTH=${DEPTH:-16}
ROUNDS=${ROUNDS:-3}
SECS=${SECS:-8}
VOL_SIZE=${VOL_SIZE:-256M}
RESULTS=$ARTIFACTS/results.txt
: >"$RESULTS"
result() { echo "$*" | tee -a "$RESULTS" >&2; }
TMP=$(mktmp)
C=$CACHALOT
TGT_PID=
CTL_PORT=$(((RANDOM % 10000) + 20000))
stop_tgt() {
    if [[ -n $TGT_PID ]]; then
        tgtadm -C "$CTL_PORT" --op delete --mode system >/dev/null 2>&1 || true
        sleep 0.5
        kill -KILL "$TGT_PID" 2>/dev/null || true
        wait "$TGT_PID" 2>/dev/null || true
        TGT_PID=
    fi
}
trap '_b_rc=$?; set +e; stop_tgt; (exit $_b_rc); _e2e_cleanup' EXIT

start_daemon
ADDR=$(cat "$HOME_DIR/iscsi.addr")
assert_ok "$C" pool create -s 2G tank "$TMP/pool.img" >/dev/null
assert_ok "$C" create -V "$VOL_SIZE" tank/vol >/dev/null
assert_ok "$C" set shareiscsi=on tank/vol
OURS=iscsi://$ADDR/iqn.2026-11.org.cachalot:tank.vol/0
qemu-io -f raw -c "write -P 0x37 0 $VOL_SIZE" -c flush "$OURS" >/dev/null

python3 -c "import sys; open(sys.argv[1],'wb').write(b'\x37' * $(numfmt --from=iec "$VOL_SIZE"))" "$TMP/tgt.img"
TGT_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
tgtd -f -C "$CTL_PORT" --iscsi "portal=127.0.0.1:$TGT_PORT" >"$ARTIFACTS/tgtd.log" 2>&1 &
TGT_PID=$!
sleep 1
tgtadm -C "$CTL_PORT" --lld iscsi --mode target --op new --tid 1 --targetname iqn.2026-11.org.example:bench
tgtadm -C "$CTL_PORT" --lld iscsi --mode logicalunit --op new --tid 1 --lun 1 --backing-store "$TMP/tgt.img"
tgtadm -C "$CTL_PORT" --lld iscsi --mode target --op bind --tid 1 --initiator-address ALL
TGT=iscsi://127.0.0.1:$TGT_PORT/iqn.2026-11.org.example:bench/1

iops() {
    # iscsi-perf runs until interrupted: the timeout's SIGINT is the normal end.
    { timeout -s INT "$SECS" iscsi-perf -r -b "$BLOCKS" -m "$DEPTH" "$1" 2>&1 || true; } |
        tr '\r' '\n' | grep -o 'iops average [0-9]*' | tail -n 1 | awk '{ print $3 }'
}
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
: >"$TMP/ours"
: >"$TMP/tgt"
for r in $(seq "$ROUNDS"); do
    o=$(iops "$OURS")
    t=$(iops "$TGT")
    echo "$o" >>"$TMP/ours"
    echo "$t" >>"$TMP/tgt"
    result "round $r: cachalot $o IOPS, tgt $t IOPS"
done
mo=$(median <"$TMP/ours")
mt=$(median <"$TMP/tgt")
result "random $((BLOCKS * 512))-byte reads, depth $DEPTH, median of $ROUNDS x ${SECS}s: cachalot $mo IOPS, tgt $mt IOPS, ratio $(python3 -c "print(f'{$mo / $mt:.2f}')")x (load average $(cut -d' ' -f1 /proc/loadavg))"
stop_tgt
stop_daemon
