#!/usr/bin/env bash
# CPU cost of one NBD row: the daemon's user+sys CPU seconds (/proc/PID/stat fields
# 14+15) while fio's nbd engine runs RW in BS requests (iodepth 16; writes flush
# every 64 and at the end) on a sparse 16K volume, the txg committed before the
# second reading. Reads first fill the volume (1 MiB writes, committed, not
# counted), so they read data from the ARC. On a machine whose cores are shared,
# CPU per byte or per request predicts throughput better than a timed run.
#
#   [RW=write] [BS=1M] [SIZE=1024] [PERF=FILE] \
#     scripts/bench-nbd-cpu.sh [CACHALOT_BINARY] [PROPERTY=VALUE...]
#   e.g. scripts/bench-nbd-cpu.sh target/ci/cachalot sync=disabled
#        RW=randread BS=16k SIZE=256 scripts/bench-nbd-cpu.sh
#
# RW is sequential (write, read: SIZE MiB once) or random (randwrite, randread:
# SIZE MiB worth of requests). PERF=FILE records `perf record` (PERF_OPTS, by default
# DWARF call graphs: the binary has no frame pointers) of the daemon
# during the row into FILE.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
B=${1:-$REPO/target/ci/cachalot}
shift || true
RW=${RW:-write}
BS=${BS:-1M}
SIZE=${SIZE:-1024}
W=$(mktemp -d /var/tmp/bench-nbd-cpu.XXXXXX)
DP=
PP=
cleanup() {
    [[ -z $PP ]] || { kill -INT "$PP" 2>/dev/null || true; wait "$PP" 2>/dev/null || true; }
    [[ -z $DP ]] || { kill "$DP" 2>/dev/null || true; wait "$DP" 2>/dev/null || true; }
    rm -rf "$W"
}
trap cleanup EXIT
mkdir -p "$W/home"
export CACHALOT_SOCKET=$W/home/cachalot.sock
"$B" serve --home "$W/home" --http none --iscsi off --nfs off --nbd 127.0.0.1:0 >"$W/daemon.log" 2>&1 &
DP=$!
for _ in $(seq 100); do [[ -s $W/home/nbd.addr ]] && break; sleep 0.1; done
"$B" pool create -s $((SIZE * 2 + 512))M tank "$W/pool.img" >/dev/null
"$B" create -V "${SIZE}M" -s -b 16K tank/vol
"$B" set sharenbd=on tank/vol
for p in "$@"; do "$B" set "$p" tank/vol; done
U="nbd://$(cat "$W/home/nbd.addr")/tank/vol"
if [[ $RW == *read* ]]; then
    fio --name=fill --ioengine=nbd --uri="$U" --rw=write --bs=1M --size="${SIZE}M" \
        --iodepth=8 --end_fsync=1 --output-format=terse >/dev/null 2>&1
    "$B" snapshot tank/vol@filled >/dev/null
    extra=()
else
    extra=(--fsync=64 --end_fsync=1)
fi
tck=$(getconf CLK_TCK)
cpu() { awk -v t="$tck" '{ print ($14 + $15) / t }' "/proc/$DP/stat"; }
if [[ -n ${PERF:-} ]]; then
    perf record -q ${PERF_OPTS:---call-graph dwarf,16384 -F 999} -p "$DP" -o "$PERF" 2>/dev/null &
    PP=$!
    sleep 0.5
fi
c0=$(cpu)
out=$(fio --name=w --ioengine=nbd --uri="$U" --rw="$RW" --bs="$BS" --size="${SIZE}M" --iodepth=16 \
    --randrepeat=0 "${extra[@]}" --output-format=json 2>/dev/null |
    python3 -c "
import sys, json
t = sys.stdin.read()
j = json.loads(t[t.index('{'):])['jobs'][0]
d = j['write' if 'write' in '$RW' else 'read']
print(d['total_ios'], round(d['io_bytes'] / 1048576, 1), round(d['bw'] / 1024, 1), round(d['iops']))")
[[ $RW == *read* ]] || "$B" snapshot tank/vol@end >/dev/null # commits the txg: its CPU is counted
c1=$(cpu)
if [[ -n $PP ]]; then
    kill -INT "$PP"
    wait "$PP" 2>/dev/null || true
    PP=
fi
read -r ios mib bw iops <<<"$out"
python3 -c "
cpu = $c1 - $c0
print(f'$RW $BS: cpu_s={cpu:.2f} us_per_req={cpu * 1e6 / $ios:.1f} ms_per_MiB={cpu * 1e3 / $mib:.3f}' +
      f' MiB/s=$bw IOPS=$iops props=${*:-defaults}')"
