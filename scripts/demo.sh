#!/usr/bin/env bash
# The first-run story: a file-backed pool in ./demo, the daemon, MySQL-style
# datasets, and the status page. Ctrl-C stops the daemon cleanly (it exports the
# pool) and leaves the pool files in ./demo for the next run.
#
# MariaDB on a FUSE mount of these datasets arrives with the filesystem frontend
# (issue 5); until then the demo shows the pool, datasets, properties and the web
# status page.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$PWD/target/release/cachalot
DEMO=$PWD/demo
HOME_DIR=$DEMO/home
export CACHALOT_SOCKET=$HOME_DIR/cachalot.sock
HTTP=${CACHALOT_DEMO_HTTP:-127.0.0.1:7470}

mkdir -p "$DEMO" "$HOME_DIR"
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

"$BIN" serve --home "$HOME_DIR" --socket "$CACHALOT_SOCKET" --http "$HTTP" >"$DEMO/daemon.log" 2>&1 &
DAEMON=$!
cleanup() {
    say "stopping the daemon (exports the pool cleanly)"
    kill -TERM "$DAEMON" 2>/dev/null || true
    wait "$DAEMON" 2>/dev/null || true
    echo "pool files kept in $DEMO; run 'make demo' again to re-import them"
}
trap cleanup EXIT
trap 'exit 0' INT TERM

for _ in $(seq 100); do
    "$BIN" pool list >/dev/null 2>&1 && break
    kill -0 "$DAEMON" 2>/dev/null || { cat "$DEMO/daemon.log"; exit 1; }
    sleep 0.2
done

if ! "$BIN" pool list -H tank >/dev/null 2>&1; then
    say "creating pool 'tank' on a mirror of two 1G sparse files in $DEMO"
    "$BIN" pool create -s 1G tank mirror "$DEMO/disk0.img" "$DEMO/disk1.img"
    "$BIN" create -p -o recordsize=16K -o compression=lz4 -o primarycache=all tank/mysql/data
    "$BIN" create -o recordsize=128K -o logbias=throughput tank/mysql/log
    "$BIN" set com.cachalot:role=innodb-tablespaces tank/mysql/data
else
    say "pool 'tank' re-imported from $DEMO"
fi

say "pool list"
"$BIN" pool list
say "datasets"
"$BIN" list -r -o name,used,avail,refer,recordsize,compression,mountpoint tank
say "properties of tank/mysql/data"
"$BIN" get recordsize,compression,checksum,sync,logbias,primarycache,quota,used,compressratio tank/mysql/data
say "scrub"
"$BIN" pool scrub -w tank
"$BIN" pool status tank

ADDR=$(cat "$HOME_DIR/http.addr" 2>/dev/null || echo "$HTTP")
say "web status page: http://$ADDR/   (daemon log: $DEMO/daemon.log)"
echo "Press Ctrl-C to stop."
while kill -0 "$DAEMON" 2>/dev/null; do sleep 1; done
