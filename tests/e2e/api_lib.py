"""Helpers of the REST API checks (api_check.py, api_mysql_check.py): requests with
or without the token, success and refusal checks (a refusal must change nothing,
as the CLI sees it). The checks are run as SCRIPT ADDR TOKEN CACHALOT WORKDIR
ARTIFACTS; these globals come from those arguments."""
import json
import sys
import urllib.error
import urllib.parse
import urllib.request

from clients import cli, prop  # noqa: F401 (tests/e2e/clients.py; prop is for the checks)

ADDR, TOKEN, CLI, WORK, ARTIFACTS = sys.argv[1:6]
BASE = f"http://{ADDR}/api/v1"


def q(name):
    """A name as one path segment ('/' and '@' encoded)."""
    return urllib.parse.quote(name, safe="")


def api(method, path, body=None, token=TOKEN, raw=None, auth=None):
    """(status, decoded JSON body) of one request; `auth` is a whole Authorization
    header (overrides the token's `Bearer TOKEN`)."""
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if auth is not None:
        headers["Authorization"] = auth
    req = urllib.request.Request(BASE + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def ok(method, path, body=None, status=200):
    st, v = api(method, path, body)
    assert st == status, f"{method} {path} {body}: {st} {v}"
    return v


def state():
    """What a refused request must not change."""
    names = cli("list", "-H", "-t", "all", "-o", "name")
    props = cli("get", "-H", "-o", "name,property,value,source",
                "quota,recordsize,sharenfs,compression,origin", *[n for n in names.split() if "@" not in n]) \
        if names.strip() else ""
    pools = [line.split("\t")[0] for line in cli("pool", "list", "-H").splitlines()]
    return pools, names, props


def _diff(before, after):
    """What differs between two states (by part when a state is a dict)."""
    if isinstance(before, dict) and isinstance(after, dict):
        return "; ".join(f"{k}: {_diff(before[k], after.get(k))}" for k in before if before[k] != after.get(k))
    if isinstance(before, str) and isinstance(after, str):
        b, a = before.splitlines(), after.splitlines()
        return f"lines gone {[x for x in b if x not in a]}, lines new {[x for x in a if x not in b]}"
    return f"{before!r} -> {after!r}"


def refused(method, path, body=None, status=400, code="invalid_request", token=TOKEN, raw=None,
            auth=None, state_of=state):
    """METHOD PATH is refused with STATUS and the JSON error CODE, and `state_of()`
    (what the request must not change) is the same after it."""
    before = state_of()
    st, v = api(method, path, body, token=token, raw=raw, auth=auth)
    assert st == status and isinstance(v, dict) and v.get("error", {}).get("code") == code, \
        f"{method} {path} {body if raw is None else raw}: {st} {v}"
    assert v["error"]["message"] and "\n" not in v["error"]["message"], v
    after = state_of()
    assert after == before, f"{method} {path} {body} changed something: {_diff(before, after)}"
    print(f"  ok, refused {st} {code}: {method} {path} -> {v['error']['message']}")
    return v


def events(job_id, last_event_id=None, token=None):
    """(event, data) pairs of GET /jobs/ID/events, read until the stream ends;
    with last_event_id, as a browser reconnecting after that event (a browser's
    EventSource sends no token; `token` adds one)."""
    out, kind = [], None
    req = urllib.request.Request(f"{BASE}/jobs/{job_id}/events")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    if last_event_id is not None:
        req.add_header("Last-Event-ID", str(last_event_id))
    with urllib.request.urlopen(req, timeout=60) as r:
        assert r.headers["Content-Type"].startswith("text/event-stream"), r.headers
        for line in r:
            line = line.decode().rstrip("\n")
            if line.startswith("event:"):
                kind = line[6:].strip()
            elif line.startswith("data:"):
                out.append((kind, json.loads(line[5:].strip())))
    return out
