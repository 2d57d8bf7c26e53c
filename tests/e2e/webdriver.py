"""A headless Chromium session through chromedriver's WebDriver HTTP API, from
Python's standard library, for the web UI tests (tests/e2e/test_*analytics_ui.sh).

    from webdriver import Browser
    b = Browser(driver_port, artifacts_dir, profile_dir)
    b.open(url); b.wait("what", "return <js>"); b.shot("name"); b.close()

ManagePage adds typing into fields and waiting for an action's report on the
managing page (#/manage, tests/e2e/test_manage_ui*.sh).
"""
import base64
import json
import time
import urllib.error
import urllib.request


class Browser:
    def __init__(self, port, artifacts, profile):
        self.wd = f"http://127.0.0.1:{port}"
        self.artifacts = artifacts
        for _ in range(100):
            try:
                urllib.request.urlopen(self.wd + "/status", timeout=2)
                break
            except Exception:
                time.sleep(0.1)
        caps = {"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": {
            "binary": "/usr/bin/chromium",
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1300,1100", f"--user-data-dir={profile}"]}}}}
        self.session = "/session/" + self.call("POST", "/session", caps)["sessionId"]

    def call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.wd + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return json.loads(r.read())["value"]
        except urllib.error.HTTPError as e:
            raise SystemExit(f"webdriver {method} {path}: {e.code} {e.read()[:500]!r}")

    def s(self, method, path, body=None):
        """A call on this session."""
        return self.call(method, self.session + path, body)

    def open(self, url):
        self.s("POST", "/url", {"url": url})

    def js(self, script, *args):
        return self.s("POST", "/execute/sync", {"script": script, "args": list(args)})

    def wait(self, what, script, timeout=30):
        end = time.time() + timeout
        while time.time() < end:
            v = self.js(script)
            if v:
                return v
            time.sleep(0.25)
        self.shot("failure")
        raise SystemExit(f"timed out waiting for {what}; page: {self.js('return document.body.innerText')[:1500]}")

    def click(self, css):
        el = self.s("POST", "/element", {"using": "css selector", "value": css})
        self.s("POST", f"/element/{list(el.values())[0]}/click", {})

    def shot(self, name):
        png = self.s("GET", "/screenshot")
        with open(f"{self.artifacts}/{name}.png", "wb") as f:
            f.write(base64.b64decode(png))

    def close(self):
        self.s("DELETE", "")


class ManagePage(Browser):
    def el(self, css):
        e = self.s("POST", "/element", {"using": "css selector", "value": css})
        return list(e.values())[0]

    def type(self, css, text):
        """Clear a field and type into it (real key events)."""
        e = self.el(css)
        self.s("POST", f"/element/{e}/clear", {})
        self.s("POST", f"/element/{e}/value", {"text": text})

    def done(self, what, cli_prefix, timeout=30):
        """Wait for the action's report; it must name its CLI equivalent."""
        msg = self.wait(what, "const m = document.getElementById('m-msg'); "
                        "return !m.hidden && m.textContent.length > 0 && document.getElementById('m-confirm').hidden ? m.textContent : null",
                        timeout)
        assert msg.startswith("Done. CLI: " + cli_prefix), f"{what}: {msg}"
        self.js("document.getElementById('m-msg').hidden = true")
        print(f"  {what}: {msg}")
