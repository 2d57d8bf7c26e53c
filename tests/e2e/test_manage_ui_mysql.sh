#!/usr/bin/env bash
# timeout: 300
# The web UI's MySQL panel in headless Chromium, driven by real clicks and
# keystrokes (tests/e2e/webdriver.py), against a real MariaDB on cachalot FUSE
# mounts: take a MySQL snapshot set (checked with `cachalot mysql list` and the
# recorded GTID), clone it to a running replica with the progress bar fed by the
# job's server-sent events (checked through the CLI: the clone's origin and
# recorded pid; and through the replica: both replication threads run and it
# applies a later write); then restore the set: the confirmation lists what is
# lost; cancel, and confirming while the server runs (refused, naming its pid),
# change nothing; with the server shut down it is restored, and MariaDB started
# again on it has the row as at the snapshot and the binlog GTID recorded with
# it, and its tables check OK. Each action shows its CLI equivalent;
# screenshots go to $ARTIFACTS.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/e2e/fuse_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/fuse_lib.sh"

command -v mariadbd >/dev/null || fail "mariadb-server is not installed"
need_browser

_ui_mysql_cleanup() {
    local rc=$? pid
    set +e
    # The replica's server outlives its job: stop it before the daemon goes.
    pid=$("$CACHALOT" get -H -o value cachalot.mysql:pid tank/replica/data 2>/dev/null)
    if [[ $pid =~ ^[0-9]+$ ]]; then
        kill -KILL "$pid" 2>/dev/null
        while [[ -e /proc/$pid ]]; do sleep 0.1; done
    fi
    (exit "$rc")
    _fuse_cleanup
}
trap _ui_mysql_cleanup EXIT

MY_PORT=$(free_port)
mariadb_on_cachalot 1G
sql "create database ck; create table ck.counter (id int primary key, n int) engine=innodb;
     insert into ck.counter values (1, 1)"
TOKEN=$(assert_ok "$CACHALOT" token create ui)

browser_python "$TOKEN" "$MY_SOCK" "$D" "$MARIADB_PID" <<'PY'
import sys
import time

from clients import assert_replicating, cli, prop, sql  # tests/e2e/clients.py
from webdriver import ManagePage  # tests/e2e/webdriver.py

token, my_sock, d, mariadb_pid = sys.argv[1:5]


def wait_exited(pid):
    """Until PID has exited (gone, or a zombie its parent, the script, has not reaped)."""
    for _ in range(600):
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return
        except FileNotFoundError:
            return
        time.sleep(0.1)
    raise SystemExit(f"pid {pid} did not exit within 60 s")


