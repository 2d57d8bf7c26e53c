#!/usr/bin/env bash
# timeout: 240
# The contract of tests/guest/run-in-guest.sh that the protocol tests rely on, in
# two guest boots: SCRIPT's arguments and environment arrive intact; its stdout and
# stderr come back, markers stripped, the last line even without a newline; its
# exit status is returned; host files are visible, --share is writable, other
# writes stay in the guest; ext4 and loop load on demand; a server on the host's
# 127.0.0.1 is reached at 10.0.2.2 (and sees 127.0.0.1); and a guest past
# --timeout is killed (124). --tap is checked by test_guest_two_clients.sh.
source "$(dirname "${BASH_SOURCE[0]}")/guest_lib.sh"
guest_private_namespaces "$@"
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
guest_lib_init

T=$(mktmp)
mkdir -p "$T/share"
echo "hello from the host" >"$T/host-file"
TRICKY='a b "c" $d '\''e'\'''
ECHO_PORT=7007
start_peer echo-server python3 -c '
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1])))
s.listen(4)
while True:
    c, peer = s.accept()
    line = c.makefile().readline().strip()
    c.sendall(("pong: %s from %s\n" % (line, peer[0])).encode())
    c.close()
' "$ECHO_PORT"
wait_port "$ECHO_PORT"

note "boot 1: the contract"
rc=0
out=$("$GUEST_RUNNER" --name harness-guest --share "$T/share" \
    --env TRICKY="$TRICKY" --env HOST_FILE="$T/host-file" --env SHARE="$T/share" \
    --env ECHO_PORT="$ECHO_PORT" --console "$ARTIFACTS/guest-console.log" \
    "$GUEST_LIB_DIR/guest/harness.sh" one 'two words' '*' 2>"$T/err") || rc=$?
printf '%s\n' "$out" | tee "$ARTIFACTS/guest-output.log"
cat "$T/err" >&2
assert_eq "$rc" 7 "the script's exit status"
for want in out-line err-line 'arg[one]' 'arg[two words]' 'arg[*]' "env[$TRICKY]" \
    "host=10.0.2.2 guest=1 name=harness-guest pwd=$PWD" 'host-file[hello from the host]' \
    'overlay-write ok' ext4-mounted 'reply[pong: ping from 127.0.0.1]'; do
    assert_contains "$out" "$want" "guest output"
done
assert_eq "$(printf '%s\n' "$out" | tail -n 1)" no-newline "last line without a newline"
[[ $out != *@@CACHALOT* ]] || fail "a marker leaked into the output"
[[ $out != *"ext4 was loaded at boot"* ]] || fail "ext4 should load on demand, not at boot"
assert_contains "$(cat "$T/err")" "harness.sh exited with 7" "runner's summary"
assert_eq "$(cat "$T/share/written" 2>/dev/null)" from-guest "file written to --share"
[[ ! -e $T/host-file.guest-copy ]] || fail "a write outside --share reached the host"

note "boot 2: --timeout"
printf 'echo sleeping\nsleep 600\n' >"$T/sleep.sh"
rc=0
start=$(date +%s)
"$GUEST_RUNNER" --timeout 10 --name timeout-probe "$T/sleep.sh" >/dev/null 2>"$T/err2" || rc=$?
cat "$T/err2" >&2
assert_eq "$rc" 124 "exit status of a guest past --timeout"
assert_contains "$(cat "$T/err2")" "timed out after 10 s" "runner's message"
(($(date +%s) - start < 30)) || fail "the timed-out guest took $(($(date +%s) - start)) s to end"
if pgrep -f 'cachalot.name=timeout-probe' >/dev/null; then
    fail "QEMU still runs after the timeout"
fi
echo "run-in-guest contract holds"
