#!/usr/bin/env bash
# Checks that `rust-version` in the workspace Cargo.toml is true:
#   1. it is at least the rust-version of every locked dependency (cargo refuses
#      to build a dependency on an older compiler, so a lower value would lie);
#   2. the toolchain in use is not older than it.
# The code's own use of the standard library is checked against it by clippy's
# `incompatible_msrv` lint (on by default; `make lint` runs clippy with -D warnings),
# which flags any std API stabilised after rust-version.
# Prints one line per finding; exits 1 if rust-version is not true.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"

declared=$(sed -n '/^\[workspace.package\]/,/^\[/s/^rust-version *= *"\([0-9.]*\)".*/\1/p' Cargo.toml)
[[ -n $declared ]] || {
    echo "Cargo.toml: no rust-version in [workspace.package]"
    exit 1
}
host=$(rustc -vV | sed -n 's/^host: //p')
cargo metadata --format-version 1 --locked --filter-platform "$host" |
    python3 -c '
import json, subprocess, sys
declared = sys.argv[1]
def key(v):
    return tuple(int(x) for x in (v.split(".") + ["0", "0"])[:3])
meta = json.load(sys.stdin)
# Only packages in the resolved build graph of this platform count.
ids = {n["id"] for n in meta["resolve"]["nodes"]}
need = max((key(p.get("rust_version") or "0"), p.get("rust_version"), p["name"] + " " + p["version"])
           for p in meta["packages"] if p["id"] in ids and p["source"])
rustc = subprocess.run(["rustc", "--version"], capture_output=True, text=True).stdout.split()[1]
ok = True
if key(declared) < need[0]:
    print(f"rust-version {declared} is false: {need[2]} needs rust {need[1]}")
    ok = False
if key(rustc) < key(declared):
    print(f"rustc {rustc} is older than rust-version {declared}")
    ok = False
if ok:
    print(f"rust-version {declared}: newest dependency requirement {need[1]} ({need[2]}), rustc {rustc}")
sys.exit(0 if ok else 1)
' "$declared"
