"""Every /api/v1 route against a running daemon, each step checked through the CLI
(tests/e2e/test_api.sh). Usage: api_check.py ADDR TOKEN CACHALOT WORKDIR ARTIFACTS"""
import os
import subprocess
import time

from api_lib import CLI, TOKEN, WORK, api, cli, events, ok, prop, q, refused  # tests/e2e/api_lib.py


print("--- openapi: every route described")
doc = ok("GET", "/openapi.json")
for p in ["/api/v1/pools", "/api/v1/datasets", "/api/v1/snapshots/{name}/rollback",
          "/api/v1/shares/nfs/{name}", "/api/v1/jobs/{id}", "/api/v1/call",
          "/api/v1/pools/{pool}/replace", "/api/v1/jobs/{id}/events",
          "/api/v1/snapshots/{name}/send", "/api/v1/mysql/snapshots", "/api/v1/mysql/clones",
          "/api/v1/mysql/restore", "/api/v1/mysql/advise", "/api/v1/datasets/{name}/mount",
          "/api/v1/datasets/{name}/unmount", "/api/v1/mounts", "/api/v1/pools/{pool}/devices",
          "/api/v1/pools/{pool}/devices/{device}/attach", "/api/v1/pools/{pool}/clear"]:
    assert p in doc["paths"], p
assert doc["components"]["securitySchemes"]["token"]["scheme"].lower() == "bearer"

print("--- pools: no token 401, bad token 403, bad input 400; nothing changed")
img = f"{WORK}/d0.img"
good_pool = {"name": "tank", "vdevs": [img], "size": "256M"}
refused("POST", "/pools", good_pool, 401, "unauthorized", token=None)
refused("POST", "/pools", good_pool, 403, "forbidden", token="0" * 64)
refused("POST", "/pools", {"name": 5, "vdevs": [img]})
refused("POST", "/pools", {**good_pool, "bogus": 1})
refused("POST", "/pools", {"vdevs": [img]})
refused("POST", "/pools", raw=b"{not json")
refused("POST", "/pools", {"name": "1bad", "vdevs": [img], "size": "256M"})
refused("POST", "/pools", {"name": "tank", "vdevs": ["rel.img"], "size": "256M"})
assert cli("pool", "list", "-H") == "", "no pool yet"
ok("POST", "/pools", good_pool)
assert cli("pool", "list", "-H").startswith("tank\t")
refused("POST", "/pools", good_pool, 409, "already_exists")
pools = ok("GET", "/pools")
assert [p["name"] for p in pools] == ["tank"], pools
st = ok("GET", "/pools/tank")
assert st["health"] == "ONLINE" and st["devices"], st
refused("GET", "/pools/nosuch", status=404, code="not_found")

print("--- datasets: the MySQL layout, properties")
ok("POST", "/datasets", {"name": "tank/mysql", "props": {"compression": "lz4"}})
ok("POST", "/datasets", {"name": "tank/mysql/data", "props": {"recordsize": "16K"}})
ok("POST", "/datasets", {"name": "tank/mysql/log", "props": {"recordsize": "128K"}})
assert prop("tank/mysql/data", "recordsize") == "16K"
assert prop("tank/mysql/log", "recordsize") == "128K"
assert prop("tank/mysql/data", "compression") == "lz4", "inherited"
ok("POST", "/datasets", {"name": "tank/vol", "volume_size": "16M", "sparse": True})
assert cli("list", "-H", "-t", "volume", "-o", "name").split() == ["tank/vol"]
refused("POST", "/datasets", {"name": "tank/x", "parents": "yes"})
refused("POST", "/datasets", {"name": "tank/x", "props": {"recordsize": 16384}})
refused("POST", "/datasets", {"name": "tank/x", "unknown": True})
refused("POST", "/datasets", {})
refused("POST", "/datasets", {"name": "tank/a b"})
refused("POST", "/datasets", {"name": "nosuch/x"}, 404, "not_found")
refused("POST", "/datasets", {"name": "tank/mysql"}, 409, "already_exists")
refused("POST", "/datasets", {"name": "tank/x", "props": {"recordsize": "banana"}}, 400, "invalid_request")
names = [r["name"] for r in ok("GET", "/datasets")]
assert names == ["tank", "tank/mysql", "tank/mysql/data", "tank/mysql/log", "tank/vol"], names
rows = ok("GET", "/datasets?name=tank/mysql&recursive=true&props=recordsize")
assert [r["props"]["recordsize"]["value"] for r in rows] == ["128K", "16K", "128K"], rows
refused("GET", "/datasets?bogus=1")
refused("GET", "/datasets?type=bogus")
props = {r["property"]: r for r in ok("GET", f"/datasets/{q('tank/mysql/data')}")}
assert props["recordsize"]["value"] == "16K" and props["recordsize"]["source"] == "local", props["recordsize"]
refused("GET", f"/datasets/{q('tank/nope')}", status=404, code="not_found")
ok("PUT", f"/datasets/{q('tank/mysql/data')}/properties/quota", {"value": "1G"})
assert prop("tank/mysql/data", "quota") == "1G"
refused("PUT", f"/datasets/{q('tank/mysql/data')}/properties/quota", {"value": 5})
refused("PUT", f"/datasets/{q('tank/mysql/data')}/properties/quota", {})
refused("PUT", f"/datasets/{q('tank/mysql/data')}/properties/quota", {"value": "lots"})
refused("PUT", f"/datasets/{q('tank/nope')}/properties/quota", {"value": "1G"}, 404, "not_found")
ok("DELETE", f"/datasets/{q('tank/mysql/data')}/properties/quota")
assert prop("tank/mysql/data", "quota") in ("none", "-"), prop("tank/mysql/data", "quota")
ok("PUT", f"/datasets/{q('tank/mysql/log')}/properties/compression", {"value": "off"})
ok("DELETE", f"/datasets/{q('tank/mysql/log')}/properties/compression")
assert cli("get", "-H", "-o", "value,source", "compression", "tank/mysql/log").split()[0] == "lz4"

