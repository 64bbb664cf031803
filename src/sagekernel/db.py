"""The workspace database: one SQLite file per workspace, WAL mode, numbered migrations.

Migrations are the files `migrations/NNNN_name.sql`, applied in order, each in its own
transaction, and recorded in `schema_migrations`. A database whose newest applied migration is
unknown to this code was written by a newer SAGE and is refused rather than guessed at.

Every public function raises `WorkspaceError` with a plain message for the failure modes a user
meets: missing file (when `create=False`), locked, corrupted, newer schema.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

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


def connect(workspace: Path | str, *, create: bool = True, readonly: bool = False,
            timeout_s: float = 5.0) -> sqlite3.Connection:
    """Open (and migrate, unless read-only) the workspace database.

    `readonly=True` opens with SQLite's read-only URI mode and never migrates; it is what reports
    use so they cannot mutate a store.
    """
    path = db_path(workspace)
    if not path.exists():
        if not create or readonly:
            raise WorkspaceError(f"no SAGE workspace database at {path} (run `sage run` or pass --workspace)")
        path.parent.mkdir(parents=True, exist_ok=True)
    try:
        if readonly:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=timeout_s)
        else:
            conn = sqlite3.connect(path, timeout=timeout_s)
        conn.isolation_level = None  # autocommit; multi-statement work uses transaction()
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA foreign_keys = ON")
        if not readonly:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as exc:
        raise _explain(exc, path) from exc
    try:
        _check_and_migrate(conn, path, readonly=readonly)
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise _explain(exc, path) from exc
    return conn


def _explain(exc: sqlite3.DatabaseError, path: Path) -> WorkspaceError:
    text = str(exc).lower()
    if "locked" in text or "busy" in text:
        return WorkspaceError(
            f"the workspace database {path} is locked by another process; wait for it or stop it")
    if "not a database" in text or "malformed" in text or "corrupt" in text:
        return WorkspaceError(
            f"the workspace database {path} is corrupted ({exc}); restore it from an export "
            "(`sage memory import`) or move it aside")
    if "readonly" in text or "read-only" in text or "unable to open" in text:
        return WorkspaceError(f"cannot open the workspace database {path}: {exc}")
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
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        raise _explain(exc, Path(conn_path(conn))) from exc
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    else:
        conn.execute("COMMIT")


def conn_path(conn: sqlite3.Connection) -> str:
    row = conn.execute("PRAGMA database_list").fetchone()
    return str(row[2]) if row else "<memory>"
