#!/usr/bin/env bash
# timeout: 120
# The managing web UI in headless Chromium, driven by real clicks and keystrokes
# (chromedriver's WebDriver API, tests/e2e/webdriver.py): type the API token,
# create a pool from a file, create the MySQL datasets (16K data / 128K log, with
# the reason shown), mount one from its row and write through the mount, then
# unmount it (a CLI re-mount reads the file back), take snapshots, clone one, roll back through the confirmation
# that lists what is lost (cancel first: nothing changes), share over NFS, create
# a volume and share it over iSCSI and NBD (`share list` shows both), create a
# replication relationship to a real peer (a second daemon), resume, pause, run
# it (the peer has the snapshot) and destroy it, and see a change refused without
# the token. Each step is checked through the CLI afterwards; each shows its CLI
# equivalent; screenshots go to $ARTIFACTS.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

need_browser
C=$CACHALOT
start_daemon
WORK=$(mktmp)
TOKEN=$(assert_ok "$C" token create ui)

# The replication peer: a second daemon with a pool "backup", paired with ours.
PEER=$(mktmp)
"$C" serve --home "$PEER" --socket "$PEER/s.sock" --http none --iscsi off --nbd off --nfs off \
    --portmap off --replication 127.0.0.1:0 >"$ARTIFACTS/peer.log" 2>&1 &
PEER_PID=$!
background "$PEER_PID"
for ((i = 0; i < 200; i++)); do
    [[ -s $PEER/replication.addr ]] && "$C" --socket "$PEER/s.sock" pool list >/dev/null 2>&1 && break
    _alive "$PEER_PID" || fail "the peer daemon exited during startup (see $ARTIFACTS/peer.log)"
    sleep 0.1
done
PEER_ADDR=$(cat "$PEER/replication.addr")
assert_ok "$C" --socket "$PEER/s.sock" pool create -s 256M backup "$PEER/d0.img" >/dev/null
PAIR=$(assert_ok "$C" --socket "$PEER/s.sock" replication pair)
assert_ok "$C" replication pair "$PEER_ADDR" "$PAIR" >/dev/null

browser_python "$TOKEN" "$WORK" "$PEER/s.sock" "$PEER_ADDR" <<'PY'
import os
import sys

from clients import cli, prop  # tests/e2e/clients.py
from webdriver import ManagePage  # tests/e2e/webdriver.py

token, work, peer_sock, peer_addr = sys.argv[1:5]


def peer(*args):
    return cli("--socket", peer_sock, *args)