print("--- snapshots: take, list, clone, promote, rollback, destroy")
ok("POST", "/snapshots", {"names": ["tank/mysql/data@s1", "tank/mysql/log@s1"]})
assert "tank/mysql/data@s1" in cli("list", "-H", "-t", "snapshot", "-o", "name")
refused("POST", "/snapshots", {"names": "tank/mysql/data@s2"})
refused("POST", "/snapshots", {"names": ["tank/nope@s1"]}, 404, "not_found")
refused("POST", "/snapshots", {"names": ["tank/mysql/data@s1"]}, 409, "already_exists")
snaps = ok("GET", "/snapshots?dataset=tank/mysql&recursive=true&props=creation,written")
assert [s["name"] for s in snaps] == ["tank/mysql/data@s1", "tank/mysql/log@s1"], snaps
assert "creation" in snaps[0]["props"], snaps[0]
assert ok("GET", f"/snapshots/{q('tank/mysql/data@s1')}")
refused("GET", f"/snapshots/{q('tank/mysql/data')}")
ok("POST", f"/snapshots/{q('tank/mysql/data@s1')}/clone", {"target": "tank/c1", "props": {"recordsize": "16K"}})
assert prop("tank/c1", "origin") == "tank/mysql/data@s1"
refused("POST", f"/snapshots/{q('tank/mysql/data@s1')}/clone", {"target": "tank/c1"}, 409, "already_exists")
refused("POST", f"/snapshots/{q('tank/mysql/data@s1')}/clone", {})
refused("POST", f"/snapshots/{q('tank/mysql/data@nope')}/clone", {"target": "tank/c2"}, 404, "not_found")
print("    destroy of busy things: a snapshot with a clone, a dataset with children")
refused("DELETE", f"/snapshots/{q('tank/mysql/data@s1')}", status=409, code="busy")
refused("DELETE", f"/datasets/{q('tank/mysql')}", status=409, code="busy")
refused("DELETE", f"/datasets/{q('tank/mysql')}?recursive=maybe")
refused("DELETE", f"/datasets/{q('tank/nope')}", status=404, code="not_found")
ok("POST", f"/datasets/{q('tank/c1')}/promote")
assert prop("tank/c1", "origin") == "-" and prop("tank/mysql/data", "origin") == "tank/c1@s1"
ok("POST", "/snapshots", {"names": ["tank/mysql/log@s2"]})
ok("POST", "/snapshots", {"names": ["tank/mysql/log@s3"]})
refused("POST", f"/snapshots/{q('tank/mysql/log@s2')}/rollback", {}, 409, "busy")
refused("POST", f"/snapshots/{q('tank/mysql/log@s2')}/rollback", {"recursive": "yes"})
ok("POST", f"/snapshots/{q('tank/mysql/log@s2')}/rollback", {"recursive": True})
assert "tank/mysql/log@s3" not in cli("list", "-H", "-t", "snapshot", "-o", "name")
ok("DELETE", f"/snapshots/{q('tank/mysql/log@s2')}")
refused("DELETE", f"/snapshots/{q('tank/mysql/log@s2')}", status=404, code="not_found")
assert "tank/mysql/log@s2" not in cli("list", "-H", "-t", "snapshot", "-o", "name")

print("--- holds: hold, list, a held snapshot refuses destroy, release")
held = q("tank/mysql/log@s1")


def holds(snap):
    """The hold tags of SNAP, as `cachalot holds` lists them."""
    return [line.split("\t")[1] for line in cli("holds", "-H", snap).splitlines()]


assert holds("tank/mysql/log@s1") == [], holds("tank/mysql/log@s1")
refused("PUT", f"/snapshots/{held}/holds/keep", status=401, code="unauthorized", token=None)
refused("PUT", f"/snapshots/{q('tank/mysql/log@nope')}/holds/keep", status=404, code="not_found")
refused("PUT", f"/snapshots/{held}/holds/keep", {"bogus": 1})
assert holds("tank/mysql/log@s1") == [], "a refused hold held"
ok("PUT", f"/snapshots/{held}/holds/keep")
assert holds("tank/mysql/log@s1") == ["keep"], holds("tank/mysql/log@s1")
assert ok("GET", f"/snapshots/{held}/holds")["holds"] == ["keep"]
refused("PUT", f"/snapshots/{held}/holds/keep")  # held by that tag already
refused("DELETE", f"/snapshots/{held}", status=409, code="busy")
refused("DELETE", f"/snapshots/{held}/holds/keep", status=401, code="unauthorized", token=None)
refused("DELETE", f"/snapshots/{held}/holds/other")  # no such hold
assert holds("tank/mysql/log@s1") == ["keep"], "a refused release released"
ok("DELETE", f"/snapshots/{held}/holds/keep")
assert holds("tank/mysql/log@s1") == [], holds("tank/mysql/log@s1")

