"""The workspace database: one SQLite file per workspace, WAL mode, numbered migrations.

Migrations are the files `migrations/NNNN_name.sql`, applied in order, each in its own
transaction, and recorded in `schema_migrations`. A database whose newest applied migration is
unknown to this code was written by a newer SAGE and is refused rather than guessed at.

Every public function raises `WorkspaceError` with a plain message for the failure modes a user
meets: missing file (when `create=False`), locked, corrupted, newer schema.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from urllib.parse import quote

from sagekernel.errors import WorkspaceError

DB_FILENAME = "sage.db"
_MIGRATION_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


def migrations() -> list[tuple[int, str, str]]:
    """All shipped migrations as (number, name, sql), sorted by number."""
    found = []
    for entry in resources.files("sagekernel.migrations").iterdir():
        match = _MIGRATION_NAME.match(entry.name)
        if match:
            found.append((int(match.group(1)), entry.name, entry.read_text(encoding="utf-8")))
    found.sort()
    numbers = [n for n, _, _ in found]
    if len(set(numbers)) != len(numbers):
        raise RuntimeError(f"duplicate migration numbers in sagekernel/migrations: {numbers}")
    return found


def db_path(workspace: Path | str) -> Path:
    """The database file of a workspace directory (or the path itself if it names a file)."""
    path = Path(workspace)
    return path if path.suffix == ".db" else path / DB_FILENAME


def require_directory(workspace: Path | str) -> Path:
    """A workspace that must be a directory (a run keeps its lock and snapshots next to the database)."""
    ws = Path(workspace)
    if ws.suffix == ".db" and not ws.is_dir():
        raise WorkspaceError(f"{ws} names a database file, but this command needs a workspace directory "
                             f"(it keeps a lock and snapshots next to {DB_FILENAME}); pass its folder, "
                             f"e.g. --workspace {ws.with_suffix('')}")
    if ws.exists() and not ws.is_dir():
        raise WorkspaceError(f"the workspace {ws} is a file, not a directory; pass a directory")
    return ws


def _check_location(workspace: Path | str, path: Path, *, create: bool, readonly: bool) -> None:
    """Say plainly what is wrong with where the database should be, before SQLite tries."""
    ws = Path(workspace)
    if path.suffix == ".db" and path == ws:
        if path.is_dir():
            raise WorkspaceError(f"the workspace database {path} is a directory; a path ending in .db "
                                 "must name a database file (pass the folder instead)")
    elif ws.exists() and not ws.is_dir():
        raise WorkspaceError(f"the workspace {ws} is a file, not a directory; pass a directory "
                             "(or a path ending in .db for a database file)")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise WorkspaceError(f"cannot use the workspace {ws}: {parent} is a file, not a directory")
            break
    if path.is_dir():
        raise WorkspaceError(f"the workspace database {path} is a directory, not a database file")
    if path.exists():
        if not readonly and not _writable(path):
            raise WorkspaceError(
                f"the workspace database {path} is read-only (its permissions, an immutable attribute "
                "or a read-only mount); make it writable, or use a command that only reads it "
                "(`sage report`, `sage memory list`)")
        if not readonly and not _writable(path.parent):
            raise WorkspaceError(
                f"the folder of the workspace database {path} is read-only; SQLite needs to write its "
                "journal next to the database: make the folder writable or copy the workspace")
        return
    if not create or readonly:
        raise WorkspaceError(f"no SAGE workspace database at {path} (run `sage run` or pass --workspace)")
    existing = next((p for p in path.parents if p.exists()), None)
    if existing is not None and not _writable(existing):
        raise WorkspaceError(f"cannot create the workspace database {path}: {existing} is read-only; "
                             "choose a --workspace in a writable place")


def _writable(path: Path) -> bool:
    """os.access, plus the immutable attribute and read-only mounts that access() can miss as root."""
    if not os.access(path, os.W_OK):
        return False
    try:
        st = os.statvfs(path)
        if st.f_flag & os.ST_RDONLY:
            return False
    except OSError:
        pass
    try:
        flags = getattr(os.stat(path), "st_flags", 0)  # BSD/macOS: the immutable flags
    except OSError:
        flags = 0
    if flags:
        return False
    if path.is_file():
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND)  # no write happens; open checks immutability
        except PermissionError:
            return False
        except OSError:
            return True
        os.close(fd)
    return True


def connect(workspace: Path | str, *, create: bool = True, readonly: bool = False,
            timeout_s: float = 5.0) -> sqlite3.Connection:
    """Open (and migrate, unless read-only) the workspace database.

    `readonly=True` opens with SQLite's read-only URI mode and never migrates; it is what reports
    use so they cannot mutate a store. A busy database is waited for up to `timeout_s` (SQLite's
    busy timeout), then reported with the processes that hold it. Before anything is written, the
    file is checked (``PRAGMA quick_check``), so a database damaged in the middle is named rather
    than written into. A database this call creates is removed again if its migrations fail (disk
    full, ...), so no database without a schema is left behind.
    """
    path = db_path(workspace)
    _check_location(workspace, path, create=create, readonly=readonly)
    created = not path.exists()
    if created:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise WorkspaceError(f"cannot create the workspace folder {path.parent}: "
                                 f"{exc.strerror or exc}") from exc
    conn: sqlite3.Connection | None = None
    try:
        if readonly:
            conn = sqlite3.connect(_readonly_uri(path), uri=True, timeout=timeout_s)
        else:
            conn = sqlite3.connect(path, timeout=timeout_s)
        conn.isolation_level = None  # autocommit; multi-statement work uses transaction()
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        if not created:
            _check_integrity(conn, path)
        if not readonly:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
        _check_and_migrate(conn, path, readonly=readonly)
    except (sqlite3.DatabaseError, WorkspaceError, OSError) as exc:
        if conn is not None:
            conn.close()
        if created:
            _remove_database(path)
        if isinstance(exc, WorkspaceError):
            raise
        raise _explain(exc, path) from exc
    return conn


def _readonly_uri(path: Path) -> str:
    """How a reader opens the database: `mode=ro`, or `immutable=1` where SQLite could not create
    the shared-memory file a WAL database needs (a read-only mount or folder) and no write-ahead
    log is pending. Then nothing can change the file while it is read, and `sage report`, `memory
    list`, `log` and `memory export` work on a read-only copy of a workspace."""
    where = quote(str(path.resolve()))
    wal = Path(f"{path}-wal")
    pending = wal.exists() and wal.stat().st_size > 0
    if not pending and not _writable(path.parent):
        return f"file:{where}?immutable=1"
    return f"file:{where}?mode=ro"


def _check_integrity(conn: sqlite3.Connection, path: Path) -> None:
    rows = [r[0] for r in conn.execute("PRAGMA quick_check(5)").fetchall()]
    if rows != ["ok"]:
        raise WorkspaceError(
            f"the workspace database {path} is damaged ({'; '.join(str(r) for r in rows)[:300]}); nothing "
            "was written to it. Restore it from an export (`sage memory import`) or move it aside")


def _remove_database(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(OSError):
            Path(f"{path}{suffix}").unlink()


def holders(path: Path) -> str:
    """Who holds the workspace: the run lock's holder, and processes with the database open."""
    found = []
    lock = path.parent / "sage-run.lock"
    try:
        info = json.loads(lock.read_text(encoding="utf-8"))
        if isinstance(info, dict) and info.get("pid"):
            found.append(f"run {info.get('run_id')!r} (pid {info.get('pid')}, "
                         f"since {info.get('started_at')})")
    except (OSError, ValueError):
        pass
    target = str(path.resolve())
    pids = []
    proc = Path("/proc")
    if proc.is_dir():
        for entry in proc.iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                for fd in (entry / "fd").iterdir():
                    if os.readlink(fd) == target:
                        cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                        pids.append(f"pid {entry.name} ({cmd.strip()[:80]})")
                        break
            except OSError:
                continue
    found += pids[:5]
    return "; ".join(found) if found else "no other process found (it may have just finished)"


