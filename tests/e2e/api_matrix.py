"""The route matrix (tests/e2e/test_api_matrix.sh), driven by the served
/api/v1/openapi.json so that a route added later cannot escape it: every
documented operation must have an entry in MATRIX (and every entry an operation),
else the run fails with the list of the operations left out.

Every operation that changes something is refused, each with its JSON error code,
and each refusal leaves the fingerprint (pools with their status, every dataset and
snapshot with all properties, shares, mounts, jobs, replication relationships,
peers, tokens, the files of the work directory) as it was:
  - no token, or an Authorization header of another scheme: 401 unauthorized;
    a revoked token, or one that was never valid: 403 forbidden;
  - with the token: a body that is not JSON, a body with an unknown field, each
    field of the body's schema in turn given a value of a wrong type, each
    required field left out: 400 invalid_request (an operation without a body
    refuses any body but `{}`); an unknown query parameter (on a route that
    documents none too), and each boolean or integer query parameter with a
    wrong value: 400;
  - a name that does not exist (where the route names something): 404 not_found.
The good request each refusal starts from names things that exist, and would
change the state if it went through, so a missing check shows twice: in the
status and in the fingerprint.
Reads are open on the loopback listener (docs/architecture.md, "Tokens"): each
documented GET answers 200 with the token and without one; a name that does not
exist is 404, an unknown query parameter 400. POST /call (the op-name RPC) answers
each refusal with the same stable code in its own shape ({"ok": false, "code"}).

Usage: api_matrix.py ADDR TOKEN CACHALOT WORKDIR ARTIFACTS REVOKED_TOKEN (the
state test_api_matrix.sh sets up; HOME_DIR in the environment)."""
import os
import sys

from api_lib import TOKEN, WORK, _diff, api, cli, events, ok, q, refused  # tests/e2e/api_lib.py

REVOKED = sys.argv[6]
NEVER_VALID = "0" * 64
HOME = os.environ["HOME_DIR"]
REPL_ADDR = open(os.path.join(HOME, "replication.addr")).read().strip()
D0 = f"{WORK}/d0.img"
M1, MC = f"{WORK}/m1.img", f"{WORK}/mc.img"  # pool mir: a mirror with a cache device

# ---- the fingerprint ----


def _files(root):
    out = []
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if not os.path.ismount(os.path.join(d, x))]
        for f in sorted(files):
            p = os.path.join(d, f)
            out.append((os.path.relpath(p, root), os.path.getsize(p)))
    return sorted(out)


def _replication():
    """The relationships; their lag grows with the clock, so it is left out."""
    return [{k: v for k, v in r.items() if k != "lag"} for r in ok("GET", "/replication")]


def fingerprint():
    """Everything a refused request must leave as it was."""
    pools = ok("GET", "/pools")
    names = cli("list", "-H", "-t", "all", "-o", "name").split()
    return {
        "pools": pools,
        "pool_status": [ok("GET", f"/pools/{q(p['name'])}") for p in pools],
        "properties": cli("get", "-H", "-p", "-o", "name,property,value,source", "all", *names) if names else "",
        "snapshots": ok("GET", "/snapshots?recursive=true"),
        "shares": ok("GET", "/shares"),
        "mounts": ok("GET", "/mounts"),
        "jobs": ok("GET", "/jobs"),
        "replication": _replication(),
        "peers": ok("GET", "/peers"),
        "tokens": cli("token", "list", "-H"),
        "setup": ok("GET", "/setup"),
        "files": _files(WORK),
    }


# ---- the matrix ----
# Each entry: `params` fills the path's {names} with things that exist; `body`
# and `query` make the good request; `missing` overrides params, body or query so
# that the request names something that does not exist (404), or is the reason
# why the route names nothing that must exist. Reads: `read` is "json" or "sse".