print("--- shares")
ok("PUT", f"/shares/nfs/{q('tank/mysql')}", {"options": "rw=127.0.0.1/32"})
assert prop("tank/mysql", "sharenfs").startswith("rw=127.0.0.1,"), prop("tank/mysql", "sharenfs")
shares = ok("GET", "/shares")
assert any(s["name"] == "tank/mysql" and s["protocol"] == "nfs" for s in shares), shares
refused("PUT", f"/shares/nfs/{q('tank/mysql')}", {"options": ["on"]})
refused("PUT", f"/shares/nfs/{q('tank/mysql')}", {"options": "off"})
ok("DELETE", f"/shares/nfs/{q('tank/mysql')}")
assert prop("tank/mysql", "sharenfs") == "off"

print("--- local mounts: mount, write through the mount, unmount, mount again and read")
mnt, mnt2 = f"{WORK}/mnt", f"{WORK}/mnt2"
os.makedirs(mnt)
os.makedirs(mnt2)
with open(f"{WORK}/afile", "w") as f:
    f.write("x")
os.makedirs(f"{WORK}/full")
with open(f"{WORK}/full/x", "w") as f:
    f.write("x")


def mounts():
    return cli("mount")


def refused_mount(path, body, status, code, token=TOKEN):
    """A refused mount or unmount leaves the mounts (and the datasets) as they were."""
    before = mounts()
    refused("POST", path, body, status, code, token=token)
    assert mounts() == before, f"POST {path} {body} changed the mounts"


data = f"/datasets/{q('tank/mysql/data')}"
refused_mount(f"{data}/mount", {"mountpoint": mnt}, 401, "unauthorized", token=None)
refused_mount(f"{data}/mount", {"mountpoint": "rel/dir"}, 400, "invalid_request")
refused_mount(f"{data}/mount", {"mountpoint": mnt, "bogus": 1}, 400, "invalid_request")
refused_mount(f"{data}/mount", {"mountpoint": 5}, 400, "invalid_request")
refused_mount(f"{data}/mount", {"mountpoint": f"{WORK}/afile"}, 422, "failed")
refused_mount(f"{data}/mount", {"mountpoint": f"{WORK}/full"}, 422, "failed")
refused_mount(f"{data}/mount", {"mountpoint": f"{WORK}/afile/sub"}, 422, "failed")
refused_mount(f"/datasets/{q('tank/nosuch')}/mount", {"mountpoint": mnt}, 404, "not_found")
refused_mount(f"/datasets/{q('tank/vol')}/mount", {"mountpoint": mnt}, 400, "invalid_request")
refused_mount(f"/datasets/{q('tank/mysql/data@s1')}/mount", {"mountpoint": mnt}, 400, "invalid_request")
refused_mount(f"{data}/unmount", {}, 422, "failed")
assert not os.path.ismount(mnt) and mounts() == ""
v = ok("POST", f"{data}/mount", {"mountpoint": mnt})
assert v["path"] == mnt and os.path.ismount(mnt), v
assert ok("GET", "/mounts") == [{"name": "tank/mysql/data", "path": mnt}]
assert mounts().split() == ["tank/mysql/data", mnt], mounts()
refused_mount(f"{data}/mount", {"mountpoint": mnt2}, 409, "busy")
refused_mount(f"/datasets/{q('tank/mysql/log')}/mount", {"mountpoint": mnt}, 409, "busy")
with open(f"{mnt}/hello.txt", "w") as f:
    f.write("written through the API's mount\n")
refused_mount(f"{data}/unmount", {}, 401, "unauthorized", token=None)
refused_mount(f"{data}/unmount", {"force": "yes"}, 400, "invalid_request")
ok("POST", f"{data}/unmount")
assert not os.path.ismount(mnt) and os.listdir(mnt) == [] and mounts() == "", "unmounted"
ok("POST", f"{data}/mount", {"mountpoint": mnt2})
assert open(f"{mnt2}/hello.txt").read() == "written through the API's mount\n", "the file is in the dataset"
ok("POST", f"{data}/unmount", {"force": True})
assert ok("GET", "/mounts") == [] and not os.path.ismount(mnt2)
# A missing mount point is made, parents too, 0755 and owned by the daemon's user (as zfs).
made = f"{WORK}/nothere/deep"
ok("POST", f"{data}/mount", {"mountpoint": made})
assert os.path.ismount(made), made
ok("POST", f"{data}/unmount")
for d in (f"{WORK}/nothere", made):
    st = os.stat(d)
    assert oct(st.st_mode & 0o7777) == "0o755" and st.st_uid == os.getuid(), (d, oct(st.st_mode), st.st_uid)

