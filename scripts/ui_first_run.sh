#!/usr/bin/env bash
# From a fresh `make install` to a MariaDB-ready pair of datasets with the web UI
# (issue 20's measure; not part of make test):
#   bash scripts/ui_first_run.sh
# Installs target/ci/cachalot into a staging DESTDIR, starts the installed binary
# as the unit's ExecStart does (a temporary home in place of /var/lib/cachalot),
# then in headless Chromium, as a new user would: the manage page sees no API
# token yet and asks for the one-time setup code (the user reads it from the
# root-only HOME/setup-code the daemon's log names: `sudo cat`, no cachalot
# command), which makes the first token; create a pool from a file, create the
# MySQL datasets (16K data, 128K log), mount each from its row at a path that
# does not exist yet (the daemon makes it, as zfs does). It prints the clicks,
# the fields typed, the cachalot CLI commands used (0) and the seconds from the
# start of `make install`; then starts MariaDB on the two mounts and prints the
# seconds until it answers.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../tests/e2e/lib.sh"
# shellcheck source=tests/e2e/fuse_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../tests/e2e/fuse_lib.sh"

need_browser
T0=$(date +%s.%N)
STAGE=$(mktmp)
make -s -C "$REPO" install DESTDIR="$STAGE" CACHALOT_BIN="$CACHALOT" >"$ARTIFACTS/install.log" 2>&1 ||
    fail "make install failed: $(tail -n 5 "$ARTIFACTS/install.log")"
CACHALOT=$STAGE/usr/local/sbin/cachalot
export CACHALOT
start_daemon
WORK=$(mktmp)

# The mount points do not exist: the daemon makes them.
D=$(mktmp)/mysql
browser_python "$WORK" "$D" "$T0" <<'PY'
import os
import sys
import time

from clients import cli, prop  # tests/e2e/clients.py
from webdriver import ManagePage  # tests/e2e/webdriver.py

work, mnt, t0 = sys.argv[1], sys.argv[2], float(sys.argv[3])
typed = 0
with ManagePage() as b:
    # What the user does on the appliance: sudo cat the file the page names, in
    # the daemon's home (/var/lib/cachalot for the service; here HOME_DIR).
    b.open("/#/manage")
    code_file = b.wait("the first-run box", "return !document.getElementById('m-first').hidden && "
                       "document.getElementById('m-first-file').textContent")
    with open(os.path.join(os.environ["HOME_DIR"], code_file)) as f:
        code = f.read().strip()
    b.first_run(code)
    typed += 1
    assert len(cli("token", "list", "-H").splitlines()) == 2, cli("token", "list", "-H")  # default, admin
    b.type("#m-pool-files", f"{work}/disk0.img")
    typed += 1
    b.click("#m-pool-create")
    b.done("create pool", "cachalot pool create")
    b.click("#m-mysql-create")
    b.done("MySQL datasets", "cachalot create -p tank/mysql")
    assert prop("tank/mysql/data", "recordsize") == "16K" and prop("tank/mysql/log", "recordsize") == "128K"
    for ds in ("data", "log"):
        row = f'#m-datasets tr[data-ds="tank/mysql/{ds}"]'
        b.type(f"{row} input.mp", f"{mnt}/{ds}")
        typed += 1
        b.click(f'{row} button[data-act="mount"]')
        b.done(f"mount {ds}", f"cachalot mount tank/mysql/{ds}")
        assert os.path.ismount(f"{mnt}/{ds}"), ds
    b.shot("mysql-datasets")
    print(f"fresh install to the MySQL datasets mounted, with the web UI: {time.time() - t0:.1f} s, "
          f"{b.clicks} clicks, {typed} fields typed (setup code, pool file, 2 mount points), "
          "0 cachalot CLI commands (1 shell read of the root-only setup code)")
PY
mariadb_init "$D/data" "$D/log" "$D/run"
mariadb_start
note "MariaDB answers on the two datasets $(python3 -c "import time; print(f'{time.time() - $T0:.1f}')") s after the start of make install (no CLI mount)"
mariadb_stop
stop_daemon
