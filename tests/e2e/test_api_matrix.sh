#!/usr/bin/env bash
# timeout: 240
# The REST API's route matrix (tests/e2e/api_matrix.py), driven by the served
# /api/v1/openapi.json: every documented operation has an entry or the test fails
# with the list of those left out. Every change is refused without a token (401),
# with a revoked or never-valid one (403), with bad bodies and query strings (400:
# not JSON, unknown fields, each field of a wrong type, each required one left
# out) and with names that do not exist (404), each with its JSON error code and
# each leaving the whole state as it was (pools, datasets and snapshots with all
# properties, shares, mounts, jobs, replication, peers, tokens, files). Reads answer
# 200 with and without the token (open on loopback), 404 for a missing name.
# Then the busy refusals (409 busy, nothing changed): destroy of a dataset with a
# file open on its FUSE mount, export and destroy of its pool (the other mount the
# refused export had already unmounted is back), destroy of a snapshot with a
# clone or a hold. A mounted dataset is destroyed only with ?force=true, which
# unmounts it first (and still refuses while a file is open there).
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

C=$CACHALOT
DAEMON_ARGS=(--replication 127.0.0.1:0)
start_daemon
WORK=$(mktmp)
addr=$(cat "$HOME_DIR/http.addr")

note "the state every good request of the matrix would change"
TOKEN=$(assert_ok "$C" token create matrix)
REVOKED=$(assert_ok "$C" token create gone)
assert_ok "$C" token revoke gone
assert_ok "$C" pool create tank -s 256M "$WORK/d0.img"
assert_ok "$C" pool create extra -s 64M "$WORK/s0.img"
assert_ok "$C" pool create gone -s 64M "$WORK/g0.img"
assert_ok "$C" pool export gone
assert_ok "$C" pool create mir -s 64M mirror "$WORK/m0.img" "$WORK/m1.img" cache "$WORK/mc.img"
assert_ok "$C" create -o recordsize=16K -o sharenfs=on tank/fs
assert_ok "$C" create tank/fs2
assert_ok "$C" create tank/m
assert_ok "$C" snapshot tank/fs@s1
assert_ok "$C" snapshot tank/fs@s2
assert_ok "$C" clone tank/fs@s1 tank/cl
assert_ok "$C" create -V 16M -o shareiscsi=on -o sharenbd=on tank/vol
assert_ok "$C" create -V 16M tank/vol2
mkdir "$WORK/mnt" "$WORK/mnt2"
assert_ok "$C" mount tank/m "$WORK/mnt"
assert_ok "$C" snapshot tank/fs@held
assert_ok "$C" hold keep tank/fs@held
assert_ok "$C" create extra/a
assert_ok "$C" create extra/b
mkdir "$WORK/ea" "$WORK/eb"
assert_ok "$C" mount extra/a "$WORK/ea"
assert_ok "$C" mount extra/b "$WORK/eb"
assert_ok "$C" replication create r1 --source tank/fs --target 127.0.0.1:9/tank/copy --paused
# A mount writes to its dataset; commit that now, or the space it takes shows up
# in the middle of the matrix as a change.
assert_ok "$C" pool sync tank
assert_ok "$C" pool sync extra

python3 "$REPO/tests/e2e/api_matrix.py" "$addr" "$TOKEN" "$C" "$WORK" "$ARTIFACTS" "$REVOKED"

assert_ok "$C" unmount tank/m
assert_ok "$C" unmount extra/a
for secret in "$TOKEN" "$REVOKED"; do
    if grep -q "$secret" "$ARTIFACTS/daemon.log"; then fail "a token is in daemon.log"; fi
done
stop_daemon
echo "PASS"