print("--- analytics")
stats = ok("GET", "/analytics/stats")
assert stats and "name" in stats[0], stats
st, v = api("GET", "/analytics/show?stat=no.such.stat&last=60s")
assert 400 <= st < 500 and v["error"]["code"] in ("invalid_request", "not_found", "failed"), (st, v)
ok("GET", "/analytics/show?stat=" + stats[0]["name"] + "&last=60s")
refused("GET", "/analytics/show")

print("--- scrub as a job")
job = ok("POST", "/pools/tank/scrub", status=202)
assert job["kind"] == "scrub" and job["state"] in ("running", "done"), job
for _ in range(300):
    job = ok("GET", f"/jobs/{job['id']}")
    if job["state"] != "running":
        break
    time.sleep(0.1)
assert job["state"] == "done" and job["progress"] == 1.0, job
assert job["detail"]["state"] in ("finished", "done", "completed") or job["detail"]["examined"] >= 0, job
assert any(j["id"] == job["id"] for j in ok("GET", "/jobs"))
refused("GET", "/jobs/424242", status=404, code="not_found")
refused("GET", "/jobs/x")
refused("POST", "/pools/nosuch/scrub", status=404, code="not_found")

print("--- resilver as a job (pool replace), streamed as server-sent events")
m = [f"{WORK}/m{i}.img" for i in range(3)]
ok("POST", "/pools", {"name": "mir", "vdevs": ["mirror", m[0], m[1]], "size": "128M"})
ok("POST", "/datasets", {"name": "mir/d"})
obj = cli("debug", "create", "mir/d").strip()
cli("debug", "write", "mir/d", obj, "--seed", "7", "--len", str(8 << 20))
cli("pool", "sync", "mir")
refused("POST", "/pools/mir/replace", {"old": m[1], "new": m[2], "bogus": 1})
refused("POST", "/pools/mir/replace", {"old": 5})
refused("POST", "/pools/nosuch/replace", {"old": m[1], "new": m[2]}, status=404, code="not_found")
refused("POST", "/pools/mir/replace", {"old": m[1], "new": m[2]}, status=401, code="unauthorized", token=None)
st, v = api("POST", "/pools/mir/replace", {"old": f"{WORK}/nothere.img", "new": m[2], "size": "128M"})
assert 400 <= st < 500 and "error" in v, (st, v)
assert m[2] not in cli("pool", "status", "mir"), "a refused replace changed the pool"
job = ok("POST", "/pools/mir/replace", {"old": m[1], "new": m[2], "size": "128M"}, status=202)
assert job["kind"] == "resilver" and job["target"] == "mir", job
evs = events(job["id"])
print(f"  {len(evs)} events: {[k for k, _ in evs]}")
assert evs, "no event"
assert all(k == "progress" for k, _ in evs[:-1]), evs
last_kind, last = evs[-1]
assert last_kind == "done" and last["state"] == "done" and last["progress"] == 1.0, evs[-1]
assert last["detail"]["kind"] == "resilver" and last["detail"]["resilvered"] > 0, last
assert ok("GET", f"/jobs/{job['id']}") == last, "the stream's last event is the job"
status = cli("pool", "status", "mir")
config = [line for line in status.splitlines() if line.startswith("\t")]
assert any(m[2] in line for line in config) and not any(m[1] in line for line in config), status
assert "resilvered" in status, status
# A finished job's stream is one event, then the end.
assert [k for k, _ in events(job["id"])] == ["done"]
st, v = api("GET", "/jobs/424242/events")
assert st == 404 and v["error"]["code"] == "not_found", (st, v)
cli("debug", "read", "mir/d", obj, "--seed", "7", "--len", str(8 << 20))

print("--- devices: offline, online, detach, attach (a resilver job), add and remove a cache device, clear")


def device_line(dev):
    """The line of DEV in `pool status mir`'s device tree ("" when it is not there)."""
    return next((line for line in cli("pool", "status", "mir").splitlines() if line.startswith("\t") and dev in line), "")


m.append(f"{WORK}/m3.img")
cache = f"{WORK}/c0.img"
ok("POST", f"/pools/mir/devices/{q(m[2])}/offline")
assert "OFFLINE" in device_line(m[2]), device_line(m[2])
refused("POST", f"/pools/mir/devices/{q(m[0])}/offline", status=422, code="failed")  # the last good copy
refused("POST", f"/pools/mir/devices/{q(m[2])}/online", {"bogus": 1})
ok("POST", f"/pools/mir/devices/{q(m[2])}/online")
# Online resilvers what was written while the device was offline: RESILVERING
# at first (on a loaded machine long enough for status to show it), then ONLINE.
line = device_line(m[2])
assert "ONLINE" in line or "RESILVERING" in line, line
for _ in range(300):
    if "ONLINE" in line:
        break
    time.sleep(0.1)
    line = device_line(m[2])
