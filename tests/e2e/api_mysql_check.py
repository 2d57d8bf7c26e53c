"""The /api/v1/mysql routes against a running daemon and a real MariaDB on its
datasets (tests/e2e/test_api_mysql.sh), each step checked through the CLI or the
server. Usage: api_mysql_check.py ADDR TOKEN CACHALOT WORKDIR ARTIFACTS PHASE
with $MY_SOCK (the source server) and $D (its mounts' parent) set.
PHASE "running": snapshot set, list, advise, clone to a running replica as a job
(events to the end), restore refused while the server runs. PHASE "stopped"
(the servers are stopped): restore."""
import json
import os
import sys
import time

from clients import assert_replicating, sql  # tests/e2e/clients.py
from api_lib import api, cli, events, ok, prop, q, refused  # tests/e2e/api_lib.py

PHASE = sys.argv[6]
MY_SOCK, D = os.environ["MY_SOCK"], os.environ["D"]
SET = ["tank/mysql/data", "tank/mysql/log"]


def jobs():
    return [j["id"] for j in ok("GET", "/jobs")]


def refused_clone(body, status, code, token=True):
    """A refused clone changes nothing and makes no job."""
    before = jobs()
    kw = {} if token else {"token": None}
    refused("POST", "/mysql/clones", body, status, code, **kw)
    assert jobs() == before, f"a refused clone made a job: {body}"


