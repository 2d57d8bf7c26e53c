"""The command-line clients as the e2e checks in Python call them: the cachalot
CLI ($CACHALOT, exported by lib.sh) and MariaDB's client on a socket. Shared by
api_lib.py (the REST API checks) and webdriver.py (the web UI tests)."""
import os
import subprocess


def cli(*args):
    """Run `cachalot ARGS...`; its stdout (fails on a non-zero exit)."""
    return subprocess.run([os.environ["CACHALOT"], *args], check=True, capture_output=True, text=True).stdout


def prop(name, p):
    """The value of property P of dataset NAME, as `cachalot get` prints it."""
    return cli("get", "-H", "-o", "value", p, name).strip()


def sql(sock, query):
    """QUERY as root on the MariaDB server at SOCK; its rows, tab-separated, no header."""
    return subprocess.run(["mariadb", "-S", sock, "-uroot", "-N", "-B", "-e", query],
                          check=True, capture_output=True, text=True).stdout.strip()


def assert_replicating(sock):
    """The MariaDB server at SOCK is a replica whose two replication threads run."""
    status = subprocess.run(["mariadb", "-S", sock, "-uroot", "-e", "show slave status\\G"],
                            check=True, capture_output=True, text=True).stdout
    assert "Slave_IO_Running: Yes" in status and "Slave_SQL_Running: Yes" in status, status
