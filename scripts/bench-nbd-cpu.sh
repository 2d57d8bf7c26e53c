#!/usr/bin/env bash
# CPU cost of NBD writes: the daemon's user+sys CPU seconds (/proc/PID/stat fields
# 14+15) for fio's nbd engine writing 1 GiB sequentially in 1 MiB requests
# (iodepth 16, a flush every 64 and at the end) to a sparse 16K volume, the txg
# committed before the second reading. On a machine whose cores are shared, CPU
# per byte predicts throughput better than a timed run.
#
#   scripts/bench-nbd-cpu.sh [CACHALOT_BINARY] [PROPERTY=VALUE...]
#   e.g. scripts/bench-nbd-cpu.sh target/ci/cachalot sync=disabled
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
B=${1:-$REPO/target/ci/cachalot}
shift || true
W=$(mktemp -d /var/tmp/bench-nbd-cpu.XXXXXX)
DP=
cleanup() {
    [[ -z $DP ]] || { kill "$DP" 2>/dev/null || true; wait "$DP" 2>/dev/null || true; }
    rm -rf "$W"
}
trap cleanup EXIT
mkdir -p "$W/home"
export CACHALOT_SOCKET=$W/home/cachalot.sock
"$B" serve --home "$W/home" --http none --iscsi off --nfs off --nbd 127.0.0.1:0 >"$W/daemon.log" 2>&1 &
DP=$!
for _ in $(seq 100); do [[ -s $W/home/nbd.addr ]] && break; sleep 0.1; done
"$B" pool create -s 2560M tank "$W/pool.img" >/dev/null
"$B" create -V 1024M -s -b 16K tank/vol
"$B" set sharenbd=on tank/vol
for p in "$@"; do "$B" set "$p" tank/vol; done
U="nbd://$(cat "$W/home/nbd.addr")/tank/vol"
tck=$(getconf CLK_TCK)
cpu() { awk -v t="$tck" '{ print ($14 + $15) / t }' "/proc/$DP/stat"; }
c0=$(cpu)
bw=$(fio --name=w --ioengine=nbd --uri="$U" --rw=write --bs=1M --size=1024M --iodepth=16 \
    --fsync=64 --end_fsync=1 --output-format=json 2>/dev/null |
    python3 -c "import sys, json; t = sys.stdin.read(); j = json.loads(t[t.index('{'):]); print(round(j['jobs'][0]['write']['bw'] / 1024, 1))")
"$B" snapshot tank/vol@end >/dev/null # commits the txg: its CPU is counted
c1=$(cpu)
echo "cpu_s_per_GiB=$(python3 -c "print(round($c1 - $c0, 2))") MiB/s=$bw props=${*:-defaults}"
