#!/usr/bin/env bash
# timeout: 180
# `make install` as a service, into a staging DESTDIR: exactly the binary, the
# systemd unit, the bash completion and the man page, at the paths PREFIX/UNITDIR
# say, with the unit's ExecStart pointing at the installed binary; `make uninstall`
# removes exactly those. The unit passes `systemd-analyze verify` with no warning
# (the installed binary must exist and the man page of Documentation= must be
# found). There is no running systemd here (PID 1 is not systemd), so the unit is
# not started by systemd: its own commands are run as systemd would run them
# (ExecStart, the ExecStartPost readiness wait, RestartSec, KillSignal), against a
# real daemon with a temporary home in place of /var/lib/cachalot: ready only when
# the API answers, pools and mounts back after a kill -9, and the stop signal
# exports the pool with an exit status systemd counts as success.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

command -v systemd-analyze >/dev/null || fail "systemd-analyze is not installed (package systemd)"
[[ -f /usr/share/bash-completion/bash_completion ]] || fail "bash-completion is not installed"
WORK=$(mktmp)

# The files an install into DESTDIR $1 must lay out (paths relative to $1).
expected_files() { # sbindir unitdir prefix
    printf '%s\n' "$1/cachalot" "$2/cachalot.service" \
        "$3/share/bash-completion/completions/cachalot" "$3/share/man/man8/cachalot.8" | sort
}
installed_files() { (cd "$1" && find . -type f | sed 's|^\.||' | sort); }

note "make install DESTDIR (defaults: PREFIX=/usr/local, UNITDIR=/etc/systemd/system)"
D=$WORK/stage
make -s -C "$REPO" install DESTDIR="$D" CACHALOT_BIN="$CACHALOT" >"$ARTIFACTS/install.log" 2>&1 ||
    fail "make install failed: $(tail -n 5 "$ARTIFACTS/install.log")"
assert_eq "$(installed_files "$D")" "$(expected_files /usr/local/sbin /etc/systemd/system /usr/local)" \
    "files laid out by make install"
[[ -x $D/usr/local/sbin/cachalot ]] || fail "installed binary is not executable"
assert_contains "$("$D/usr/local/sbin/cachalot" --version)" "cachalot" "installed binary runs"
UNIT=$D/etc/systemd/system/cachalot.service
assert_eq "$(stat -c %a "$UNIT")" 644 "unit file mode"
assert_eq "$(sed -n 's/^ExecStart=//p' "$UNIT")" \
    "/usr/local/sbin/cachalot serve --home /var/lib/cachalot" "ExecStart of the installed unit"
for key in Restart=on-failure KillSignal=SIGTERM KillMode=mixed WantedBy=multi-user.target; do
    grep -qx "$key" "$UNIT" || fail "unit lacks $key"
done

note "systemd-analyze verify (binary path moved into the staging dir, man page from it)"
# The unit names /usr/local/sbin/cachalot, which is installed under $D here; verify
# checks that every command exists, so point it there. Nothing else changes.
sed "s|/usr/local/sbin/|$D/usr/local/sbin/|g" "$UNIT" >"$WORK/cachalot.service"
out=$(MANPATH=$D/usr/local/share/man systemd-analyze verify "$WORK/cachalot.service" 2>&1) ||
    fail "systemd-analyze verify failed: $out"
[[ -z $out ]] || fail "systemd-analyze verify warns: $out"
# The check has teeth: without the installed man page, and with a bad directive, it complains.
out=$(MANPATH=$WORK/none systemd-analyze verify "$WORK/cachalot.service" 2>&1) || true
assert_contains "$out" "cachalot(8)" "verify looks for the man page"
sed 's/^KillMode=mixed$/KillMode=mixd/' "$WORK/cachalot.service" >"$WORK/bad.service"
out=$(MANPATH=$D/usr/local/share/man systemd-analyze verify "$WORK/bad.service" 2>&1) || true
assert_contains "$out" "mixd" "verify reports a bad directive"