def _explain(exc: BaseException, path: Path) -> WorkspaceError:
    text = str(exc).lower()
    if "locked" in text or "busy" in text:
        return WorkspaceError(
            f"the workspace database {path} is locked by another process ({holders(path)}); waited "
            "for it, then gave up: wait for it to finish or stop it, or use another --workspace")
    if "not a database" in text or "malformed" in text or "corrupt" in text:
        return WorkspaceError(
            f"the workspace database {path} is corrupted ({exc}); restore it from an export "
            "(`sage memory import`) or move it aside")
    if ("disk" in text and "full" in text) or "no space" in text or "too large" in text:
        return WorkspaceError(f"the workspace database {path} could not be written: the disk is full "
                              f"({exc}); free some space and run the command again")
    if "readonly" in text or "read-only" in text:
        return WorkspaceError(f"the workspace database {path} is read-only ({exc}); make it and its "
                              "folder writable")
    if "unable to open" in text:
        return WorkspaceError(f"cannot open the workspace database {path}: {exc}")
    if "disk i/o" in text:
        return WorkspaceError(f"the workspace database {path}: disk I/O error ({exc}); the disk may be "
                              "full or failing")
    return WorkspaceError(f"workspace database {path}: {exc}")


def schema_version(conn: sqlite3.Connection) -> int:
    """The newest applied migration number (0 for an empty database)."""
    has_table = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type='table' AND name='schema_migrations'").fetchone()
    if not has_table:
        return 0
    row = conn.execute("SELECT max(number) FROM schema_migrations").fetchone()
    return int(row[0] or 0)