with ManagePage() as b:
    b.login(token)

    # Advice for the running server: its datadir's dataset found from the
    # mounts, one row per piece of advice, as `cachalot mysql advise` gives.
    b.type("#m-adv-sock", my_sock)
    b.click("#m-adv-go")
    b.done("advise", f"cachalot mysql advise --socket {my_sock}", timeout=60)
    adv = b.js("return document.getElementById('m-adv-rows').innerText")
    assert "datadir on tank/mysql/data" in adv, adv
    settings = b.js("return [...document.querySelectorAll('#m-adv-rows tr')].slice(2).map((r) => r.cells[1].textContent)")
    cli_text = cli("mysql", "advise", "--socket", my_sock)
    assert settings and all(s in cli_text for s in settings if s), (settings, cli_text)
    b.shot("0-advise")

    b.type("#m-my-sock", my_sock)
    b.type("#m-my-snap", "s1")
    take_cli = f"cachalot mysql snapshot --socket {my_sock} tank/mysql/data,tank/mysql/log s1"
    assert b.js("return document.getElementById('m-my-take-cli').textContent") == take_cli
    b.click("#m-my-take")
    b.done("MySQL snapshot set", take_cli)
    sets = [line.split("\t") for line in cli("mysql", "list", "-H").splitlines()]
    assert [s[:2] for s in sets] == [["tank/mysql/data@s1", "tank/mysql/data,tank/mysql/log"]], sets
    gtid = prop("tank/mysql/log@s1", "cachalot.mysql:gtid")
    assert gtid and gtid == sets[0][3], (gtid, sets)
    b.wait("the set in the table", "return document.querySelector('#m-my-sets tr[data-myset=\"tank/mysql/data@s1\"]') !== null")
    b.shot("1-mysql-snapshot-set")

    # Clone to a running replica: the source socket was filled in from the take form.
    assert b.js("return document.getElementById('m-my-clone-of').value") == my_sock
    b.click('#m-my-clone-src option[value="tank/mysql/data@s1"]')
    b.type("#m-my-clone-target", "tank/replica")
    b.type("#m-my-clone-mp", f"{d}/replica")
    clone_cli = f"cachalot mysql clone --replica-of {my_sock} --mountpoint {d}/replica tank/mysql/data@s1 tank/replica"
    assert b.js("return document.getElementById('m-my-clone-cli').textContent") == clone_cli
    # Record the progress bar as the events move it.
    b.js("window.seen = []; new MutationObserver(() => window.seen.push(document.getElementById('m-my-step').textContent))"
         ".observe(document.getElementById('m-my-step'), {childList: true, characterData: true, subtree: true})")
    b.click("#m-my-clone-go")
    b.wait("the progress bar", "return !document.getElementById('m-my-progress').hidden")
    b.shot("2-clone-progress")
    b.done("clone to a running replica", clone_cli, timeout=180)
    assert b.js("return document.getElementById('m-my-progress').value") == 1
    steps = b.js("return window.seen")
    print(f"  steps shown: {steps}")
    assert any(s.startswith("starting the server") for s in steps), steps
    step = b.js("return document.getElementById('m-my-step').textContent")
    assert step.startswith("done: replica server pid"), step
    b.shot("3-replica-running")
    pid = prop("tank/replica/data", "cachalot.mysql:pid")
    assert step.split("pid ")[1].split(",")[0] == pid, (step, pid)
    assert prop("tank/replica/data", "origin") == "tank/mysql/data@s1"
    replica_sock = step.split("socket ")[1]
    assert_replicating(replica_sock)
    sql(my_sock, "update ck.counter set n = 5")
    for _ in range(200):
        if sql(replica_sock, "select n from ck.counter") == "5":
            break
        time.sleep(0.1)
    assert sql(replica_sock, "select n from ck.counter") == "5", "the replica applies the source's writes"

    # Restore asks first, listing what is lost; cancel changes nothing.
    restore = '#m-my-sets tr[data-myset="tank/mysql/data@s1"] button[data-act="my-restore"]'
    b.click(restore)
    b.wait("the restore confirmation", "return !document.getElementById('m-confirm').hidden")
    body = b.js("return document.getElementById('m-confirm-body').innerText")
    assert "every change to tank/mysql/data since s1 is lost" in body, body
    assert "every change to tank/mysql/log since s1 is lost" in body, body
    assert "must be stopped" in body, body
    assert b.js("return document.getElementById('m-confirm-cli').textContent") == "cachalot mysql restore tank/mysql/data@s1"
    b.shot("4-restore-confirm")
    b.click("#m-confirm-cancel")
    b.wait("the cancel report", "return document.getElementById('m-msg').textContent.startsWith('Cancelled')")
    assert sql(my_sock, "select n from ck.counter") == "5", "cancel changed nothing"

    # Confirmed while the server runs: refused, naming the server; nothing changes.
    b.click(restore)
    b.wait("the restore confirmation", "return !document.getElementById('m-confirm').hidden")
    b.click("#m-confirm-ok")
    msg = b.refused("the refusal while the server runs", "5-restore-refused")
    assert f"in use by pid {mariadb_pid}" in msg and "stop the server first" in msg, msg
    assert sql(my_sock, "select n from ck.counter") == "5", "a refused restore changed nothing"

    # Stopped, then restored by clicks: the daemon rolls both members back and
    # mounts them again (the data is checked by the restarted server, below).
    sql(my_sock, "shutdown")
    wait_exited(mariadb_pid)
    b.click(restore)
    b.wait("the restore confirmation", "return !document.getElementById('m-confirm').hidden")
    b.click("#m-confirm-ok")
    b.done("restore", "cachalot mysql restore tank/mysql/data@s1")
    b.shot("6-restored")
    mounts = open("/proc/mounts").read()
    assert f" {d}/data fuse" in mounts and f" {d}/log fuse" in mounts, "the members are mounted again"
    assert [line.split("\t")[0] for line in cli("mysql", "list", "-H").splitlines()] == ["tank/mysql/data@s1"]
    print(f"ok: the web UI took a MySQL snapshot set, cloned it to a running replica and restored it ({b.clicks} clicks)")
PY
note "MariaDB restarted on the restored datasets: the data and the binlog are as of s1"
mariadb_start
assert_eq "$(sql "select n from ck.counter")" 1 "the counter as at s1 (5 was written after it)"
assert_eq "$(sql "select @@gtid_binlog_pos")" "$("$CACHALOT" get -H -o value cachalot.mysql:gtid tank/mysql/log@s1)" \
    "the binlog ends at the GTID recorded with s1"
check_tables ck
pid=$("$CACHALOT" get -H -o value cachalot.mysql:pid tank/replica/data)
kill -TERM "$pid"
for ((i = 0; i < 300; i++)); do [[ -e /proc/$pid ]] || break; sleep 0.1; done
mariadb_stop
stop_daemon
echo "PASS"