assert "ONLINE" in line, line
ok("POST", f"/pools/mir/devices/{q(m[2])}/detach")
assert device_line(m[2]) == "" and device_line(m[0]), cli("pool", "status", "mir")
refused("POST", f"/pools/mir/devices/{q(m[0])}/attach", {"new": m[3], "size": 5, "bogus": 1})
job = ok("POST", f"/pools/mir/devices/{q(m[0])}/attach", {"new": m[3], "size": "128M"}, status=202)
assert job["kind"] == "resilver" and job["target"] == "mir", job
evs = events(job["id"])
assert evs[-1][0] == "done" and evs[-1][1]["detail"]["resilvered"] > 0, evs[-1]
assert device_line(m[3]) and device_line(m[0]), cli("pool", "status", "mir")
cli("debug", "read", "mir/d", obj, "--seed", "7", "--len", str(8 << 20))
ok("POST", "/pools/mir/devices", {"vdevs": ["cache", cache], "size": "64M"})
assert device_line(cache), cli("pool", "status", "mir")
refused("DELETE", f"/pools/nosuch/devices/{q(cache)}", status=404, code="not_found")
ok("DELETE", f"/pools/mir/devices/{q(cache)}")
assert device_line(cache) == "", cli("pool", "status", "mir")
assert ok("POST", "/pools/mir/clear")["reimported"] is False
ok("DELETE", "/pools/mir")

print("--- send as a job into a file, taken by `cachalot receive`")
obj = cli("debug", "create", "tank/mysql/log").strip()
cli("debug", "write", "tank/mysql/log", obj, "--seed", "9", "--len", str(4 << 20))
ok("POST", "/snapshots", {"names": ["tank/mysql/log@tx1"]})
cli("debug", "write", "tank/mysql/log", obj, "--seed", "10", "--len", str(1 << 20))
ok("POST", "/snapshots", {"names": ["tank/mysql/log@tx2"]})
full, incr = f"{WORK}/tx1.stream", f"{WORK}/tx1-tx2.stream"
send = f"/snapshots/{q('tank/mysql/log@tx1')}/send"
refused("POST", send, {"file": full}, 401, "unauthorized", token=None)
refused("POST", send, {"file": "rel.stream"})
refused("POST", send, {"file": full, "bogus": 1})
refused("POST", send, {"file": 5})
refused("POST", send, {"file": f"{WORK}/no/dir/x.stream"}, 404, "not_found")
refused("POST", f"/snapshots/{q('tank/mysql/log@nope')}/send", {"file": full}, 404, "not_found")
refused("POST", send, {"file": full, "from": "tx2"})
assert not os.path.exists(full), "a refused send left a file"
with open(f"{WORK}/taken", "w") as f:
    f.write("keep me")
refused("POST", send, {"file": f"{WORK}/taken"}, 409, "already_exists")
assert open(f"{WORK}/taken").read() == "keep me", "a refused send overwrote a file"
job = ok("POST", send, {"file": full}, status=202)
assert job["kind"] == "send" and job["target"] == "tank/mysql/log@tx1", job
evs = events(job["id"])
kind, last = evs[-1]
assert kind == "done" and last["progress"] == 1.0, evs[-1]
assert last["detail"]["bytes"] == os.path.getsize(full) > 4 << 20, (last, os.path.getsize(full))
assert oct(os.stat(full).st_mode & 0o777) == "0o600", oct(os.stat(full).st_mode)
print(f"  full send: {len(evs)} events, {last['detail']['bytes']} bytes (estimated {last['detail']['estimated_bytes']})")
job = ok("POST", f"/snapshots/{q('tank/mysql/log@tx2')}/send", {"file": incr, "from": "@tx1"}, status=202)
assert events(job["id"])[-1][0] == "done"
assert os.path.getsize(incr) < os.path.getsize(full), "an incremental stream holds only the change"
for stream in (full, incr):
    with open(stream, "rb") as f:
        subprocess.run([CLI, "receive", "tank/rx"], stdin=f, check=True, capture_output=True)
assert cli("list", "-H", "-t", "snapshot", "-o", "name", "tank/rx").split() == ["tank/rx@tx1", "tank/rx@tx2"]
cli("debug", "read", "tank/rx", obj, "--seed", "10", "--len", str(1 << 20))
ok("DELETE", f"/datasets/{q('tank/rx')}?recursive=true")
for s in ("tx1", "tx2"):
    ok("DELETE", f"/snapshots/{q('tank/mysql/log@' + s)}")

print("--- iSCSI and NBD shares of a volume; share list with clients")
for proto in ("iscsi", "nbd"):
    refused("PUT", f"/shares/{proto}/{q('tank/vol')}", status=401, code="unauthorized", token=None)
    refused("PUT", f"/shares/{proto}/{q('tank/nosuch')}", status=404, code="not_found")
    ok("PUT", f"/shares/{proto}/{q('tank/vol')}")
    assert prop("tank/vol", f"share{proto}") == "on", proto
    refused("DELETE", f"/shares/{proto}/{q('tank/vol')}", status=401, code="unauthorized", token=None)
    refused("DELETE", f"/shares/{proto}/{q('tank/nosuch')}", status=404, code="not_found")