NOTHING_NAMED = "the request names nothing that must exist"
MATRIX = {
    # pools
    ("POST", "/api/v1/pools"): dict(
        body={"name": "tank2", "vdevs": [f"{WORK}/p2.img"], "size": "64M"},
        missing="creates a pool from files it makes: " + NOTHING_NAMED),
    ("DELETE", "/api/v1/pools/{pool}"): dict(params={"pool": "extra"}, missing={"params": {"pool": "nosuch"}}),
    ("POST", "/api/v1/pools/{pool}/export"): dict(params={"pool": "extra"}, missing={"params": {"pool": "nosuch"}}),
    ("POST", "/api/v1/pools/{pool}/import"): dict(
        params={"pool": "gone"}, body={"dirs": [WORK]}, missing={"params": {"pool": "nosuch"}}),
    ("POST", "/api/v1/pools/{pool}/replace"): dict(
        params={"pool": "tank"}, body={"old": D0, "new": f"{WORK}/new.img", "size": "256M"},
        missing={"params": {"pool": "nosuch"}}),
    ("POST", "/api/v1/pools/{pool}/scrub"): dict(params={"pool": "tank"}, missing={"params": {"pool": "nosuch"}}),
    ("POST", "/api/v1/pools/{pool}/clear"): dict(params={"pool": "tank"}, missing={"params": {"pool": "nosuch"}}),
    ("POST", "/api/v1/pools/{pool}/devices"): dict(
        params={"pool": "tank"}, body={"vdevs": ["cache", f"{WORK}/c0.img"], "size": "64M"},
        missing={"params": {"pool": "nosuch"}}),
    ("POST", "/api/v1/pools/{pool}/devices/{device}/attach"): dict(
        params={"pool": "tank", "device": D0}, body={"new": f"{WORK}/att.img", "size": "256M"},
        missing={"params": {"pool": "nosuch", "device": D0}}),
    ("POST", "/api/v1/pools/{pool}/devices/{device}/detach"): dict(
        params={"pool": "mir", "device": M1}, missing={"params": {"pool": "nosuch", "device": M1}}),
    ("POST", "/api/v1/pools/{pool}/devices/{device}/offline"): dict(
        params={"pool": "mir", "device": M1}, missing={"params": {"pool": "nosuch", "device": M1}}),
    ("POST", "/api/v1/pools/{pool}/devices/{device}/online"): dict(
        params={"pool": "mir", "device": M1}, missing={"params": {"pool": "nosuch", "device": M1}}),
    ("DELETE", "/api/v1/pools/{pool}/devices/{device}"): dict(
        params={"pool": "mir", "device": MC}, missing={"params": {"pool": "nosuch", "device": MC}}),
    # datasets
    ("POST", "/api/v1/datasets"): dict(body={"name": "tank/new"}, missing={"body": {"name": "nosuch/new"}}),
    ("DELETE", "/api/v1/datasets/{name}"): dict(params={"name": "tank/fs2"}, missing={"params": {"name": "tank/nosuch"}}),
    ("POST", "/api/v1/datasets/{name}/mount"): dict(
        params={"name": "tank/fs2"}, body={"mountpoint": f"{WORK}/mnt2"}, missing={"params": {"name": "tank/nosuch"}}),
    ("POST", "/api/v1/datasets/{name}/unmount"): dict(
        params={"name": "tank/m"}, body={}, missing={"params": {"name": "tank/nosuch"}}),
    ("POST", "/api/v1/datasets/{name}/promote"): dict(params={"name": "tank/cl"}, missing={"params": {"name": "tank/nosuch"}}),
    ("PUT", "/api/v1/datasets/{name}/properties/{prop}"): dict(
        params={"name": "tank/fs", "prop": "quota"}, body={"value": "1G"},
        missing={"params": {"name": "tank/nosuch", "prop": "quota"}}),
    ("DELETE", "/api/v1/datasets/{name}/properties/{prop}"): dict(
        params={"name": "tank/fs", "prop": "recordsize"}, missing={"params": {"name": "tank/nosuch", "prop": "recordsize"}}),
    # snapshots
    ("POST", "/api/v1/snapshots"): dict(body={"names": ["tank/fs@new"]}, missing={"body": {"names": ["tank/nosuch@new"]}}),
    ("DELETE", "/api/v1/snapshots/{name}"): dict(params={"name": "tank/fs@s2"}, missing={"params": {"name": "tank/fs@nosuch"}}),
    ("POST", "/api/v1/snapshots/{name}/clone"): dict(
        params={"name": "tank/fs@s2"}, body={"target": "tank/newclone"}, missing={"params": {"name": "tank/fs@nosuch"}}),
    ("POST", "/api/v1/snapshots/{name}/rollback"): dict(
        params={"name": "tank/fs@s1"}, body={"recursive": True}, missing={"params": {"name": "tank/fs@nosuch"}}),
    ("PUT", "/api/v1/snapshots/{name}/holds/{tag}"): dict(
        params={"name": "tank/fs@s1", "tag": "mx"}, missing={"params": {"name": "tank/fs@nosuch", "tag": "mx"}}),
    ("DELETE", "/api/v1/snapshots/{name}/holds/{tag}"): dict(
        params={"name": "tank/fs@held", "tag": "keep"}, missing={"params": {"name": "tank/fs@nosuch", "tag": "keep"}}),
    ("POST", "/api/v1/snapshots/{name}/send"): dict(
        params={"name": "tank/fs@s2"}, body={"file": f"{WORK}/out.stream"}, missing={"params": {"name": "tank/fs@nosuch"}}),
    # shares
    ("PUT", "/api/v1/shares/nfs/{name}"): dict(
        params={"name": "tank/fs2"}, body={"options": "rw=127.0.0.1/32"}, missing={"params": {"name": "tank/nosuch"}}),
    ("DELETE", "/api/v1/shares/nfs/{name}"): dict(params={"name": "tank/fs"}, missing={"params": {"name": "tank/nosuch"}}),
    ("PUT", "/api/v1/shares/iscsi/{name}"): dict(params={"name": "tank/vol2"}, missing={"params": {"name": "tank/nosuch"}}),
    ("DELETE", "/api/v1/shares/iscsi/{name}"): dict(params={"name": "tank/vol"}, missing={"params": {"name": "tank/nosuch"}}),
    ("PUT", "/api/v1/shares/nbd/{name}"): dict(params={"name": "tank/vol2"}, missing={"params": {"name": "tank/nosuch"}}),
    ("DELETE", "/api/v1/shares/nbd/{name}"): dict(params={"name": "tank/vol"}, missing={"params": {"name": "tank/nosuch"}}),
    # replication
    ("POST", "/api/v1/replication"): dict(
        body={"name": "r2", "source": "tank/fs", "target": "127.0.0.1:9/tank/copy", "paused": True},
        missing={"body": {"name": "r2", "source": "tank/nosuch", "target": "127.0.0.1:9/tank/copy"}}),
    ("DELETE", "/api/v1/replication/{name}"): dict(params={"name": "r1"}, missing={"params": {"name": "nosuch"}}),
    ("POST", "/api/v1/replication/{name}/run"): dict(params={"name": "r1"}, missing={"params": {"name": "nosuch"}}),
    ("POST", "/api/v1/replication/{name}/pause"): dict(params={"name": "r1"}, missing={"params": {"name": "nosuch"}}),
    ("POST", "/api/v1/replication/{name}/resume"): dict(params={"name": "r1"}, missing={"params": {"name": "nosuch"}}),
    ("POST", "/api/v1/replication/{name}/break"): dict(params={"name": "r1"}, missing={"params": {"name": "nosuch"}}),
    ("POST", "/api/v1/replication/{name}/resync"): dict(
        params={"name": "r1"}, body={"force": True}, missing={"params": {"name": "nosuch"}}),
    ("POST", "/api/v1/replication/{name}/reverse"): dict(
        params={"name": "r1"}, body={"force": True}, missing={"params": {"name": "nosuch"}}),
    ("POST", "/api/v1/peers"): dict(
        body={"address": REPL_ADDR, "token": "x" * 32}, missing="the peer is an address: " + NOTHING_NAMED),
    ("POST", "/api/v1/peers/token"): dict(body={}, missing=NOTHING_NAMED),
    # MySQL (the server is not needed for a refusal; test_api_mysql.sh runs them)
    ("POST", "/api/v1/mysql/snapshots"): dict(
        body={"socket": f"{WORK}/no.sock", "datasets": ["tank/fs"], "snapshot": "m1"},
        missing={"body": {"socket": f"{WORK}/no.sock", "datasets": ["tank/nosuch"], "snapshot": "m1"}}),
    ("POST", "/api/v1/mysql/clones"): dict(
        body={"snapshot": "tank/fs@s1", "target": "tank/myclone"},
        missing={"body": {"snapshot": "tank/nosuch@s1", "target": "tank/myclone"}}),
    ("POST", "/api/v1/mysql/restore"): dict(
        body={"snapshot": "tank/fs@s1"}, missing={"body": {"snapshot": "tank/nosuch@s1"}}),
    ("POST", "/api/v1/mysql/advise"): dict(
        body={"socket": f"{WORK}/no.sock", "fs": "tank/fs"},
        missing={"body": {"socket": f"{WORK}/no.sock", "fs": "tank/nosuch"}}),
    # the two with their own rules
    ("POST", "/api/v1/tokens/first"): dict(special="first_token"),
    ("POST", "/api/v1/call"): dict(special="rpc"),
    # reads
    ("GET", "/api/v1/pools"): dict(read="json"),
    ("GET", "/api/v1/pools/{pool}"): dict(read="json", params={"pool": "tank"}, missing={"params": {"pool": "nosuch"}}),
    ("GET", "/api/v1/datasets"): dict(read="json", query={"name": "tank"}, missing={"query": {"name": "tank/nosuch"}}),
    ("GET", "/api/v1/datasets/{name}"): dict(read="json", params={"name": "tank/fs"}, missing={"params": {"name": "tank/nosuch"}}),
    ("GET", "/api/v1/snapshots"): dict(read="json", query={"dataset": "tank/fs"}, missing={"query": {"dataset": "tank/nosuch"}}),
    ("GET", "/api/v1/snapshots/{name}"): dict(read="json", params={"name": "tank/fs@s1"}, missing={"params": {"name": "tank/fs@nosuch"}}),
    ("GET", "/api/v1/snapshots/{name}/diff"): dict(
        read="json", params={"name": "tank/fs@s1"}, query={"to": "tank/fs@s2"}, missing={"params": {"name": "tank/fs@nosuch"}}),
    ("GET", "/api/v1/snapshots/{name}/holds"): dict(
        read="json", params={"name": "tank/fs@held"}, missing={"params": {"name": "tank/fs@nosuch"}}),
    ("GET", "/api/v1/shares"): dict(read="json"),
    ("GET", "/api/v1/mounts"): dict(read="json"),
    ("GET", "/api/v1/jobs"): dict(read="json"),
    ("GET", "/api/v1/jobs/{id}"): dict(read="json", params={"id": "JOB"}, missing={"params": {"id": "999999"}}),
    ("GET", "/api/v1/jobs/{id}/events"): dict(read="sse", params={"id": "JOB"}, missing={"params": {"id": "999999"}}),
    ("GET", "/api/v1/replication"): dict(read="json"),
    ("GET", "/api/v1/replication/{name}"): dict(read="json", params={"name": "r1"}, missing={"params": {"name": "nosuch"}}),
    ("GET", "/api/v1/peers"): dict(read="json"),
    ("GET", "/api/v1/mysql/snapshots"): dict(read="json", query={"pool": "tank"}, missing={"query": {"pool": "nosuch"}}),
    ("GET", "/api/v1/analytics/stats"): dict(read="json"),
    ("GET", "/api/v1/analytics/show"): dict(read="json", query={"stat": "STAT", "last": "60s"},
                                            missing={"query": {"stat": "no.such.stat"}}),
    ("GET", "/api/v1/analytics/series"): dict(read="json", query={"stat": "STAT", "last": "60s"},
                                              missing={"query": {"stat": "no.such.stat"}}),
    ("GET", "/api/v1/analytics/heatmap"): dict(read="json", query={"stat": "disk.ops", "last": "60s", "by": "latency"},
                                               missing={"query": {"stat": "no.such.stat", "by": "latency"}}),
    ("GET", "/api/v1/analytics/usage"): dict(read="json"),
    ("GET", "/api/v1/analytics/overview"): dict(read="json"),
    ("GET", "/api/v1/setup"): dict(read="json"),
    ("GET", "/api/v1/openapi.json"): dict(read="json"),
}

