# Sourced by the bench scripts that run one daemon of their own on a private
# home under $WORK (logging to $OUT/daemon.log): start_bench_daemon starts it
# with a 64 MiB ARC (so the pool, not the cache, is measured), exports
# CACHALOT_SOCKET and DPID, and waits until it answers. The caller's EXIT trap
# kills $DPID.
start_bench_daemon() {
    export CACHALOT_SOCKET=$WORK/home/cachalot.sock
    mkdir -p "$WORK/home" "$WORK/mnt"
    "$C" serve --home "$WORK/home" --socket "$CACHALOT_SOCKET" --http 127.0.0.1:0 --nfs off \
        --iscsi off --arc-max 64M >"$OUT/daemon.log" 2>&1 &
    DPID=$!
    for _ in $(seq 100); do "$C" pool list >/dev/null 2>&1 && return 0; sleep 0.1; done
    echo "the daemon did not answer within 10 s (see $OUT/daemon.log)" >&2
    return 1
}