note "man page and bash completion from the installed files"
page=$(MANPATH=$D/usr/local/share/man MANWIDTH=100 man -P cat 8 cachalot 2>/dev/null)
assert_contains "$page" "SYNOPSIS" "man page renders"
assert_contains "$page" "completion" "man page lists the subcommands"
# bash-completion's on-demand loader finds the script through XDG_DATA_DIRS, as it
# finds /usr/local/share/bash-completion/completions/cachalot on a real install.
comp=$(XDG_DATA_DIRS=$D/usr/local/share:/usr/share bash --norc --noprofile -c '
    source /usr/share/bash-completion/bash_completion
    __load_completion cachalot || exit 1
    complete -p cachalot
    COMP_WORDS=(cachalot pool sc); COMP_CWORD=2; COMPREPLY=()
    fn=$(complete -p cachalot | sed -n "s/.*-F \([^ ]*\).*/\1/p")
    "$fn" cachalot sc pool
    echo "reply: ${COMPREPLY[*]}"') || fail "bash-completion did not load the installed script: $comp"
assert_contains "$comp" "-F _cachalot_with_names" "completion registered for cachalot"
assert_contains "$comp" "reply: scrub" "pool sc<TAB> completes to scrub"

note "PREFIX=/usr UNITDIR=/lib/systemd/system"
D2=$WORK/stage2
make -s -C "$REPO" install DESTDIR="$D2" PREFIX=/usr UNITDIR=/lib/systemd/system \
    CACHALOT_BIN="$CACHALOT" >>"$ARTIFACTS/install.log" 2>&1 || fail "make install PREFIX=/usr failed"
assert_eq "$(installed_files "$D2")" "$(expected_files /usr/sbin /lib/systemd/system /usr)" \
    "files laid out with PREFIX=/usr"
assert_eq "$(sed -n 's/^ExecStart=//p' "$D2/lib/systemd/system/cachalot.service")" \
    "/usr/sbin/cachalot serve --home /var/lib/cachalot" "ExecStart with PREFIX=/usr"
grep -q /usr/local "$D2/lib/systemd/system/cachalot.service" &&
    fail "unit installed with PREFIX=/usr still names /usr/local"

note "make uninstall removes exactly what install laid out"
touch "$D/usr/local/sbin/other-tool"
make -s -C "$REPO" uninstall DESTDIR="$D" >>"$ARTIFACTS/install.log" 2>&1 || fail "make uninstall failed"
assert_eq "$(installed_files "$D")" "/usr/local/sbin/other-tool" "files left after uninstall"
make -s -C "$REPO" uninstall DESTDIR="$D2" PREFIX=/usr UNITDIR=/lib/systemd/system \
    >>"$ARTIFACTS/install.log" 2>&1 || fail "make uninstall PREFIX=/usr failed"
assert_eq "$(installed_files "$D2")" "" "files left after uninstall (PREFIX=/usr)"

# ---- the unit's commands, run as systemd runs them ----
# unit_cmd KEY: the unit's command line for KEY with the staged binary and our home,
# and systemd's "$$" unescaped to "$".
HOME_DIR=$(mktmp)
export CACHALOT_SOCKET=$HOME_DIR/cachalot.sock
unit_cmd() {
    sed -n "s/^$1=//p" "$WORK/cachalot.service" | sed -e "s|/var/lib/cachalot|$HOME_DIR|g" -e 's/\$\$/$/g'
}
START=$(unit_cmd ExecStart)
READY=$(unit_cmd ExecStartPost)
SIG=$(sed -n 's/^KillSignal=SIG//p' "$WORK/cachalot.service")
RESTART_SEC=$(sed -n 's/^RestartSec=\([0-9]*\)s\{0,1\}$/\1/p' "$WORK/cachalot.service")
[[ -n $START && -n $READY && -n $SIG && -n $RESTART_SEC ]] ||
    fail "unit lacks ExecStart, ExecStartPost, KillSignal or RestartSec (in seconds)"
make -s -C "$REPO" install DESTDIR="$D" CACHALOT_BIN="$CACHALOT" >>"$ARTIFACTS/install.log" 2>&1

# unit_start: ExecStart in the background, then ExecStartPost, which must succeed
# only once the API answers. The web UI goes on a free port instead of the default
# 7470, which other tests on this machine may use.
unit_start() {
    # shellcheck disable=SC2086
    $START --http 127.0.0.1:0 >>"$ARTIFACTS/daemon.log" 2>&1 &
    DAEMON_PID=$!
    eval "$READY" || fail "ExecStartPost (readiness) failed"
    "$CACHALOT" pool list >/dev/null || fail "ExecStartPost returned before the API answers"
}
unit_start
assert_ok "$CACHALOT" pool create -s 256M tank "$WORK/d0.img"
assert_ok "$CACHALOT" create tank/db
mkdir -p "$WORK/mnt"
assert_ok "$CACHALOT" mount tank/db "$WORK/mnt"
echo hello >"$WORK/mnt/f"
sync "$WORK/mnt/f"

note "kill -9 (Restart=on-failure restarts it): pool re-imported, mount back"
kill9_daemon
sleep "$RESTART_SEC"
unit_start
assert_eq "$("$CACHALOT" pool list -H | cut -f1)" tank "pool re-imported"
grep -q " $WORK/mnt fuse" /proc/mounts || fail "mount not back after the restart"
assert_eq "$(cat "$WORK/mnt/f")" hello "file content after the restart"

note "kill -9 and an immediate restart (within the kernel's 1 s attribute cache)"
stat "$WORK/mnt" >/dev/null
kill9_daemon
unit_start
assert_eq "$(cat "$WORK/mnt/f")" hello "file content after an immediate restart"

note "stop: KillSignal=SIG$SIG, the daemon exports the pool and exits 0"
pid=$DAEMON_PID
kill "-$SIG" "$pid"
for ((i = 0; i < 600; i++)); do _alive "$pid" || break; sleep 0.1; done
_alive "$pid" && fail "daemon still running 60 s after SIG$SIG"
rc=0
wait "$pid" || rc=$?
DAEMON_PID=
assert_eq "$rc" 0 "daemon exit status after SIG$SIG (systemd's success)"
grep -q "exported pool 'tank'" "$ARTIFACTS/daemon.log" || fail "pool not exported on stop"
grep -q " $WORK/mnt fuse" /proc/mounts && fail "still mounted after stop"
make -s -C "$REPO" uninstall DESTDIR="$D" >>"$ARTIFACTS/install.log" 2>&1
echo "PASS"
