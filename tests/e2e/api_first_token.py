"""The first API token from the one-time setup code, over real HTTP
(tests/e2e/test_api.sh). Usage: api_first_token.py ADDR CODE CODE_FILE CACHALOT.
A bad body, a wrong code (answered after the guessing delay) and a bad name are
refused and create nothing; the right code gives one token (printed) and works
once; the setup state says so before and after."""
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request

addr, code, code_file, cachalot = sys.argv[1:5]
base = f"http://{addr}/api/v1"


def api(method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def names():
    out = subprocess.run([cachalot, "token", "list", "-H"], check=True, capture_output=True, text=True).stdout
    return [line.split("\t")[0] for line in out.splitlines()]


def refused(body, status, err):
    st, v = api("POST", "/tokens/first", body)
    assert st == status and v["error"]["code"] == err, (body, st, v)
    assert names() == ["default"], f"{body} created a token: {names()}"
    print(f"  ok, refused {st} {err}: {v['error']['message']}", file=sys.stderr)
    return v


# The open route names the file in the daemon's home, not the home's path.
assert api("GET", "/setup") == (200, {"first_token": True, "setup_code_file": "setup-code"}), api("GET", "/setup")
refused({"code": code}, 400, "invalid_request")
refused({"code": code, "name": "admin", "bogus": 1}, 400, "invalid_request")
t0 = time.time()
wrong = "0" * 32 if code != "0" * 32 else "1" * 32
v = refused({"code": wrong, "name": "admin"}, 403, "forbidden")
assert time.time() - t0 >= 0.9, "a wrong code is answered at once (no guessing delay)"
msg = v["error"]["message"]
assert "setup-code" in msg and code_file not in msg and code not in msg, v
refused({"code": code, "name": "bad name"}, 400, "invalid_request")
st, v = api("POST", "/tokens/first", {"code": code, "name": "admin"})
assert st == 200 and v["name"] == "admin" and len(v["token"]) == 64, (st, v)
assert names() == ["default", "admin"], names()
st2, again = api("POST", "/tokens/first", {"code": code, "name": "again"})
assert st2 == 409 and again["error"]["code"] == "already_exists", (st2, again)
assert names() == ["default", "admin"], "a second use created a token"
assert api("GET", "/setup") == (200, {"first_token": False})
print(v["token"])
