#!/usr/bin/env bash
# NBD benchmark: fio's nbd engine against our NBD server (a sparse 16K volume on a
# file pool) and, in the same run on the same ext4 disk, nbdkit's file plugin and
# qemu-nbd serving a raw file. Rows: 16K random read, 16K random write, 1 MiB
# sequential read and write; writes flush every 64 requests and at the end, and
# every peer honours flushes (nbdkit file: fdatasync; qemu-nbd: cache=writeback,
# flush = fdatasync), so sync writes are durable everywhere.
#
#   scripts/bench-nbd.sh [OUT_DIR]      (needs target/ci/cachalot; root)
#
# Prints a markdown table with IOPS/bandwidth and our ratio to the best peer.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
C=${CACHALOT:-$REPO/target/ci/cachalot}
OUT=${1:-$(mktemp -d /tmp/bench-nbd.XXXXXX)}
SIZE=${SIZE:-1024}          # MiB of data per target
RUNTIME=${RUNTIME:-15}      # seconds per row
# ROWS="randread 16k,write 1M" runs only those rows.
IFS=, read -r -a ROWS <<<"${ROWS:-randread 16k,randwrite 16k,read 1M,write 1M}"
export PATH=/usr/bin:$PATH
mkdir -p "$OUT"
WORK=$(mktemp -d /var/tmp/bench-nbd.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Ours.
export CACHALOT_SOCKET=$WORK/home/cachalot.sock
mkdir -p "$WORK/home"
"$C" serve --home "$WORK/home" --http none --nbd 127.0.0.1:0 >"$OUT/daemon.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do [[ -s $WORK/home/nbd.addr ]] && break; sleep 0.1; done
"$C" pool create -s $((SIZE * 2 + 512))M tank "$WORK/pool.img" >/dev/null
"$C" create -V "${SIZE}M" -s -b 16K tank/vol   # default compression (lz4)
"$C" set sharenbd=on tank/vol
OURS="nbd://$(cat "$WORK/home/nbd.addr")/tank/vol"

# nbdkit file plugin and qemu-nbd on raw files of the same disk.
truncate -s "${SIZE}M" "$WORK/nbdkit.raw" "$WORK/qemu.raw"
P1=$(free_port)
nbdkit -f -i 127.0.0.1 -p "$P1" file "$WORK/nbdkit.raw" &
pids+=($!)
P2=$(free_port)
qemu-nbd -t -f raw -b 127.0.0.1 -p "$P2" -x qemu --cache=writeback --discard=unmap \
    --shared=8 "$WORK/qemu.raw" &
pids+=($!)
NBDKIT="nbd://127.0.0.1:$P1/"
QEMU="nbd://127.0.0.1:$P2/qemu"
for u in "$NBDKIT" "$QEMU"; do
    for _ in $(seq 100); do nbdinfo --size "$u" >/dev/null 2>&1 && break; sleep 0.1; done
    nbdinfo --size "$u" >/dev/null || { echo "peer $u did not start" >&2; exit 1; }
done

run() { # name uri rw bs -> prints "iops bw_MiBs"
    local name=$1 uri=$2 rw=$3 bs=$4 extra=()
    [[ $rw == *write* ]] && extra=(--fsync=64 --end_fsync=1)
    fio --name="$name" --ioengine=nbd --uri="$uri" --rw="$rw" --bs="$bs" \
        --size="${SIZE}M" --iodepth=16 --time_based --runtime="$RUNTIME" \
        --randrepeat=0 --output-format=json "${extra[@]}" >"$OUT/$name.json"
    python3 - "$OUT/$name.json" "$rw" <<'EOF'
import json, sys
text = open(sys.argv[1]).read()
j = json.loads(text[text.index("{"):])["jobs"][0]  # fio's nbd engine prints a line first
d = j["write" if "write" in sys.argv[2] else "read"]
print(f'{d["iops"]:.0f} {d["bw"] / 1024:.1f}')
EOF
}

# Fill every target first so reads read data, not holes.
for t in "ours=$OURS" "nbdkit=$NBDKIT" "qemu=$QEMU"; do
    fio --name="fill-${t%%=*}" --ioengine=nbd --uri="${t#*=}" --rw=write --bs=1M --size="${SIZE}M" \
        --iodepth=8 --end_fsync=1 --output-format=terse >/dev/null
done

{
    echo "| row | cachalot | nbdkit file | qemu-nbd | ratio to best peer |"
    echo "|---|---|---|---|---|"
    for row in "${ROWS[@]}"; do
        read -r rw bs <<<"$row"
        set -- "$rw" "$bs"
        o=$(run "ours-$1-$2" "$OURS" "$1" "$2")
        k=$(run "nbdkit-$1-$2" "$NBDKIT" "$1" "$2")
        q=$(run "qemu-$1-$2" "$QEMU" "$1" "$2")
        metric=1 unit=IOPS
        [[ $2 == 1M ]] && metric=2 unit=MiB/s
        ov=$(cut -d' ' -f$metric <<<"$o")
        kv=$(cut -d' ' -f$metric <<<"$k")
        qv=$(cut -d' ' -f$metric <<<"$q")
        ratio=$(python3 -c "print(f'{$ov / max($kv, $qv):.2f}x')")
        echo "| $1 $2 ($unit) | $ov | $kv | $qv | $ratio |"
    done
} | tee "$OUT/report.md"
echo "results in $OUT"