# ---- the checks ----


def resolve(schema):
    while isinstance(schema, dict) and "$ref" in schema:
        schema = DOC["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema or {}


def json_types(schema):
    """The JSON types a schema accepts ({'any'} when it does not say)."""
    s = resolve(schema)
    if "oneOf" in s or "anyOf" in s:
        return set().union(*(json_types(x) for x in s.get("oneOf", s.get("anyOf"))))
    t = s.get("type")
    if t is None:
        return {"any"}
    t = set(t) if isinstance(t, list) else {t}
    return t | {"integer"} if "number" in t else t


def wrong_value(schema):
    """A value of a JSON type the schema does not accept (None if it takes any)."""
    allowed = json_types(schema)
    for value, kind in ((5, "integer"), ("x", "string"), (True, "boolean"), ([1], "array"), ({"k": 1}, "object")):
        if "any" not in allowed and kind not in allowed:
            return value
    return None


def url(path, params, query=None):
    for k, v in (params or {}).items():
        path = path.replace("{" + k + "}", q(v))
    path = path.removeprefix("/api/v1")
    return path + ("?" + "&".join(f"{k}={q(v)}" for k, v in query.items()) if query else "")


FP = None  # the Fingerprint of the run


class Fingerprint:
    """`refused` reads the state before and after each request; nothing but the
    matrix's own refused requests and reads run, so the state before one is the
    state after the one before it, and each refusal reads the state once."""

    def __init__(self):
        self.calls, self.last = 0, None

    def __call__(self):
        self.calls += 1
        if self.calls % 2 == 1 and self.last is not None:
            return self.last
        self.last = fingerprint()
        return self.last


FAILURES = []
REFUSALS = 0


def refuse(method, path, body=None, status=400, code="invalid_request", **kw):
    """One refusal; a wrong answer is recorded and the run goes on, so a failing
    run lists every refusal that failed (a changed state ends the run: the
    requests after it would start from another state)."""
    global REFUSALS
    REFUSALS += 1
    try:
        refused(method, path, body, status, code, state_of=FP, **kw)
    except AssertionError as e:
        if "changed something" in str(e):
            raise
        now = fingerprint()
        if now != FP.last:
            raise AssertionError(f"{e}; and it changed something: {_diff(FP.last, now)}") from None
        FAILURES.append(str(e))
        print(f"  FAILED: {e}")


def check_change(method, path, op, e):
    """Every refusal of an operation that changes something."""
    good = url(path, e.get("params"), e.get("query"))
    body = e.get("body")
    schema = resolve(op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema"))
    assert bool(schema) == (body is not None), f"{method} {path}: the entry's body and the document disagree"
    refuse(method, good, body, 401, "unauthorized", token=None)
    refuse(method, good, body, 401, "unauthorized", token=None, auth="Basic dXNlcjpwYXNz")
    refuse(method, good, body, 403, "forbidden", token=REVOKED)
    refuse(method, good, body, 403, "forbidden", token=NEVER_VALID)
    if schema:
        refuse(method, good, raw=b"{not json")
        refuse(method, good, {**body, "bogus_field": 1})
        for field, fs in schema.get("properties", {}).items():
            bad = wrong_value(fs)
            if bad is not None:
                refuse(method, good, {**body, field: bad})
        for field in schema.get("required", []):
            refuse(method, good, {k: v for k, v in body.items() if k != field})
    else:
        # No body: anything but an empty one or {} is refused.
        refuse(method, good, {"bogus_field": 1})
        refuse(method, good, [1])
    check_query(method, path, op, e, body)
    check_missing(method, path, e, body)


def check_query(method, path, op, e, body=None):
    """An unknown query parameter is refused, on a route that documents none too
    (it would otherwise be ignored, as an unknown body field once was)."""
    params = [p for p in op.get("parameters", []) if p["in"] == "query"]
    query = e.get("query") or {}
    refuse(method, url(path, e.get("params"), {**query, "bogus_param": "1"}), body)
    for p in params:
        if json_types(p.get("schema", {})) & {"boolean", "integer"}:
            refuse(method, url(path, e.get("params"), {**query, p["name"]: "maybe"}), body)


def check_missing(method, path, e, body=None):
    m = e.get("missing")
    if m is None:
        return
    if isinstance(m, str):
        print(f"  no missing-name check for {method} {path}: {m}")
        return
    m_url = url(path, m.get("params", e.get("params")), m.get("query", e.get("query")))
    refuse(method, m_url, m.get("body", body), 404, "not_found")


def check_read(method, path, op, e):
    good = url(path, e.get("params"), e.get("query"))
    if e["read"] == "sse":
        for token in (TOKEN, None):
            evs = events(int(e["params"]["id"]), token=token)
            assert evs and evs[-1][0] == "done", (good, evs)
    else:
        for token in (TOKEN, None):  # reads are open on the loopback listener
            st, v = api(method, good, token=token)
            assert st == 200, f"{method} {good} (token: {bool(token)}): {st} {v}"
    print(f"  ok, 200 with and without the token: {method} {good}")
    check_query(method, path, op, e)
    check_missing(method, path, e)


def check_rpc():
    """POST /call answers {"ok", "error", "code"}, `code` being the REST routes'
    stable code of the same error: a change needs a token (401 without one, 403
    with an unknown or revoked one), a malformed request or a query string is 400,
    an op's own refusal is 200 with ok=false; nothing changes."""
    def rpc(body, status, code, token=TOKEN, raw=None, auth=None, query=""):
        global REFUSALS
        REFUSALS += 1
        before = FP()
        st, v = api("POST", "/call" + query, body, token=token, raw=raw, auth=auth)
        assert FP() == before, f"POST /call{query} {body} changed something"
        if st == status and v["ok"] is False and v.get("code") == code:
            print(f"  ok, refused {st} {code}: POST /call{query} {body} -> {v['error']}")
        else:  # recorded, as `refuse` does: a failing run lists every one
            FAILURES.append(f"POST /call{query} {body if raw is None else raw}: {st} {v}, wanted {status} {code}")
            print(f"  FAILED: {FAILURES[-1]}")

    create = {"op": "ds.create", "args": {"name": "tank/rpc"}}
    rpc(create, 401, "unauthorized", token=None)
    rpc(create, 401, "unauthorized", token=None, auth="Basic dXNlcjpwYXNz")
    rpc(create, 403, "forbidden", token=REVOKED)
    rpc(create, 403, "forbidden", token=NEVER_VALID)
    rpc({"op": "token.create", "args": {"name": "rpc"}}, 403, "forbidden")
    rpc(None, 400, "invalid_request", raw=b"{not json")
    rpc({**create, "bogus_field": 1}, 400, "invalid_request")
    rpc(create, 400, "invalid_request", query="?bogus_param=1")
    rpc({"op": "ds.create", "args": {"name": "tank/rpc", "bogus_field": 1}}, 200, "invalid_request")
    rpc({"op": "ds.create", "args": {"name": 5}}, 200, "invalid_request")
    rpc({"op": "no.such.op", "args": {}}, 200, "invalid_request")
    rpc({"op": "ds.destroy", "args": {"name": "tank/nosuch"}}, 200, "not_found")
    rpc({"op": "ds.destroy", "args": {"name": "tank/fs"}}, 200, "busy")  # it has snapshots
    st, v = api("POST", "/call", {"op": "pool.list", "args": {}}, token=None)
    assert st == 200 and v["ok"], (st, v)


def check_first_token():
    """The one change made without a token (its proof is the setup code): with a
    named token in place, any code is 409; bad bodies 400; nothing created."""
    good = {"code": "0" * 32, "name": "matrix"}
    refuse("POST", "/tokens/first", good, 409, "already_exists", token=None)
    refuse("POST", "/tokens/first", good, 409, "already_exists", token=REVOKED)
    refuse("POST", "/tokens/first", raw=b"{not json", token=None)
    refuse("POST", "/tokens/first", {**good, "bogus_field": 1}, token=None)
    for field in good:
        refuse("POST", "/tokens/first", {**good, field: 5}, token=None)
        refuse("POST", "/tokens/first", {k: v for k, v in good.items() if k != field}, token=None)


DOC = ok("GET", "/openapi.json")
documented = {(m.upper(), p) for p, item in DOC["paths"].items() for m in item if m in ("get", "post", "put", "delete", "patch")}
uncovered = sorted(documented - set(MATRIX))
stale = sorted(set(MATRIX) - documented)
assert not uncovered and not stale, \
    f"routes of openapi.json without a matrix entry: {uncovered}; matrix entries without a route: {stale}"

print("--- setup: a finished job, a statistic")
job = ok("POST", "/pools/tank/scrub", status=202)
evs = events(job["id"])
assert evs[-1][0] == "done", evs
stat = ok("GET", "/analytics/stats")[0]["name"]
for e in MATRIX.values():
    if e.get("params", {}).get("id") == "JOB":
        e["params"] = {"id": str(job["id"])}
    if e.get("query", {}).get("stat") == "STAT":
        e["query"]["stat"] = stat

FP = Fingerprint()
first = FP()
assert fingerprint() == first, "the state moves on its own: the fingerprint cannot judge a refusal"
for (method, path), e in sorted(MATRIX.items(), key=lambda kv: (kv[0][1], kv[0][0])):
    op = DOC["paths"][path][method.lower()]
    print(f"--- {method} {path}")
    if e.get("special") == "rpc":
        check_rpc()
    elif e.get("special") == "first_token":
        check_first_token()
    elif "read" in e:
        assert method == "GET" and not op.get("security"), f"{method} {path}: a read that asks for a token"
        check_read(method, path, op, e)
    else:
        assert op.get("security") == [{"token": []}], f"{method} {path}: a change the document does not guard"
        check_change(method, path, op, e)
last = fingerprint()
assert last == first, f"the matrix changed the state: {_diff(first, last)}"


def check_busy():
    """Busy things refuse to go (409 busy), and the refusal changes nothing."""
    global FP
    print("--- busy: a file open on a FUSE mount, a snapshot with a clone or a hold")
    with open(f"{WORK}/ea/held.txt", "w") as held:
        held.write("open while the API is asked to destroy it\n")
        held.flush()
        # Committed before the state is read: a write still in the open txg would
        # change the pool's accounting later, during a refusal.
        os.fsync(held.fileno())
        cli("pool", "sync", "extra")
        FP = Fingerprint()  # the file is part of the state now
        assert [m["name"] for m in ok("GET", "/mounts") if m["name"].startswith("extra/")] == ["extra/a", "extra/b"]
        refuse("DELETE", f"/datasets/{q('extra/a')}", status=409, code="busy")
        refuse("POST", f"/datasets/{q('extra/a')}/unmount", {}, 409, "busy")
        # extra/b is unmounted before extra/a is found busy: it must be mounted again.
        refuse("POST", "/pools/extra/export", status=409, code="busy")
        refuse("DELETE", "/pools/extra", status=409, code="busy")
        # force unmounts first, but a busy mount still refuses.
        refuse("DELETE", f"/datasets/{q('extra/a')}?force=true", status=409, code="busy")
    refuse("DELETE", f"/snapshots/{q('tank/fs@s1')}", status=409, code="busy")  # tank/cl is its clone
    refuse("DELETE", f"/snapshots/{q('tank/fs@held')}", status=409, code="busy")  # held by 'keep'
    # A mounted dataset is destroyed only with force, which unmounts it first.
    refuse("DELETE", f"/datasets/{q('extra/b')}", status=409, code="busy")
    ok("DELETE", f"/datasets/{q('extra/b')}?force=true")
    assert "extra/b" not in [m["name"] for m in ok("GET", "/mounts")], "force left extra/b mounted"
    assert "extra/b" not in cli("list", "-H", "-o", "name").split(), "force did not destroy extra/b"


check_busy()
assert not FAILURES, f"{len(FAILURES)} refusals failed:\n" + "\n".join(FAILURES)
print(f"api_matrix: {len(MATRIX)} routes, {REFUSALS} refusals checked")
