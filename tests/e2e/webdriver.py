"""A headless Chromium session through chromedriver's WebDriver HTTP API, from
Python's standard library, for the web UI tests (tests/e2e/test_*_ui*.sh). The
scripts run their Python with lib.sh's browser_python, after start_daemon:

    from webdriver import Browser
    with Browser() as b:
        b.open("/#/analytics"); b.wait("what", "return <js>"); b.click(css); b.shot("name")

Browser starts its own chromedriver on a free port (its log goes to
$ARTIFACTS/chromedriver.log) and a browser profile in a temporary directory, and
ends both when the `with` block ends, also on failure; the page's address is the
daemon's HTTP listener ($HOME_DIR/http.addr, or HOME/http.addr of another
daemon's HOME given as Browser(home=HOME)). A timeout of the test kills the
script's process group, chromedriver with it.

ManagePage adds typing into fields, saving the API token (or making the first
one from the daemon's one-time setup code) and waiting for an action's report on the managing page (#/manage, tests/e2e/test_manage_ui*.sh).
"""
import base64
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Browser:
    def __init__(self, home=None):
        self.artifacts = os.environ["ARTIFACTS"]
        with open(os.path.join(home or os.environ["HOME_DIR"], "http.addr")) as f:
            self.base = "http://" + f.read().strip()
        self.clicks = 0
        self.session = None
        self.profile = tempfile.mkdtemp(prefix="cachalot-chromium.")
        port = _free_port()
        with open(os.path.join(self.artifacts, "chromedriver.log"), "wb") as log:
            self.driver = subprocess.Popen(["chromedriver", f"--port={port}", "--allowed-ips=127.0.0.1"],
                                           stdout=log, stderr=subprocess.STDOUT)
        self.wd = f"http://127.0.0.1:{port}"
        try:
            self._wait_driver()
            caps = {"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": {
                "binary": "/usr/bin/chromium",
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         "--window-size=1300,1100", f"--user-data-dir={self.profile}"]}}}}
            self.session = "/session/" + self.call("POST", "/session", caps)["sessionId"]
        except BaseException:
            self.close()
            raise

    def _wait_driver(self):
        for _ in range(100):
            if self.driver.poll() is not None:
                raise SystemExit(f"chromedriver exited ({self.driver.returncode}); see {self.artifacts}/chromedriver.log")
            try:
                urllib.request.urlopen(self.wd + "/status", timeout=2)
                return
            except Exception:
                time.sleep(0.1)
        raise SystemExit("chromedriver did not answer within 10 s")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

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

    def open(self, path):
        """Load PATH (e.g. "/#/manage") of the daemon's web UI."""
        self.s("POST", "/url", {"url": self.base + path})

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

    def el(self, css):
        e = self.s("POST", "/element", {"using": "css selector", "value": css})
        return list(e.values())[0]

    def click(self, css):
        """A real click on the element CSS names; counted in self.clicks."""
        self.clicks += 1
        self.s("POST", f"/element/{self.el(css)}/click", {})

    def shot(self, name):
        png = self.s("GET", "/screenshot")
        with open(f"{self.artifacts}/{name}.png", "wb") as f:
            f.write(base64.b64decode(png))

    def close(self):
        """End the browser session and chromedriver; remove the profile."""
        try:
            if self.session and self.driver.poll() is None:
                self.s("DELETE", "")
        finally:
            self.session = None
            if self.driver.poll() is None:
                self.driver.terminate()
                try:
                    self.driver.wait(10)
                except subprocess.TimeoutExpired:
                    self.driver.kill()
                    self.driver.wait()
            shutil.rmtree(self.profile, ignore_errors=True)


class ManagePage(Browser):
    def type(self, css, text):
        """Clear a field and type into it (real key events)."""
        e = self.el(css)
        self.s("POST", f"/element/{e}/clear", {})
        self.s("POST", f"/element/{e}/value", {"text": text})

    def login(self, token):
        """Open the managing page and save TOKEN as the API token (one click)."""
        self.open("/#/manage")
        self.wait("the manage page", "return !document.getElementById('page-manage').hidden")
        self.type("#m-token", token)
        self.click("#m-token-save")

    def first_run(self, code, name="admin"):
        """Open the managing page of a daemon with no API token yet and make the
        first one from its one-time setup CODE (the first-run box; one click).
        Returns the new token as the page shows it."""
        self.open("/#/manage")
        self.wait("the first-run box", "return !document.getElementById('m-first').hidden")
        self.type("#m-first-code", code)
        self.type("#m-first-name", name)
        self.click("#m-first-go")
        self.done("first token", f"cachalot token create {name}")
        assert self.js("return document.getElementById('m-first').hidden"), "the first-run box stays"
        return self.js("return document.getElementById('m-token-new').value")

    def done(self, what, cli_prefix, timeout=30):
        """Wait for the action's report; it must name its CLI equivalent."""
        msg = self.wait(what, "const m = document.getElementById('m-msg'); "
                        "return !m.hidden && m.textContent.length > 0 && document.getElementById('m-confirm').hidden ? m.textContent : null",
                        timeout)
        assert msg.startswith("Done. CLI: " + cli_prefix), f"{what}: {msg}"
        self.js("document.getElementById('m-msg').hidden = true")
        print(f"  {what}: {msg}")

    def confirmed(self, button, what, cli, unchanged=None, timeout=30):
        """Click BUTTON (a destructive action): its confirmation must show CLI.
        With UNCHANGED (a check that the action has not happened) cancel first,
        check that nothing changed, and click BUTTON again; then confirm and
        wait for the report naming CLI."""
        for cancel in ([True] if unchanged else []) + [False]:
            self.click(button)
            self.wait(f"the confirmation of {what}", "return !document.getElementById('m-confirm').hidden")
            shown = self.js("return document.getElementById('m-confirm-cli').textContent")
            assert shown == cli, f"{what}: the confirmation shows {shown!r}, not {cli!r}"
            if cancel:
                self.click("#m-confirm-cancel")
                self.wait("the cancel report", "return document.getElementById('m-msg').textContent.startsWith('Cancelled')")
                self.js("document.getElementById('m-msg').hidden = true")
                assert unchanged(), f"the cancel of {what} changed something"
        self.click("#m-confirm-ok")
        self.done(what, cli, timeout)

    def refused(self, what, shot, timeout=30):
        """Wait for the report of a refused action, screenshot it as SHOT, and
        return its text (the daemon's error)."""
        msg = self.wait(what, "const m = document.getElementById('m-msg'); "
                        "return !m.hidden && m.textContent.startsWith('Refused') ? m.textContent : null", timeout)
        self.shot(shot)
        self.js("document.getElementById('m-msg').hidden = true")
        print(f"  {what}: {msg}")
        return msg
