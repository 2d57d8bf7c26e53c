#!/usr/bin/env bash
# API latency at scale and the web UI's page weight (not part of make test):
#   bash scripts/api_latency.sh
# Builds a pool with 1,000 filesystems and 10,000 snapshots (10 recursive
# snapshots of the pool), then times GET /api/v1/datasets and GET /api/v1/snapshots
# over HTTP against the CLI's `list` over the unix socket on the same data (the
# baseline, same run), and sums the bytes the UI page loads, on the fresh pool
# and at the end. Each list is timed 3 times; the run takes about a minute
# (mostly creating the datasets). Until
# 2026-11-25 listing 1,000 datasets took 21-54 s (the engine's list was O(n^3));
# with store/listing.rs it takes 7 ms over HTTP (engine alone, before/after in one
# run: cargo run --profile ci -p cachalot-datasets --example list_bench).
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../tests/e2e/lib.sh"
C=$CACHALOT
start_daemon
WORK=$(mktmp)
assert_ok "$C" pool create -s 2G tank "$WORK/d0.img"
TOKEN=$(assert_ok "$C" token create bench)
python3 - "$(cat "$HOME_DIR/http.addr")" "$TOKEN" "$C" <<'PY'
import json, statistics, subprocess, sys, time, urllib.request
addr, token, cli = sys.argv[1:4]

def get(path):
    t = time.perf_counter()
    with urllib.request.urlopen(f"http://{addr}{path}", timeout=600) as r:
        body = r.read()
    return time.perf_counter() - t, body

def post(path, body):
    req = urllib.request.Request(f"http://{addr}/api/v1{path}", data=json.dumps(body).encode(), method="POST",
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=1800).read()

def page_weight(when):
    """The bytes of the UI page and its assets (the page renders the pools and
    datasets tables in, so it grows with them)."""
    weight = 0
    for p in ["/", "/ui/app.js", "/ui/app.css", "/ui/manage.js"]:
        n = len(get(p)[1])
        weight += n
        print(f"page weight {p:16s} {n:7d} bytes")
    print(f"page weight total, {when}: {weight} bytes in 4 requests (no compression, no outside resources)")


page_weight("fresh pool")
t0 = time.perf_counter()
for i in range(999):
    post("/datasets", {"name": f"tank/d{i:04d}"})
print(f"created 999 datasets over the API in {time.perf_counter() - t0:.1f}s", flush=True)
t0 = time.perf_counter()
for r in range(10):
    t1 = time.perf_counter()
    post("/snapshots", {"names": [f"tank@s{r}"], "recursive": True})
    print(f"  snapshot -r tank@s{r} (1,000 datasets): {time.perf_counter() - t1:.1f}s", flush=True)
print(f"took 10 recursive snapshots ({10 * 1000} snapshots) in {time.perf_counter() - t0:.1f}s")

def timed(label, fn, n):
    ts = sorted(fn() for _ in range(n))
    med, p90 = statistics.median(ts), ts[int(len(ts) * 0.9) - 1]
    print(f"{label:48s} median {med * 1000:8.1f} ms  p90 {p90 * 1000:8.1f} ms  (n={n})")
    return med

def cli_time(*args):
    def f():
        t = time.perf_counter()
        subprocess.run([cli, *args], check=True, capture_output=True)
        return time.perf_counter() - t
    return f

rows = json.loads(get("/api/v1/datasets")[1])
snaps = json.loads(get("/api/v1/snapshots")[1])
print(f"rows: {len(rows)} datasets, {len(snaps)} snapshots")
a = timed("GET /api/v1/datasets (1,000 datasets)", lambda: get("/api/v1/datasets")[0], 3)
b = timed("cachalot list (unix socket, same rows)", cli_time("list", "-H"), 3)
c = timed("GET /api/v1/snapshots (10,000 snapshots)", lambda: get("/api/v1/snapshots")[0], 3)
d = timed("cachalot list -t snapshot (unix socket)", cli_time("list", "-H", "-t", "snapshot"), 3)
e = timed("GET /api/v1/pools (floor)", lambda: get("/api/v1/pools")[0], 50)
print(f"ratios: datasets HTTP/CLI {a / b:.2f}, snapshots HTTP/CLI {c / d:.2f}")
page_weight("1,000 datasets in the pool's tables")
print("the manage page then fetches /api/v1/pools, /pools/NAME, /datasets, /snapshots, /shares, /replication")
PY
stop_daemon