if PHASE == "running":
    print("--- openapi")
    doc = ok("GET", "/openapi.json")
    for p in ["/api/v1/mysql/snapshots", "/api/v1/mysql/clones", "/api/v1/mysql/restore",
              "/api/v1/mysql/advise"]:
        assert p in doc["paths"], p
    assert "MysqlClone" in doc["components"]["schemas"], "the clone request's schema is documented"

    print("--- snapshot set: refusals change nothing")
    good = {"socket": MY_SOCK, "datasets": SET, "snapshot": "s1"}
    refused("POST", "/mysql/snapshots", good, 401, "unauthorized", token=None)
    refused("POST", "/mysql/snapshots", good, 403, "forbidden", token="0" * 64)
    refused("POST", "/mysql/snapshots", {**good, "bogus": 1})
    refused("POST", "/mysql/snapshots", {**good, "datasets": "tank/mysql/data"})
    refused("POST", "/mysql/snapshots", {**good, "keep": "two"})
    refused("POST", "/mysql/snapshots", {"socket": MY_SOCK, "datasets": SET})
    refused("POST", "/mysql/snapshots", {**good, "socket": "mysqld.sock"})
    refused("POST", "/mysql/snapshots", {**good, "datasets": ["tank/mysql/data@x"]})
    refused("POST", "/mysql/snapshots", {**good, "socket": f"{D}/nope.sock"}, 404, "not_found")
    refused("POST", "/mysql/snapshots", {**good, "datasets": ["tank/nosuch"]}, 404, "not_found")
    assert sql(MY_SOCK, "select n from ck.counter") == "0"

    print("--- snapshot set: take, list")
    sql(MY_SOCK, "update ck.counter set n = 1")
    r = ok("POST", "/mysql/snapshots", good)
    sql(MY_SOCK, "update ck.counter set n = 2")
    assert r["snapshots"] == ["tank/mysql/data@s1", "tank/mysql/log@s1"], r
    assert r["gtid"] and r["binlog_file"].startswith("binlog."), r
    assert r["method"] and r["blocked_ms"] > 0, r
    for s in r["snapshots"]:
        assert prop(s, "cachalot.mysql:members") == ",".join(SET), s
        assert prop(s, "cachalot.mysql:gtid") == r["gtid"], s
    print(f"  writes blocked {r['blocked_ms']} ms ({r['method']}), gtid {r['gtid']}")
    refused("POST", "/mysql/snapshots", good, 409, "already_exists")
    cli("snapshot", "tank/mysql/data@plain")  # not a MySQL set: not listed
    sets = ok("GET", "/mysql/snapshots")
    assert [s["name"] for s in sets] == ["tank/mysql/data@s1"], sets
    assert sets[0]["members"] == SET and sets[0]["gtid"] == r["gtid"], sets
    assert sets[0]["binlog_file"] == r["binlog_file"] and sets[0]["created"] > 0, sets
    assert ok("GET", "/mysql/snapshots?pool=tank") == sets
    listed = cli("mysql", "list", "-H").splitlines()
    assert [line.split("\t")[:2] for line in listed] == [["tank/mysql/data@s1", ",".join(SET)]], listed
    refused("GET", "/mysql/snapshots?pool=nosuch", status=404, code="not_found")
    refused("GET", "/mysql/snapshots?bogus=1")

    print("--- advise")
    refused("POST", "/mysql/advise", {"socket": MY_SOCK}, 401, "unauthorized", token=None)
    refused("POST", "/mysql/advise", {"socket": "rel.sock"})
    refused("POST", "/mysql/advise", {"socket": MY_SOCK, "arc_size": "1G"})
    a = ok("POST", "/mysql/advise", {"socket": MY_SOCK, "fs": "tank/mysql/data"})
    assert a["datadir_dataset"] == "tank/mysql/data" and a["version"], a
    settings = [x["setting"] for x in a["advice"]]
    assert "innodb_doublewrite = 0" in settings, settings
    assert {x["kind"] for x in a["advice"]} <= {"mycnf", "dataset", "measure", "ok"}, a
    assert any("recordsize=16K on tank/mysql/data" in s for s in settings), settings

    print("--- clone to a running replica: refusals make no job and change nothing")
    clone = {"snapshot": "tank/mysql/data@s1", "target": "tank/replica",
             "mountpoint": f"{D}/replica", "replica_of": MY_SOCK}
    refused_clone(clone, 401, "unauthorized", token=False)
    refused_clone({**clone, "bogus": True}, 400, "invalid_request")
    refused_clone({**clone, "replica_of": "rel.sock"}, 400, "invalid_request")
    refused_clone({**clone, "port": "3307"}, 400, "invalid_request")
    refused_clone({"target": "tank/replica"}, 400, "invalid_request")
    refused_clone({**clone, "snapshot": "tank/mysql/data@nope"}, 404, "not_found")
    refused_clone({**clone, "target": "tank/mysql"}, 409, "already_exists")
    refused_clone({**clone, "replica_of": f"{D}/nope.sock"}, 404, "not_found")
    refused_clone({**clone, "snapshot": "tank/mysql/data@plain"}, 422, "failed")
    assert not os.path.exists(f"{D}/replica"), "a refused clone made its mount point"

    print("--- clone to a running replica: a job, followed by its events")
    job = ok("POST", "/mysql/clones", clone, status=202)
    assert job["kind"] == "mysql-clone" and job["target"] == "tank/replica", job
    evs = events(job["id"])
    steps = [(d["detail"] or {}).get("step") for k, d in evs if k == "progress"]
    print(f"  {len(evs)} events, steps: {steps}")
    kind, last = evs[-1]
    assert kind == "done", evs[-1]
    assert last["progress"] == 1.0 and last["error"] is None, last
    fractions = [d["progress"] for _, d in evs]
    assert fractions == sorted(fractions), f"progress went back: {fractions}"
    # Every step is in the stream however short (the job keeps its last changes),
    # and a reconnecting client goes on after the last event it saw.
    assert steps == [None, "checking the snapshot set", "cloning and mounting tank/mysql/data@s1",
                     "cloning and mounting tank/mysql/log@s1", "writing the server's config",
                     "starting the server (crash recovery)", "starting replication"], steps
    assert events(job["id"], last_event_id=2) == evs[2:], "Last-Event-ID resumes after that change"
    assert events(job["id"], last_event_id=999) == evs[-1:], "an id from the future still gets the end"
    assert [k for k, _ in events(job["id"])] == ["done"], "a finished job's stream is its end"
    report = last["detail"]
    pid = report["server"]["pid"]
    replica_sock = report["server"]["socket"]
    assert [c["dataset"] for c in report["clones"]] == ["tank/replica/data", "tank/replica/log"], report
    assert report["replica_from"] == r["gtid"], report
    with open(f"{D}/replica.pid", "w") as f:  # for the script's cleanup
        f.write(str(pid))
    assert prop("tank/replica/data", "cachalot.mysql:pid") == str(pid)
    assert prop("tank/replica/data", "origin") == "tank/mysql/data@s1"
    os.kill(pid, 0)
    assert_replicating(replica_sock)
    sql(MY_SOCK, "update ck.counter set n = 3")
    gtid = sql(MY_SOCK, "select @@gtid_binlog_pos")
    for _ in range(200):
        if sql(replica_sock, "select @@gtid_slave_pos") == gtid:
            break
        time.sleep(0.1)
    assert sql(replica_sock, "select n from ck.counter") == "3", "the replica applies the source's writes"
    assert ok("GET", f"/jobs/{job['id']}") == last
    refused_clone(clone, 409, "already_exists")
    print(f"  replica pid {pid} on {replica_sock}: replicating, in {report['elapsed_s']:.1f} s")

    print("--- restore: refused while the server runs")
    refused("POST", "/mysql/restore", {"snapshot": "tank/mysql/data@s1"}, 401, "unauthorized", token=None)
    refused("POST", "/mysql/restore", {"snapshot": "tank/mysql/data@s1", "recursive": "no"})
    refused("POST", "/mysql/restore", {"snapshot": "tank/mysql/data@nope", "recursive": True}, 404, "not_found")
    v = refused("POST", "/mysql/restore", {"snapshot": "tank/mysql/data@s1", "recursive": True}, 409, "busy")
    assert "in use" in v["error"]["message"], v
    assert sql(MY_SOCK, "select n from ck.counter") == "3", "a refused restore changed the data"
else:
    print("--- restore (servers stopped)")
    r = ok("POST", "/mysql/restore", {"snapshot": "tank/mysql/data@s1", "recursive": True})
    assert r["rolled_back"] == ["tank/mysql/data@s1", "tank/mysql/log@s1"], r
    assert [m["dataset"] for m in r["remounted"]] == SET, r
    assert "tank/mysql/data@plain" not in cli("list", "-H", "-t", "snapshot", "-o", "name"), \
        "recursive restore destroys the newer snapshot"
    print(json.dumps(r))
print(f"api_mysql_check {PHASE}: passed")