rows = ok("GET", "/shares")
mine = {r["protocol"]: r for r in rows if r["name"] == "tank/vol"}
assert set(mine) == {"iscsi", "nbd"}, rows
assert mine["iscsi"]["path"].startswith("iqn.") and mine["iscsi"]["clients"] == [], mine
assert [line.split("\t")[:2] for line in cli("share", "list", "-H").splitlines() if line.startswith("tank/vol\t")] \
    == [["tank/vol", "iscsi"], ["tank/vol", "nbd"]]
for proto in ("iscsi", "nbd"):
    ok("DELETE", f"/shares/{proto}/{q('tank/vol')}")
    assert prop("tank/vol", f"share{proto}") == "off", proto
assert not [r for r in ok("GET", "/shares") if r["name"] == "tank/vol"]

print("--- replication: create, list with lag, pause, resume, run, destroy")
assert ok("GET", "/replication") == []


def relationships():
    """What a request may change: a resumed relationship's cycles (to nowhere here)
    change its lag, last error and state (idle, running, failed) on their own, so
    of the state only whether it is paused counts."""
    return [
        {**{k: r.get(k) for k in ("name", "source", "target", "schedule")}, "paused": r.get("state") == "paused"}
        for r in ok("GET", "/replication")
    ]


def refused_repl(method, path, body=None, status=400, code="invalid_request", token=TOKEN):
    """A refused replication request changes no relationship (nor anything else)."""
    before = relationships()
    refused(method, path, body, status, code, token=token)
    assert relationships() == before, f"{method} {path} {body} changed the relationships"


r1 = {"name": "r1", "source": "tank/mysql", "target": "127.0.0.1:9/tank/copy", "paused": True}
refused_repl("POST", "/replication", r1, status=401, code="unauthorized", token=None)
refused_repl("POST", "/replication", {**r1, "bogus": 1})
refused_repl("POST", "/replication", {**r1, "paused": "yes"})
refused_repl("POST", "/replication", {k: v for k, v in r1.items() if k != "target"})
refused_repl("POST", "/replication", {**r1, "name": "bad name"})
refused_repl("POST", "/replication", {**r1, "source": "tank/nosuch"}, status=404, code="not_found")
refused_repl("POST", "/replication", {**r1, "target": "no-port/tank/copy"})
refused_repl("POST", "/replication", {**r1, "schedule": "0s"})
refused_repl("POST", "/replication", {**r1, "source": "tank/mysql/data,tank/mysql/log"})  # a MySQL set without its socket
ok("POST", "/replication", r1)
refused_repl("POST", "/replication", r1, status=409, code="already_exists")
rows = ok("GET", "/replication")
assert [r["name"] for r in rows] == ["r1"] and rows[0]["state"] == "paused" and "lag" in rows[0], rows
assert cli("replication", "list", "-H").split("\t")[:3] == ["r1", "tank/mysql", "127.0.0.1:9/tank/copy"], cli("replication", "list", "-H")
assert ok("GET", "/replication/r1") == rows
refused("GET", "/replication/nosuch", status=404, code="not_found")
refused("POST", "/replication/r1/resume", status=401, code="unauthorized", token=None)
refused("POST", "/replication/nosuch/resume", status=404, code="not_found")
refused("POST", "/replication/nosuch/pause", status=404, code="not_found")
refused("POST", "/replication/nosuch/run", status=404, code="not_found")
refused_repl("POST", "/replication/r1/run", status=401, code="unauthorized", token=None)
ok("POST", "/replication/r1/resume")
assert cli("replication", "list", "-H").split("\t")[3] != "paused", cli("replication", "list", "-H")
refused_repl("POST", "/replication/r1/pause", status=401, code="unauthorized", token=None)
ok("POST", "/replication/r1/pause")
assert cli("replication", "list", "-H").split("\t")[3] == "paused"
# No peer listens at 127.0.0.1:9: the cycle fails, with a JSON error and the
# failure recorded in the list.
st, v = api("POST", "/replication/r1/run")
assert 400 <= st < 600 and v["error"]["message"], (st, v)
assert ok("GET", "/replication/r1")[0]["last_error"], "the failed run is recorded"
refused_repl("DELETE", "/replication/r1", status=401, code="unauthorized", token=None)
refused_repl("DELETE", "/replication/nosuch", status=404, code="not_found")
ok("DELETE", "/replication/r1")
assert ok("GET", "/replication") == [] and cli("replication", "list", "-H") == ""