with ManagePage() as b:
    b.login(token)

    img = f"{work}/ui0.img"
    b.type("#m-pool-files", img)
    b.type("#m-pool-size", "256M")
    assert b.js("return document.getElementById('m-pool-cli').textContent") == f"cachalot pool create -s 256M tank {img}"
    b.click("#m-pool-create")
    b.done("create pool", "cachalot pool create")
    assert cli("pool", "list", "-H").startswith("tank\t"), "pool created"
    b.wait("the pool's device in the table", f"return document.getElementById('m-pools').innerText.includes('{img}')")
    b.shot("1-pool")

    reason = b.js("return document.getElementById('m-mysql-reason').innerText")
    assert "16K" in reason and "128K" in reason and "read-modify-write" in reason, reason
    b.click("#m-mysql-create")
    b.done("MySQL datasets", "cachalot create -p tank/mysql")
    assert prop("tank/mysql/data", "recordsize") == "16K"
    assert prop("tank/mysql/log", "recordsize") == "128K"
    b.wait("the datasets in the table", "return document.querySelector('#m-datasets tr[data-ds=\"tank/mysql/log\"]') !== null")
    b.shot("2-mysql-datasets")

    # Mount from the dataset's row: the mount is real (a file written through the
    # mount point is in the dataset: seen again after unmounting and mounting back).
    mnt = f"{work}/mnt-data"
    os.makedirs(mnt)
    row = '#m-datasets tr[data-ds="tank/mysql/data"]'
    b.type(f"{row} input.mp", mnt)
    b.click(f'{row} button[data-act="mount"]')
    b.done("mount", f"cachalot mount tank/mysql/data {mnt}")
    assert cli("mount").split() == ["tank/mysql/data", mnt] and os.path.ismount(mnt), cli("mount")
    assert mnt in b.js(f"return document.querySelector('{row}').textContent"), "the row shows the mount"
    with open(f"{mnt}/through-ui.txt", "w") as f:
        f.write("mounted by a click\n")
    b.click(f'{row} button[data-act="unmount"]')
    b.done("unmount", "cachalot unmount tank/mysql/data")
    assert cli("mount") == "" and not os.path.ismount(mnt) and os.listdir(mnt) == [], "unmounted"
    cli("mount", "tank/mysql/data", mnt)
    assert open(f"{mnt}/through-ui.txt").read() == "mounted by a click\n", "the file is in the dataset"
    cli("unmount", "tank/mysql/data")

    b.click('#m-snap-ds option[value="tank/mysql/data"]')
    b.type("#m-snap-name", "s1")
    b.click("#m-snap-take")
    b.done("snapshot s1", "cachalot snapshot tank/mysql/data@s1")
    b.type("#m-snap-name", "s2")
    b.click("#m-snap-take")
    b.done("snapshot s2", "cachalot snapshot tank/mysql/data@s2")
    snaps = cli("list", "-H", "-t", "snapshot", "-o", "name").split()
    assert snaps == ["tank/mysql/data@s1", "tank/mysql/data@s2"], snaps
    b.shot("3-snapshots")

    b.wait("s1 in the clone list", "return document.querySelector('#m-clone-src option[value=\"tank/mysql/data@s1\"]') !== null")
    b.click('#m-clone-src option[value="tank/mysql/data@s1"]')
    b.type("#m-clone-target", "tank/clone1")
    b.click("#m-clone-go")
    b.done("clone", "cachalot clone tank/mysql/data@s1 tank/clone1")
    assert prop("tank/clone1", "origin") == "tank/mysql/data@s1"
    b.shot("4-clone")

    # Rollback: the dialog lists what is lost; cancel changes nothing.
    roll = '#m-snaps tr[data-snap="tank/mysql/data@s1"] button[data-act="rollback"]'
    b.click(roll)
    b.wait("the rollback confirmation", "return !document.getElementById('m-confirm').hidden")
    body = b.js("return document.getElementById('m-confirm-body').innerText")
    assert "snapshot tank/mysql/data@s2 is destroyed" in body, body
    assert "every change to tank/mysql/data since s1 is lost" in body, body
    assert b.js("return document.getElementById('m-confirm-cli').textContent") == "cachalot rollback -r tank/mysql/data@s1"
    b.shot("5-rollback-confirm")
    b.click("#m-confirm-cancel")
    b.wait("the cancel report", "return document.getElementById('m-msg').textContent.startsWith('Cancelled')")
    assert "tank/mysql/data@s2" in cli("list", "-H", "-t", "snapshot", "-o", "name"), "cancel changed nothing"
    b.js("document.getElementById('m-msg').hidden = true")
    b.click(roll)
    b.wait("the rollback confirmation", "return !document.getElementById('m-confirm').hidden")
    b.click("#m-confirm-ok")
    b.done("rollback", "cachalot rollback -r tank/mysql/data@s1")
    assert cli("list", "-H", "-t", "snapshot", "-o", "name").split() == ["tank/mysql/data@s1"]
    b.shot("6-rolled-back")

    b.click('#m-nfs-ds option[value="tank/mysql"]')
    b.type("#m-nfs-opts", "rw=127.0.0.1/32")
    b.click("#m-nfs-share")
    b.done("NFS share", "cachalot set sharenfs=rw=127.0.0.1/32 tank/mysql")
    assert prop("tank/mysql", "sharenfs").startswith("rw=127.0.0.1,"), prop("tank/mysql", "sharenfs")
    b.shot("7-nfs-share")

    # A volume, shared over iSCSI and NBD by clicks; `share list` shows both.
    b.type("#m-vol-name", "tank/vol1")
    b.type("#m-vol-size", "32M")
    b.click("#m-vol-create")
    b.done("create volume", "cachalot create -V 32M tank/vol1")
    assert cli("list", "-H", "-t", "volume", "-o", "name").split() == ["tank/vol1"]
    b.wait("the volume in the share form", "return document.querySelector('#m-blk-vol option[value=\"tank/vol1\"]') !== null")
    b.click('#m-blk-vol option[value="tank/vol1"]')
    b.click('#m-blk-proto option[value="iscsi"]')
    b.click("#m-blk-share")
    b.done("iSCSI share", "cachalot set shareiscsi=on tank/vol1")
    assert prop("tank/vol1", "shareiscsi") == "on"
    b.click('#m-blk-proto option[value="nbd"]')
    b.click("#m-blk-share")
    b.done("NBD share", "cachalot set sharenbd=on tank/vol1")
    assert prop("tank/vol1", "sharenbd") == "on"
    rows = [line.split("\t") for line in cli("share", "list", "-H").splitlines()]
    assert ["tank/vol1", "iscsi"] in [r[:2] for r in rows], rows
    assert ["tank/vol1", "nbd"] in [r[:2] for r in rows], rows
    shares = b.js("return document.getElementById('m-shares').innerText")
    assert "iqn." in shares and "nbd" in shares and "tank/mysql" in shares, shares
    b.shot("8-block-shares")
    # Stopping a share asks first.
    b.click("#m-blk-unshare")
    b.wait("the unshare confirmation", "return !document.getElementById('m-confirm').hidden")
    b.click("#m-confirm-ok")
    b.done("NBD unshare", "cachalot set sharenbd=off tank/vol1")
    assert prop("tank/vol1", "sharenbd") == "off" and prop("tank/vol1", "shareiscsi") == "on"

    # Replication to a real peer (a second daemon, paired through the CLI): the
    # relationship is created paused by clicks, run now (the peer then has the
    # snapshot, and the list shows the lag), resumed and paused, and destroyed
    # through its confirmation (the peer's copy stays).
    b.open("/?reload=1#/manage")  # a reload: the token stays for the tab
    b.wait("the filesystems in the replication form", "return document.querySelector('#m-repl-src option[value=\"tank/mysql\"]') !== null")
    b.type("#m-repl-name", "r1")
    b.click('#m-repl-src option[value="tank/mysql"]')
    b.type("#m-repl-target", f"{peer_addr}/backup/copy")
    b.type("#m-repl-schedule", "1h")
    b.click("#m-repl-paused")
    repl_cli = f"cachalot replication create --source tank/mysql --target {peer_addr}/backup/copy --schedule 1h --paused r1"
    assert b.js("return document.getElementById('m-repl-cli').textContent") == repl_cli
    b.click("#m-repl-create")
    b.done("create relationship", repl_cli)
    row = cli("replication", "list", "-H").split("\t")
    assert row[:4] == ["r1", "tank/mysql", f"{peer_addr}/backup/copy", "paused"], row
    b.wait("the relationship in the table", "return document.querySelector('#m-repl tr[data-repl=\"r1\"] button[data-act=\"repl-resume\"]') !== null")
    # Paused: no cycle has run; "Run now" sends one snapshot to the peer.
    assert peer("list", "-H", "-t", "snapshot", "-o", "name") == ""
    b.click('#m-repl tr[data-repl="r1"] button[data-act="repl-run"]')
    b.done("run now", "cachalot replication run r1", timeout=60)
    sent = cli("list", "-H", "-t", "snapshot", "-o", "name", "tank/mysql").split()
    copies = peer("list", "-H", "-t", "snapshot", "-o", "name").split()
    assert len(sent) == 1 and copies == ["backup/copy@" + sent[0].split("@")[1]], (sent, copies)
    lag = b.js("return document.querySelector('#m-repl tr[data-repl=\"r1\"]').cells[4].textContent")
    err = b.js("return document.querySelector('#m-repl tr[data-repl=\"r1\"]').cells[6].textContent")
    assert lag.endswith("s") and err == "-", (lag, err)
    b.click('#m-repl tr[data-repl="r1"] button[data-act="repl-resume"]')
    b.done("resume", "cachalot replication resume r1")
    assert "paused" not in cli("replication", "list", "-H").split("\t")[3], cli("replication", "list", "-H")
    b.click('#m-repl tr[data-repl="r1"] button[data-act="repl-pause"]')
    b.done("pause", "cachalot replication pause r1")
    assert cli("replication", "list", "-H").split("\t")[3] == "paused", cli("replication", "list", "-H")
    b.shot("9-replication")
    b.click('#m-repl tr[data-repl="r1"] button[data-act="destroy-repl"]')
    b.wait("the destroy confirmation", "return !document.getElementById('m-confirm').hidden")
    body = b.js("return document.getElementById('m-confirm-body').innerText")
    assert f"the copy on {peer_addr}/backup/copy stays" in body, body
    b.click("#m-confirm-ok")
    b.done("destroy relationship", "cachalot replication destroy r1")
    assert cli("replication", "list", "-H") == ""
    assert copies[0] in peer("list", "-H", "-t", "snapshot", "-o", "name").split(), "the peer's copy stays"

    # Without the token a change is refused and nothing changes.
    b.type("#m-token", "")
    b.click("#m-token-save")
    b.type("#m-snap-name", "nope")
    b.click("#m-snap-take")
    msg = b.refused("the refusal", "10-refused-without-token")
    assert "unauthorized" in msg, msg
    assert "nope" not in cli("list", "-H", "-t", "snapshot", "-o", "name")
    print(f"ok: the web UI managed pool, datasets, snapshots, clone, rollback, NFS, iSCSI and NBD shares and replication ({b.clicks} clicks)")
PY
stop_daemon
kill -TERM "$PEER_PID"
PEER_EXIT=0
wait "$PEER_PID" || PEER_EXIT=$?
assert_eq "$PEER_EXIT" 0 "the peer's exit status after SIGTERM"
if grep -E "panicked at|internal error" "$ARTIFACTS/peer.log"; then fail "the peer logged a panic or an internal error"; fi
echo "PASS"
