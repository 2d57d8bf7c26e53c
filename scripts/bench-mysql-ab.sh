#!/usr/bin/env bash
# A/B of two cachalot builds on MariaDB, in one run: each build's daemon serves a
# FUSE mount of a recordsize=16K dataset on its own file pool, and `cachalot bench
# mysql` runs sysbench oltp_read_write on both, interleaved with ext4 on a loop
# device as the baseline (medians of the passes).
#
#   scripts/bench-mysql-ab.sh OLD_BINARY NEW_BINARY [extra bench mysql options]
#
# Environment: THREADS (16,64), TIME (30 s per point), ROWS (100000 per table, 8
# tables), BUFFER_POOL (128M), PASSES (2), OUT (output directory). Needs root.
set -euo pipefail
[[ $# -ge 2 ]] || { echo "usage: $0 OLD_BINARY NEW_BINARY [bench mysql options]" >&2; exit 2; }
OLD=$(realpath "$1")
NEW=$(realpath "$2")
shift 2
W=$(mktemp -d /var/tmp/bench-mysql-ab.XXXXXX)
pids=()
cleanup() {
    set +e
    for h in old new; do
        CACHALOT_SOCKET=$W/$h/home/cachalot.sock "$NEW" unmount -f tank/db 2>/dev/null
    done
    for p in "${pids[@]}"; do kill "$p"; done
    wait
    rm -rf "$W"
}
trap cleanup EXIT
for h in old new; do
    bin=$OLD
    [[ $h == new ]] && bin=$NEW
    mkdir -p "$W/$h/home" "$W/$h/pool" "$W/$h/mnt"
    env -u CACHALOT_SOCKET "$bin" serve --home "$W/$h/home" --http none --nfs off \
        --portmap off --nbd off --iscsi off >"$W/$h.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 100); do [[ -S $W/$h/home/cachalot.sock ]] && break; sleep 0.1; done
    export CACHALOT_SOCKET=$W/$h/home/cachalot.sock
    "$bin" pool create -s 12G tank "$W/$h/pool/d0" >/dev/null
    "$bin" create -o recordsize=16K tank/db
    "$bin" mount tank/db "$W/$h/mnt"
done
unset CACHALOT_SOCKET
"$NEW" bench mysql --target "old=$W/old/mnt" --target "new=$W/new/mnt" --baseline ext4:12G \
    --threads "${THREADS:-16,64}" --time "${TIME:-30}" --warmup 10 --tables 8 \
    --table-size "${ROWS:-100000}" --buffer-pool "${BUFFER_POOL:-128M}" \
    --passes "${PASSES:-2}" --out "${OUT:-/tmp/bench-mysql-ab}" "$@"