print("--- the other routes' refusals: no token, names that do not exist, bad input; nothing changed")
# tank/mysql/data is a clone of tank/c1@s1 here (promoted above), so a promote
# or a rollback that went through would show in the state refused() compares.
log, data = q("tank/mysql/log"), q("tank/mysql/data")
refused("POST", "/datasets", {"name": "tank/nt"}, 401, "unauthorized", token=None)
refused("DELETE", f"/datasets/{log}", status=401, code="unauthorized", token=None)
refused("DELETE", f"/datasets/{log}", status=403, code="forbidden", token="0" * 64)
refused("PUT", f"/datasets/{log}/properties/quota", {"value": "1G"}, 401, "unauthorized", token=None)
refused("PUT", f"/datasets/{log}/properties/bogus", {"value": "1"})
refused("DELETE", f"/datasets/{data}/properties/recordsize", status=401, code="unauthorized", token=None)
refused("DELETE", f"/datasets/{q('tank/nope')}/properties/quota", status=404, code="not_found")
refused("DELETE", f"/datasets/{data}/properties/bogus")
refused("POST", f"/datasets/{data}/promote", status=401, code="unauthorized", token=None)
refused("POST", f"/datasets/{q('tank/nope')}/promote", status=404, code="not_found")
refused("POST", f"/datasets/{log}/promote", status=400, code="invalid_request")
refused("POST", "/snapshots", {"names": ["tank/mysql/log@nt"]}, 401, "unauthorized", token=None)
refused("GET", f"/snapshots/{q('tank/mysql/log@nope')}", status=404, code="not_found")
refused("POST", f"/snapshots/{q('tank/c1@s1')}/rollback", {}, 401, "unauthorized", token=None)
refused("POST", f"/snapshots/{q('tank/c1@nope')}/rollback", {}, 404, "not_found")
refused("GET", "/snapshots?bogus=1")
refused("POST", f"/snapshots/{q('tank/c1@s1')}/clone", {"target": "tank/c3"}, 401, "unauthorized", token=None)
refused("DELETE", f"/snapshots/{q('tank/mysql/data@s1')}", status=401, code="unauthorized", token=None)
refused("PUT", f"/shares/nfs/{log}", {"options": "rw=127.0.0.1/32"}, 401, "unauthorized", token=None)
refused("PUT", f"/shares/nfs/{q('tank/nope')}", {"options": "rw=127.0.0.1/32"}, 404, "not_found")
refused("DELETE", f"/shares/nfs/{q('tank/nope')}", status=404, code="not_found")
ok("PUT", f"/shares/nfs/{log}", {"options": "rw=127.0.0.1/32"})
refused("DELETE", f"/shares/nfs/{log}", status=401, code="unauthorized", token=None)
ok("DELETE", f"/shares/nfs/{log}")
refused("POST", "/pools/tank/export", status=401, code="unauthorized", token=None)
refused("POST", "/pools/nosuch/export", status=404, code="not_found")
refused("DELETE", "/pools/nosuch", status=404, code="not_found")
refused("POST", "/pools/tank/import", {"dirs": [WORK]}, 409, "already_exists")
refused("POST", "/pools/tank/scrub", status=401, code="unauthorized", token=None)

print("--- pairing: a pairing token, refusals that pin nothing, pair with this appliance's own listener")
REPL_ADDR = open(os.path.join(os.environ["HOME_DIR"], "replication.addr")).read().strip()
assert ok("GET", "/peers") == [] and cli("replication", "peers", "-H") == ""


def refused_pair(body, status, code, token=TOKEN):
    """A refused pairing pins no peer (nor changes anything else)."""
    refused("POST", "/peers", body, status, code, token=token)
    assert ok("GET", "/peers") == [] and cli("replication", "peers", "-H") == "", body


refused("POST", "/peers/token", {}, 401, "unauthorized", token=None)
refused("POST", "/peers/token", {"bogus": 1})
pt = ok("POST", "/peers/token", {})
assert len(pt["token"]) >= 20 and pt["fingerprint"], pt
good_pair = {"address": REPL_ADDR, "token": pt["token"]}
refused_pair(good_pair, 401, "unauthorized", token=None)
refused_pair(good_pair, 403, "forbidden", token="0" * 64)
refused_pair({"address": REPL_ADDR}, 400, "invalid_request")
refused_pair({**good_pair, "token": 5}, 400, "invalid_request")
refused_pair({**good_pair, "bogus": 1}, 400, "invalid_request")
refused_pair({**good_pair, "address": "no-port"}, 400, "invalid_request")
refused_pair({**good_pair, "address": "127.0.0.1:9"}, 422, "failed")
refused_pair({**good_pair, "token": "0" * len(pt["token"])}, 422, "failed")  # and the right one still works
v = ok("POST", "/peers", good_pair)
assert v["fingerprint"] == pt["fingerprint"], (v, pt)
peers = ok("GET", "/peers")
assert len(peers) == 1 and peers[0]["address"] == REPL_ADDR, peers
assert cli("replication", "peers", "-H").split("\t")[:2] == [peers[0]["fingerprint"], REPL_ADDR], cli("replication", "peers", "-H")
refused("POST", "/peers", good_pair, 422, "failed")  # a pairing token works once
assert ok("GET", "/peers") == peers, "a used pairing token changed the peers"

print("--- replication break, resync, reverse with a peer appliance (test_api.sh's second daemon)")
# A pairing with this appliance's own listener cannot resync: the target side
# refuses a rollback for a relationship that runs there (replication_serve.rs).
PEER_ADDR = os.environ["PEER_ADDR"]


def peer(*args):
    """The peer appliance's CLI."""
    return cli("--socket", os.environ["PEER_SOCKET"], *args)


def peer_snaps(fs):
    return peer("list", "-H", "-t", "snapshot", "-o", "name", fs).split()


def repl_state(name):
    """The STATE column of `replication list` for NAME."""
    return cli("replication", "list", "-H", name).split("\t")[3]