def _check_and_migrate(conn: sqlite3.Connection, path: Path, *, readonly: bool) -> None:
    known = migrations()
    newest_known = known[-1][0] if known else 0
    current = schema_version(conn)
    if current > newest_known:
        raise WorkspaceError(
            f"the workspace database {path} has schema version {current}, newer than this SAGE "
            f"understands ({newest_known}); upgrade sagekernel to read it")
    if readonly:
        return  # readers accept older schemas; they check for the tables they need
    conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations ("
                 "number INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)")
    applied = {row[0] for row in conn.execute("SELECT number FROM schema_migrations")}
    for number, name, sql in known:
        if number in applied:
            continue
        # One transaction per migration: a crash mid-migration leaves the previous version intact.
        try:
            conn.executescript(
                "BEGIN IMMEDIATE;\n" + sql
                + f"\nINSERT INTO schema_migrations VALUES ({number}, '{name}', datetime('now'));\nCOMMIT;")
        except sqlite3.DatabaseError:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One atomic unit of work: BEGIN IMMEDIATE ... COMMIT, rolled back on any exception.

    Used for every episode update so that a crash never leaves half an update. When the caller
    already holds a transaction this joins it (the caller commits or rolls back the whole unit:
    the runner records a result, the memory update and its marker together).
    """
    if conn.in_transaction:
        yield conn
        return
    if getattr(conn, "dialect", "sqlite") != "sqlite":  # a shared PostgreSQL memory (memory/backend.py)
        with conn.transaction():  # type: ignore[attr-defined]
            yield conn
        return
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        raise _explain(exc, Path(conn_path(conn))) from exc
    try:
        yield conn
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    else:
        try:
            conn.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise _explain(exc, Path(conn_path(conn))) from exc


def conn_path(conn: sqlite3.Connection) -> str:
    row = conn.execute("PRAGMA database_list").fetchone()
    return str(row[2]) if row else "<memory>"


def tables(conn: sqlite3.Connection) -> set[str]:
    """The tables of the database (a reader of an older workspace asks before it reads)."""
    return {str(row[0]) for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
