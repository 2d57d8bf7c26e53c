#!/usr/bin/env bash
# timeout: 180
# Replication between two appliances: two daemons, each in its own network
# namespace, joined by a veth pair (real TCP over TLS between them). Pairing
# with a one-time token; a relationship whose cycles survive a kill -9 of the
# sender, a kill -9 of the receiver and an `ip link set down` of the veth, each
# in the middle of a transfer (the next cycle resumes from the receiver's token
# and the files match the source's checksums); a token the source can no longer
# honour is discarded with a message; holds on both sides; break and resync;
# break and reverse (failback: B becomes the source toward A);
# scheduled cycles with retention on both sides; a wrong key, a diverged target
# and a peer speaking another protocol are refused with one line and change
# nothing. REPL_BENCH=SIZE runs the throughput measurement instead (see below).
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/e2e/repl_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/repl_lib.sh"

repl_push_nodes
source_on_a
mkdir -p "$T/dst"

note "pairing: a one-time token; wrong or reused tokens and non-replication peers are refused"
tok=$(assert_ok CB replication pair)
assert_fails CA replication pair "$TARGET" 0123456789abcdef0123456789abcdef
assert_contains "$LAST_STDERR" "token is wrong, used or expired" "wrong token"
assert_ok CA replication pair "$TARGET" "$tok"
assert_fails CA replication pair "$TARGET" "$tok"
assert_contains "$LAST_STDERR" "token is wrong, used or expired" "reused token"
keyB=$(CA replication peers -H | cut -f1)
[[ ${#keyB} == 64 ]] || fail "no pinned key for B: $keyB"
assert_eq "$(CB replication peers -H | wc -l)" 1 "B pinned A"

# REPL_BENCH=SIZE (e.g. 1G): instead of the tests, measure a full transfer of
# SIZE over the veth, replication against `send | socat` / `socat | receive` on
# the same link, alternating, two rounds; then an increment with 1% of the
# records rewritten (bytes sent against bytes changed).
calc() { awk "BEGIN { printf \"%.2f\", $1 }"; }
# pipe_secs RECEIVE-ARGS...: seconds of `send tank/bench@full | socat` on A into
# `socat | receive RECEIVE-ARGS` on B.
pipe_secs() {
    local recv t0
    nsenter --net="/run/netns/$NSB" socat -u TCP-LISTEN:7490,reuseaddr STDOUT |
        CB receive "$@" &
    recv=$!
    sleep 0.3
    t0=$(date +%s.%N)
    CA send tank/bench@full | nsenter --net="/run/netns/$NSA" socat -u STDIN "TCP:$IPB:7490"
    wait "$recv"
    calc "$(date +%s.%N) - $t0"
}
if [[ -n ${REPL_BENCH:-} ]]; then
    assert_ok CA create -o recordsize=128K tank/bench
    mkdir -p "$T/bench"
    assert_ok CA mount tank/bench "$T/bench"
    head -c "$REPL_BENCH" /dev/urandom >"$T/bench/data"
    sync
    assert_ok CA snapshot tank/bench@full
    bytes=$(stat -c %s "$T/bench/data")
    assert_ok CA replication create rb --source tank/bench --target "$TARGET/tank/rb" --keep "" --paused
    for round in 1 2; do
        pipe=$(pipe_secs tank/raw)
        # The same into a resumable receive (checkpoints every 32 MiB), as
        # replication's receive always is.
        pipes=$(pipe_secs -s tank/raws)
        t2=$(date +%s.%N)
        assert_ok CA replication run rb >/dev/null
        t3=$(date +%s.%N)
        repl=$(calc "$t3 - $t2")
        note "round $round: $bytes bytes: send|socat|receive ${pipe}s ($(calc "$bytes / $pipe / 1048576") MiB/s), the same into receive -s ${pipes}s ($(calc "$bytes / $pipes / 1048576") MiB/s), replication ${repl}s ($(calc "$bytes / $repl / 1048576") MiB/s); replication/pipe throughput $(calc "$pipe / $repl")x, replication/pipe-into-receive-s $(calc "$pipes / $repl")x"
        assert_ok CB destroy -r tank/raws
        assert_ok CB destroy -r tank/raw
        assert_ok CA replication destroy rb
        assert_ok CB destroy -f "$(CB list -H -t snapshot -o name tank/rb | tail -n 1)"
        assert_ok CB destroy -r tank/rb
        for s in $(CA list -H -t snapshot -o name tank/bench | grep repl-); do assert_ok CA destroy -f "$s"; done
        assert_ok CA replication create rb --source tank/bench --target "$TARGET/tank/rb" --keep "" --paused
    done
    assert_ok CA replication run rb >/dev/null
    records=$((bytes / 131072))
    n=$((records / 100))
    for ((i = 0; i < n; i++)); do
        dd if=/dev/urandom of="$T/bench/data" bs=128K count=1 seek=$(((RANDOM * 32768 + RANDOM) % records)) conv=notrunc status=none 2>/dev/null || true
    done
    sync
    t0=$(date +%s.%N)
    out=$(assert_ok CA replication run rb)
    t1=$(date +%s.%N)
    sent=$(CA replication list -H -p rb | cut -f7)
    note "increment, $n of $records records rewritten ($((n * 131072)) bytes): sent $sent bytes ($(calc "$sent / ($n * 131072)")x the changed data) in $(calc "$t1 - $t0")s: $out"
    assert_ok CA unmount tank/bench
    stop_node A
    stop_node B
    exit 0
fi

head -c 96M /dev/urandom >"$SRC/big1"
seq 1 200000 >"$SRC/small"
sync
assert_ok CA replication create r1 --source tank/src --target "$TARGET/tank/dst" \
    --schedule 1h --keep "1h:every 5m" --bwlimit 20M
assert_fails CA replication create r1 --source tank/src --target "$TARGET/tank/dst"
assert_fails CA replication create r2 --source tank/src --target "nohost/tank/x"
assert_fails CA replication create r2 --source tank/nope --target "$TARGET/tank/x"

note "kill -9 of the sender in the middle of the first (full) transfer (at ${SECONDS}s)"
kill_mid_transfer A 0.5
out=$(assert_ok CA replication run r1 2>&1)
assert_contains "$out" "resumed the interrupted transfer" "resume after kill -9 of the sender"
assert_eq "$(token_b)" "-" "no token after the resumed cycle"
same_as_source big1 small

note "kill -9 of the receiver in the middle of an increment (at ${SECONDS}s)"
head -c 96M /dev/urandom >"$SRC/big2"
sync
kill_mid_transfer B 0.3
out=$(assert_ok CA replication run r1 2>&1)
assert_contains "$out" "resumed the interrupted transfer" "resume after kill -9 of the receiver"
same_as_source big2 small

note "the link goes down in the middle of an increment"
# 96 MiB: 3 s left after the token shows (64 MiB left 1.6 s, which a loaded
# machine missed: the cycle ended before wait_token saw a token).
head -c 96M /dev/urandom >"$SRC/big3"
sync
CA replication run r1 >"$T/cut.out" 2>&1 &
run_pid=$!
wait_token
note "link down at ${SECONDS}s"
ip -n "$NSA" link set "vA$$" down
rc=0
wait "$run_pid" || rc=$?
note "cut cycle ended after ${SECONDS}s"
((rc != 0)) || fail "a cycle over a cut link succeeded"
note "cut cycle: $(cat "$T/cut.out")"
ip -n "$NSA" link set "vA$$" up
# The receiver notices the cut within its timeout; until then it still holds
# the receive, and a cycle says so and changes nothing.
for ((i = 0; i < 10; i++)); do
    if out=$(CA replication run r1 2>&1); then break; fi
    note "retry at ${SECONDS}s: $out"
    sleep 1
done
note "resumed at ${SECONDS}s"
assert_contains "$out" "resumed the interrupted transfer" "resume after the link came back"
same_as_source big3 small
listed=$(CA replication list -H -p r1)
IFS=$'\t' read -r name src dst state lag last bytes rate role <<<"$listed"
assert_eq "$name $src $dst $state $role" "r1 tank/src $TARGET/tank/dst idle push" "list"
((lag < 60 && bytes > 0 && rate > 0)) || fail "list: lag $lag bytes $bytes rate $rate"

note "a resume token the source can no longer honour is discarded with a message"
head -c 96M /dev/urandom >"$SRC/big4"
sync
kill_mid_transfer A 0
cut=$(CA list -H -t snapshot -o name tank/src | tail -n 1)
assert_ok CA destroy -f "$cut"
out=$(assert_ok CA replication run r1 2>&1)
assert_contains "$out" "discarded the target's resume token: its snapshot '$cut' no longer exists" "stale token"
assert_contains "$(CA replication list -H -v r1)" "discarded the target's resume token" "list -v shows it"
assert_eq "$(token_b)" "-" "no token left"
same_as_source big4 small

note "holds: the newest common snapshot is held on both sides"
newest=$(CB list -H -t snapshot -o name tank/dst | tail -n 1)
assert_eq "$(CB holds -H "$newest" | cut -f2)" "repl:r1" "target hold"
assert_eq "$(CA holds -H "tank/src@${newest#*@}" | cut -f2)" "repl:r1" "source hold"
assert_fails CA destroy "tank/src@${newest#*@}"

note "a cycle refused after its snapshot (a mounted target): the next one leaves both sides the same snapshots"
# keep "": the grid keeps everything, so only the fix drops the failed cycle's.
assert_ok CA replication create rk --source tank/src --target "$TARGET/tank/dstk" --keep "" --paused
assert_ok CA replication run rk >/dev/null
assert_ok CB mount tank/dstk "$T/dst"
assert_fails CA replication run rk
assert_contains "$LAST_STDERR" "busy" "a mounted target refuses the increment"
assert_ok CB unmount tank/dstk
assert_ok CA replication run rk >/dev/null
# The failed cycle's snapshot was never sent (increments go from the newest
# common one): kept, it would hold data on the source only, and with a grid
# take its interval's place there while the target keeps another one.
assert_eq "$(CA list -H -t snapshot -o name tank/src | grep -o '@repl-rk-.*')" \
    "$(CB list -H -t snapshot -o name tank/dstk | grep -o '@repl-rk-.*')" "rk's snapshots on both sides"
assert_ok CA replication destroy rk >/dev/null

note "a diverged target is refused with one line naming the relationship, dataset and snapshot"
assert_ok CB snapshot tank/dst@mine
before=$(CB list -H -t snapshot -o name tank/dst)
assert_fails CA replication run r1
assert_contains "$LAST_STDERR" "replication r1" "diverged"
assert_contains "$LAST_STDERR" "tank/dst@mine" "diverged"
assert_eq "$(CB list -H -t snapshot -o name tank/dst)" "$before" "nothing changed on the target"
assert_contains "$(CA replication list -H r1)" "error" "state after a refused cycle"
assert_ok CB destroy tank/dst@mine
assert_ok CA replication run r1

note "break: the target is used on its own; resync lists what it destroys, refuses without -f"
assert_ok CA replication break r1
assert_eq "$(CA replication list -H r1 | cut -f4)" "broken" "state after break"
assert_fails CA replication run r1
assert_contains "$LAST_STDERR" "broken off" "run of a broken relationship"
assert_ok CB mount tank/dst "$T/dst"
echo "written after the break" >"$T/dst/failover"
assert_ok CB unmount tank/dst
assert_ok CB snapshot tank/dst@after-break
assert_fails CA replication resync r1
assert_contains "$LAST_STDERR" "tank/dst@after-break" "resync names what it would destroy"
assert_contains "$(CB list -H -t snapshot -o name tank/dst)" "tank/dst@after-break" "refused resync kept it"
out=$(assert_ok CA replication resync -f r1)
assert_contains "$out" "destroyed: tank/dst@after-break" "resync -f"
[[ $(CB list -H -t snapshot -o name tank/dst) != *after-break* ]] || fail "resync -f kept tank/dst@after-break"
assert_ok CA replication run r1 >/dev/null
same_as_source big3 small

note "a key that is not paired is refused by the listener; nothing changes"
start_node C "$NSA"
assert_ok cli C pool create -s 256M tank "$T/c.img"
assert_ok cli C create tank/x
mkdir -p "$(node_home C)/replication"
# C claims B's pin, but holds its own key: B must refuse it.
cp "$(node_home A)/replication/peers.json" "$(node_home C)/replication/"
stop_node C
start_node C "$NSA"
assert_ok cli C replication create rc --source tank/x --target "$TARGET/tank/fromc"
assert_fails cli C replication run rc
assert_contains "$LAST_STDERR" "not paired with key" "unpaired key"
assert_fails CB list tank/fromc
stop_node C

note "a peer speaking another protocol is refused with one line"
assert_fails CA replication pair "$IPB:9" 0123456789abcdef0123456789abcdef
nsenter --net="/run/netns/$NSA" bash -c \
    "exec 3<>/dev/tcp/$IPB/$PORT; printf 'GET / HTTP/1.0\r\n\r\n' >&3; timeout 5 cat <&3 >/dev/null" || true
grep -q "replication: refused a connection" "$ARTIFACTS/daemon.log" ||
    fail "the listener did not log the refusal of a non-TLS peer"
_alive "${PID[B]}" || fail "node B died on a foreign peer"

note "scheduled cycles (every second) with retention on both sides"
assert_ok CA create tank/sched
assert_ok CA replication create r2 --source tank/sched --target "$TARGET/tank/sched" \
    --schedule 1s --keep "5s:every 5s"
# At least 6 s, so the first snapshots age out of the 5 s rule; then until
# three cycles have run. (A cycle is due a second after the last one started,
# but one may take over a second on a loaded machine: 6 cycles ran in 6 s under
# load 15, a 2x slower machine would have had 3 at most.)
sleep 6
r2_cycles() { grep -c "replication r2: sent" "$ARTIFACTS/daemon.log" || true; }
r2_cycled_3() { (($(r2_cycles) >= 3)); }
wait_until 30 "3 scheduled cycles of r2 at a 1 s schedule" r2_cycled_3
assert_ok CA replication pause r2
# A cycle running at the pause goes on (state "running"): wait for its end
# rather than a fixed 1.5 s, which a slow cycle on a loaded machine overran.
r2_paused() { [[ $(CA replication list -H r2 | cut -f4) == paused ]]; }
wait_until 60 "r2's last cycle ends after the pause" r2_paused
nsrc=$(CA list -H -t snapshot -o name tank/sched | wc -l)
ndst=$(CB list -H -t snapshot -o name tank/sched | wc -l)
note "after $(r2_cycles) cycles at a 1 s schedule: $nsrc snapshots on the source, $ndst on the target"
((nsrc >= 1 && nsrc <= 3 && ndst >= 1 && ndst <= 3)) ||
    fail "retention: $nsrc source and $ndst target snapshots (expected 1 to 3)"
state=$(CA replication list -H r2 | cut -f4)
assert_eq "$state" "paused" "paused"
last_src=$(CA list -H -t snapshot -o name tank/sched | tail -n 1)
last_dst=$(CB list -H -t snapshot -o name tank/sched | tail -n 1)
assert_eq "${last_dst#*@}" "${last_src#*@}" "newest snapshot on both sides"

note "analytics: bytes (sent and received) and cycles by relationship, lag samples"
out=$(assert_ok CA analytics show replication.cycles --by relationship -H -p)
assert_contains "$out" "r2" "source: cycles of r2"
out=$(assert_ok CA analytics show replication.bytes --by relationship -H -p)
assert_contains "$out" "r2" "source: bytes r2 sent"
out=$(assert_ok CB analytics show replication.bytes --by relationship -H -p)
assert_contains "$out" "r2" "target: bytes of r2 received, under the source's name for it"
# Sampled every 10 s: r1 has had a recovery point for longer than that.
out=$(assert_ok CA analytics show replication.lag --by relationship -H -p)
assert_contains "$out" "r1" "lag samples of r1"
note "lagging: past twice the schedule with the link down; not while paused"
ip -n "$NSA" link set "vA$$" down
assert_ok CA replication resume r2
lagging() { CA debug call repl.list '{"name":"r2"}' | tr -d ' \n' | grep -o '"lagging":[a-z]*'; }
# A cycle still running at the pause may have finished since (a fresh recovery
# point); with the link down no cycle can succeed now, so the lag passes two
# schedules within seconds.
for ((i = 0; i < 40; i++)); do
    [[ $(lagging) == '"lagging":true' ]] && break
    sleep 0.25
done
assert_eq "$(lagging)" '"lagging":true' "r2 resumed with the link down"
assert_ok CA replication pause r2
assert_eq "$(lagging)" '"lagging":false' "r2 paused"
ip -n "$NSA" link set "vA$$" up
assert_ok CA replication destroy r2
assert_fails CA replication run r2

note "reverse: failback after a break; B becomes the source toward A, A rolled back only with -f"
stop_node A
start_node A "$NSA" --replication "$IPA:$PORT"
assert_ok CA replication break r1
# tank/src stays mounted at $SRC across A's restart.
diverge_for_failback
assert_fails CA replication reverse --address "$IPA:$PORT" r1
assert_contains "$LAST_STDERR" "tank/src@mine-a" "reverse names what A would lose"
assert_ok CA replication list r1 >/dev/null
out=$(assert_ok CA replication reverse -f --address "$IPA:$PORT" r1)
assert_contains "$out" "destroyed: tank/src@mine-a" "reverse -f lists what it destroyed"
assert_fails CA replication list r1
assert_contains "$(CB replication list -H r1)" "tank/dst" "B holds the reversed r1"
assert_ok CB replication run r1 >/dev/null
assert_ok CA mount tank/src "$SRC"
assert_eq "$(cat "$SRC/failback")" "written on B after the failover" "B's write reached A"
[[ ! -e $SRC/lost ]] || fail "A's own write survived the rollback"
assert_ok CA unmount tank/src

stop_node A
stop_node B
