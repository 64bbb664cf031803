"""A throwaway PostgreSQL server on a unix socket: for the tests, the benchmark, and a user who
tries the shared memory on one machine (docs/shared_memory.md).

`LocalPostgres(dir).start()` runs `initdb` into `dir/data` and `pg_ctl start` with the socket
in `dir` (no TCP port is opened), and returns the URL of a database `sage`; `stop()` stops the
server. The binaries are found on PATH or in Debian's /usr/lib/postgresql/<version>/bin (package
`postgresql`, which scripts/setup.sh installs). PostgreSQL refuses to run as root, so as root
the server runs as the `postgres` user (Debian's package creates it) and `dir` is given to it.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from pathlib import Path

from sagekernel.errors import SageError


class ServerUnavailable(SageError):
    """No PostgreSQL server can be started here (the reason says why)."""


def find_bin(name: str) -> str | None:
    """`name` (initdb, pg_ctl) from PATH or the newest Debian cluster bin directory."""
    found = shutil.which(name)
    if found:
        return found
    for cand in sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"),
                       key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0, reverse=True):
        return cand
    return None


class LocalPostgres:
    """One private cluster under `root` (see the module docstring)."""

    def __init__(self, root: Path | str, *, port: int = 5432) -> None:
        self.root = Path(root)
        self.data = self.root / "data"
        self.port = port
        self._as: list[str] = []

    @property
    def url(self) -> str:
        return f"postgresql://sage@/sage?host={self.root}&port={self.port}"

    def _run(self, args: list[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self._as, *args], capture_output=True, text=True, timeout=timeout,
                              check=False)

    def start(self) -> str:
        initdb, pg_ctl = find_bin("initdb"), find_bin("pg_ctl")
        if initdb is None or pg_ctl is None:
            raise ServerUnavailable("PostgreSQL's initdb/pg_ctl are not installed "
                                    "(Debian: apt-get install postgresql; or bash scripts/setup.sh --dev)")
        self.root.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            runuser = shutil.which("runuser")
            try:
                import pwd

                pw = pwd.getpwnam("postgres")
            except KeyError:
                raise ServerUnavailable("running as root and there is no `postgres` user to run the "
                                        "server as (PostgreSQL refuses root)") from None
            if runuser is None:
                raise ServerUnavailable("running as root and `runuser` is missing (PostgreSQL refuses root)")
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
            self._as = [runuser, "-u", "postgres", "--"]
        if not (self.data / "PG_VERSION").exists():
            out = self._run([initdb, "-D", str(self.data), "-U", "sage", "--auth=trust", "-E", "UTF8",
                             "--no-sync", "--no-instructions"], timeout=120)
            if out.returncode:
                raise ServerUnavailable(f"initdb failed: {(out.stderr or out.stdout).strip()[-500:]}")
        opts = (f"-k {self.root} -c listen_addresses='' -p {self.port} -c fsync=off "
                "-c synchronous_commit=off -c full_page_writes=off -c max_connections=100")
        out = self._run([pg_ctl, "-D", str(self.data), "-o", opts, "-l", str(self.root / "server.log"),
                         "-w", "-t", "60", "start"], timeout=90)
        if out.returncode:
            log = (self.root / "server.log")
            tail = log.read_text(errors="replace")[-500:] if log.exists() else ""
            why = (out.stderr or out.stdout).strip()[-300:]
            raise ServerUnavailable(f"pg_ctl start failed: {why} {tail}")
        self._createdb()
        return self.url

    def _createdb(self) -> None:
        import psycopg

        admin = f"postgresql://sage@/postgres?host={self.root}&port={self.port}"
        with psycopg.connect(admin, autocommit=True) as conn:
            if conn.execute("SELECT 1 FROM pg_database WHERE datname = 'sage'").fetchone() is None:
                conn.execute("CREATE DATABASE sage")

    def create_database(self, name: str) -> str:
        """A further empty database on this server (tests: one per test); returns its URL."""
        import psycopg

        admin = f"postgresql://sage@/postgres?host={self.root}&port={self.port}"
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return f"postgresql://sage@/{name}?host={self.root}&port={self.port}"

    def stop(self) -> None:
        pg_ctl = find_bin("pg_ctl")
        if pg_ctl and (self.data / "postmaster.pid").exists():
            self._run([pg_ctl, "-D", str(self.data), "-m", "fast", "-w", "stop"], timeout=60)