os.makedirs(f"{WORK}/peer")  # not in WORK itself, where the import below looks for "tank"
peer("pool", "create", "-s", "256M", "tank", f"{WORK}/peer/d0.img")
ok("POST", "/peers", {"address": PEER_ADDR, "token": peer("replication", "pair").strip()})
ok("POST", "/datasets", {"name": "tank/rsrc"})
ok("POST", "/replication", {"name": "r3", "source": "tank/rsrc", "target": f"{PEER_ADDR}/tank/copy", "paused": True})
ok("POST", "/replication/r3/run")
first = peer_snaps("tank/copy")
assert len(first) == 1 and first[0].startswith("tank/copy@repl-r3-"), first
refused_repl("POST", "/replication/r3/break", status=401, code="unauthorized", token=None)
refused_repl("POST", "/replication/r3/break", {"bogus": 1})
refused("POST", "/replication/nosuch/break", status=404, code="not_found")
assert repl_state("r3") == "paused"
v = ok("POST", "/replication/r3/break")
assert v["last_snapshot"] == first[0].split("@")[1], v
assert repl_state("r3") == "broken", cli("replication", "list", "-H", "r3")
peer("snapshot", "tank/copy@after-break")  # the broken-off target used on its own
refused("POST", "/replication/r3/resync", {}, 401, "unauthorized", token=None)
refused("POST", "/replication/r3/resync", {"force": "yes"})
refused("POST", "/replication/nosuch/resync", {}, 404, "not_found")
v = refused("POST", "/replication/r3/resync", {}, 422, "failed")
assert "tank/copy@after-break" in v["error"]["message"], v
assert "tank/copy@after-break" in peer_snaps("tank/copy") and repl_state("r3") == "broken", "a refused resync changed something"
v = ok("POST", "/replication/r3/resync", {"force": True})
assert "tank/copy@after-break" in v["destroyed"], v
assert peer_snaps("tank/copy") == first and repl_state("r3") != "broken", (peer_snaps("tank/copy"), repl_state("r3"))
for _ in range(300):  # a resync resumes: let the cycle it starts end before the next break
    if repl_state("r3") != "running":
        break
    time.sleep(0.1)
ok("POST", "/replication/r3/break")
refused("POST", "/replication/r3/reverse", {"address": REPL_ADDR}, 401, "unauthorized", token=None)
refused("POST", "/replication/r3/reverse", {"address": 5})
refused("POST", "/replication/r3/reverse", {"address": REPL_ADDR, "bogus": 1})
refused("POST", "/replication/nosuch/reverse", {"address": REPL_ADDR}, 404, "not_found")
assert repl_state("r3") == "broken" and "r3" not in peer("replication", "list", "-H")
v = ok("POST", "/replication/r3/reverse", {"address": REPL_ADDR})
assert v["source"] == f"{PEER_ADDR}/tank/copy" and v["target"] == f"{REPL_ADDR}/tank/rsrc" and v["destroyed"] == [], v
assert "r3" not in cli("replication", "list", "-H"), "r3 still runs here after its reverse"
assert peer("replication", "list", "-H", "r3").split("\t")[:3] == ["r3", "tank/copy", f"{REPL_ADDR}/tank/rsrc"], \
    peer("replication", "list", "-H", "r3")
before = cli("list", "-H", "-t", "snapshot", "-o", "name", "tank/rsrc").split()
peer("replication", "run", "r3")  # the peer now sends to this appliance
rsrc = cli("list", "-H", "-t", "snapshot", "-o", "name", "tank/rsrc").split()
# Its newest snapshot arrived here (the retention of its cycles may prune older ones).
assert rsrc[-1] not in before and rsrc[-1] == peer_snaps("tank/copy")[-1].replace("tank/copy", "tank/rsrc"), (before, rsrc)
peer("replication", "destroy", "r3")

print("--- destroy, export, import")
ok("DELETE", f"/datasets/{q('tank/vol')}")
assert "tank/vol" not in cli("list", "-H", "-o", "name")
ok("POST", "/pools/tank/export")
assert cli("pool", "list", "-H") == ""
refused("POST", "/pools/tank/import", {"dirs": "x"})
refused("POST", "/pools/tank/import", {"dirs": [WORK]}, 401, "unauthorized", token=None)
refused("POST", "/pools/nosuch/import", {"dirs": [WORK]}, 404, "not_found")
refused("POST", "/pools/tank/export", status=404, code="not_found")
refused("POST", "/pools/tank/import", {"dirs": [WORK], "name": "tank"})
ok("POST", "/pools/tank/import", {"dirs": [WORK]})
assert cli("pool", "list", "-H").startswith("tank\t")
assert prop("tank/mysql/data", "recordsize") == "16K"

print("--- the RPC endpoint refuses token management whatever the token")
st, v = api("POST", "/call", {"op": "token.create", "args": {"name": "x"}})
assert st == 403 and not v["ok"], (st, v)
assert "x" not in cli("token", "list", "-H").split()

print("--- destroy the pool")
refused("DELETE", "/pools/tank", status=401, code="unauthorized", token=None)
ok("DELETE", "/pools/tank")
assert cli("pool", "list", "-H") == ""
print("api_check: all routes passed")
