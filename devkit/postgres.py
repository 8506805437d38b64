"""A throwaway PostgreSQL server for the tests: Debian's binaries (`make postgres`), a fresh
cluster in a temp folder, on a loopback port, requiring a password; and the JDBC driver's
jar, for Spark's `jdbc` source.

    with Postgres(tmp_path) as pg:
        with pg.connect() as con:
            con.execute("create table t (id int)")
        spark.read.format("jdbc").options(**pg.jdbc_options(), dbtable="t").load()

(the session needs `spark.jars=JDBC_JAR`.)
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType

import psycopg
from psycopg.rows import TupleRow

JDBC_JAR = "/usr/share/java/postgresql.jar"  # Debian's libpostgresql-jdbc-java
SERVER_USER = "nobody"  # who runs the server when the tests run as root
HOST = "127.0.0.1"

# A throwaway cluster needs no durability: these make its start and its writes quick.
SETTINGS = {
    "listen_addresses": HOST,
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
}
NO_SERVER = "PostgreSQL's initdb, pg_ctl and postgres not found (make postgres installs Debian's postgresql)"


def bin_dir() -> Path | None:
    """The folder of `initdb`, `pg_ctl` and `postgres`: the newest under /usr/lib/postgresql
    (Debian keeps them off PATH), else the one on PATH; None when there is none."""
    found = sorted((Path(p).parent for p in glob.glob("/usr/lib/postgresql/*/bin/initdb")),
                   key=lambda b: _version(b.parent.name), reverse=True)
    on_path = shutil.which("initdb")
    if on_path:
        found.append(Path(on_path).resolve().parent)
    for folder in found:
        if all(os.access(folder / tool, os.X_OK) for tool in ("initdb", "pg_ctl", "postgres")):
            return folder
    return None


def _version(name: str) -> tuple[int, ...]:
    return tuple(int(part) for part in name.split(".") if part.isdigit())


def available() -> str | None:
    """None when a server can start here and Spark can reach it, else what is missing, in one
    line: the tests fail with it rather than skip, so a missing package is seen."""
    if bin_dir() is None:
        return NO_SERVER
    if not os.path.isfile(JDBC_JAR):
        return f"{JDBC_JAR} not found (make postgres installs Debian's libpostgresql-jdbc-java)"
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        return "running as root needs setpriv (util-linux) to start PostgreSQL as another user"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


class Postgres:
    """A PostgreSQL cluster of its own, started by the constructor and stopped by `stop()` or at
    the end of a `with` block: bound to 127.0.0.1 on a port free at start, one superuser with a
    random name and password, scram-sha-256 on every connection (TCP and the Unix socket alike).
    Its log is `folder/postgres.log`.

    initdb and postgres refuse to run as root (a compromised server would hold root's power).
    When this process is root, they run as `nobody` (setpriv, no PAM), and the cluster's data
    folder and socket go to a fresh folder under the system's temp folder owned by that user,
    removed at stop: `folder` (pytest's tmp_path) lies under root's private 0700 folders,
    which `nobody` cannot enter. The log stays in `folder`: the server writes it through a
    descriptor this process opens."""

    host = HOST

    def __init__(self, folder: Path, timeout: int = 60) -> None:
        bins = bin_dir()
        if bins is None:
            raise RuntimeError(NO_SERVER)
        self._bins = bins
        self._timeout = timeout
        folder.mkdir(parents=True, exist_ok=True)
        self.log = folder / "postgres.log"
        self.user = f"ember_{secrets.token_hex(4)}"
        self.password = secrets.token_urlsafe(24)
        self.database = "postgres"
        self.port = _free_port()
        self._as: list[str] = []
        self._owner: tuple[int, int] | None = None  # (uid, gid) of the server's user, when not ours
        self._private: Path | None = None
        home = folder
        if os.geteuid() == 0:
            account = pwd.getpwnam(SERVER_USER)
            self._owner = (account.pw_uid, account.pw_gid)
            self._as = ["setpriv", f"--reuid={account.pw_uid}", f"--regid={account.pw_gid}", "--clear-groups", "--"]
            home = self._private = Path(tempfile.mkdtemp(prefix="ember-postgres-"))
            os.chown(home, *self._owner)
        self._home = home
        self.data = home / "data"
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> None:
        pwfile = self._home / "password"
        pwfile.touch(mode=0o600, exist_ok=False)  # readable by no one else, even for a moment
        pwfile.write_text(self.password + "\n")
        if self._owner is not None:
            os.chown(pwfile, *self._owner)
        try:
            self._run(
                "initdb", "--pgdata", str(self.data), "--username", self.user, f"--pwfile={pwfile}",
                "--auth=scram-sha-256", "--encoding=UTF8", "--no-locale", "--no-sync", "--no-instructions",
            )
        finally:
            pwfile.unlink()
        conf = {**SETTINGS, "port": str(self.port), "unix_socket_directories": str(self._home)}
        with (self.data / "postgresql.conf").open("a") as out:
            out.writelines(f"{k} = {_quote(v)}\n" for k, v in conf.items())
        self._run("pg_ctl", "start", "--pgdata", str(self.data), "--wait", f"--timeout={self._timeout}")

    def _run(self, tool: str, *args: str) -> None:
        """Runs one of the server's tools (as the server's user), its output appended to the
        log; raises with the log's tail when it fails."""
        with self.log.open("ab") as out:
            done = subprocess.run(
                [*self._as, str(self._bins / tool), *args],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                cwd=self._home,  # the server's user may not enter ours
                check=False,
            )
        if done.returncode != 0:
            tail = self.log.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"PostgreSQL's {tool} failed (exit {done.returncode}); {self.log} ends:\n{tail}")

    @property
    def jdbc_url(self) -> str:
        return f"jdbc:postgresql://{self.host}:{self.port}/{self.database}"

    def jdbc_options(self) -> dict[str, str]:
        """Options for `spark.read.format("jdbc").options(**...)` (and for writes): the URL,
        the credentials and the driver's class."""
        return {"url": self.jdbc_url, "user": self.user, "password": self.password, "driver": "org.postgresql.Driver"}

    def connect(self) -> psycopg.Connection[TupleRow]:
        """A new connection over TCP, in autocommit mode; the caller closes it."""
        return psycopg.connect(
            host=self.host, port=self.port, user=self.user, password=self.password,
            dbname=self.database, autocommit=True,
        )

    def stop(self) -> None:
        """Stops the server (fast: open sessions are ended, not waited for), if it runs,
        and removes the private folder of a server run as another user. Safe to call twice."""
        try:
            if (self.data / "postmaster.pid").exists():
                self._run("pg_ctl", "stop", "--pgdata", str(self.data), "--mode=fast", "--wait", f"--timeout={self._timeout}")
        finally:
            if self._private is not None:
                shutil.rmtree(self._private, ignore_errors=True)
                self._private = None

    def __enter__(self) -> Postgres:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        self.stop()
