"""Where a memory lives: the workspace's SQLite database (the embedded default) or a PostgreSQL
database that a team shares (`--memory postgresql://…`, or SAGE_MEMORY_URL).

`Store` (store.py) speaks one portable SQL dialect through a small connection surface —
`execute`, `executemany`, `in_transaction`, `close` — that `sqlite3.Connection` has and that
`PgConnection` provides over psycopg 3 (`?` placeholders become `%s`, rows index by position
and by name like `sqlite3.Row`). `db.transaction` opens a transaction on either.

A shared memory is written by many learners at once (each `sage run`/`sage mcp` process on any
machine). Every episode's update is one transaction that first takes the memory's writer lock
(`Store.lock_writer`: a transaction-scoped advisory lock on PostgreSQL; SQLite's BEGIN IMMEDIATE
is already one). The update reads the items it credits, the episode clock and the resident set
under that lock, so the updates are serialised in commit order: concurrent credits to one item
both count, and the UGC rebuild is done by one writer at a time. The lock is held only for the
update itself (milliseconds); no model call or evaluation runs inside it (policies.py).

PostgreSQL migrations are the numbered files of `migrations/postgres/`, applied in order under
the same advisory lock (many learners starting at once migrate once), each in its own transaction,
recorded in `schema_migrations`; a database newer than this code is refused.
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any

from sagekernel.errors import SageError

#: The environment variable that names a shared memory when `--memory` is not given.
MEMORY_URL_ENV = "SAGE_MEMORY_URL"
#: The advisory lock key of the memory writer lock (an arbitrary constant: "SAGEMEM1").
WRITER_LOCK_KEY = 0x53414745_4D454D31
_URL = re.compile(r"^postgres(ql)?://", re.IGNORECASE)
_MIGRATION_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


class MemoryBackendError(SageError):
    """The shared memory named by --memory / SAGE_MEMORY_URL cannot be used."""


def is_postgres_url(text: str | None) -> bool:
    return bool(text) and bool(_URL.match(str(text)))


def memory_url(option: str | None) -> str | None:
    """The shared memory to use: the option, else SAGE_MEMORY_URL, else None (the workspace's)."""
    url = option if option else os.environ.get(MEMORY_URL_ENV) or None
    if url is not None and not is_postgres_url(url):
        raise MemoryBackendError(f"--memory / {MEMORY_URL_ENV}: {url!r} is not a PostgreSQL URL "
                                 "(postgresql://user@host:port/dbname, or postgresql:///db?host=/socket/dir);"
                                 " "
                                 "leave it out to use the workspace's own SQLite memory")
    return url


def redact(url: str) -> str:
    """The URL without its password (for messages and run records)."""
    return re.sub(r"(://[^:/@]+):[^@/]*@", r"\1:***@", url)


def without_password(url: str) -> str:
    """The URL with no password at all (a redacted one's `***` included): libpq then takes it from
    ~/.pgpass or PGPASSWORD."""
    return re.sub(r"(://[^:/@]+):[^@/]*@", r"\1@", url)


def same_memory(a: str, b: str) -> bool:
    """Whether two URLs (either possibly redacted or without password) name one memory."""
    return without_password(a).rstrip("/") == without_password(b).rstrip("/")


class _Row(tuple):
    """A result row addressable by position and by column name, as sqlite3.Row is."""

    _names: dict[str, int]

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return tuple.__getitem__(self, self._names[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._names)


def _row_factory(cursor: Any) -> Any:
    names = {d.name: i for i, d in enumerate(cursor.description or ())}
    cls = type("Row", (_Row,), {"_names": names})

    def make(values: Sequence[Any]) -> _Row:
        return cls(values)

    return make


def _translate(sql: str) -> str:
    """sqlite placeholders to psycopg's; the store's SQL has no literal % or ? in strings."""
    if "%" in sql:
        raise ValueError("store SQL must not contain a literal %")
    return sql.replace("?", "%s")


class PgConnection:
    """The part of sqlite3.Connection that Store uses, over one psycopg connection (autocommit
    outside `transaction()`)."""

    dialect = "postgres"

    def __init__(self, url: str) -> None:
        try:
            import psycopg
        except ImportError as exc:
            raise MemoryBackendError("a PostgreSQL memory needs psycopg 3: pip install 'sagekernel[postgres]'"
                                     ) from exc
        self.url = url
        try:
            self.raw = psycopg.connect(url, autocommit=True, row_factory=_row_factory, connect_timeout=10)
        except psycopg.Error as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
            raise MemoryBackendError(f"cannot connect to the shared memory {redact(url)}: {first}") from exc
        self._depth = 0

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self.raw.execute(_translate(sql), tuple(params) or None)

    def executemany(self, sql: str, rows: Any) -> None:
        rows = list(rows)
        if rows:
            with self.raw.cursor() as cur:
                cur.executemany(_translate(sql), rows)

    @property
    def in_transaction(self) -> bool:
        return self._depth > 0

    @contextmanager
    def transaction(self) -> Iterator[PgConnection]:
        """BEGIN … COMMIT, rolled back on any exception (a dead client's transaction is rolled
        back by the server when its connection drops: nothing half-written)."""
        with self.raw.transaction():
            self._depth += 1
            try:
                yield self
            finally:
                self._depth -= 1

    def close(self) -> None:
        self.raw.close()


def pg_migrations() -> list[tuple[int, str, str]]:
    """The PostgreSQL migrations as (number, name, sql), sorted by number."""
    found = []
    for entry in resources.files("sagekernel.migrations").joinpath("postgres").iterdir():
        match = _MIGRATION_NAME.match(entry.name)
        if match:
            found.append((int(match.group(1)), entry.name, entry.read_text(encoding="utf-8")))
    found.sort()
    return found


def migrate_postgres(conn: PgConnection) -> int:
    """Apply the missing PostgreSQL migrations; returns the schema version."""
    known = pg_migrations()
    newest = known[-1][0] if known else 0
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(?)", (WRITER_LOCK_KEY,))
        conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations (number INTEGER PRIMARY KEY, "
                     "name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())")
        applied = {int(r[0]) for r in conn.execute("SELECT number FROM schema_migrations").fetchall()}
        current = max(applied, default=0)
        if current > newest:
            raise MemoryBackendError(f"the shared memory {redact(conn.url)} has schema version {current}, "
                                     f"newer than this SAGE understands ({newest}); upgrade sagekernel")
        for number, name, sql in known:
            if number in applied:
                continue
            conn.raw.execute(sql)  # several statements: psycopg runs them as one simple query
            conn.execute("INSERT INTO schema_migrations (number, name) VALUES (?, ?)", (number, name))
    return newest


def connect_memory(url: str) -> PgConnection:
    """Open (and migrate) the shared PostgreSQL memory at `url`."""
    import psycopg

    conn = PgConnection(url)
    try:
        migrate_postgres(conn)
    except psycopg.Error as exc:
        conn.close()
        raise MemoryBackendError(f"the shared memory {redact(url)} could not be prepared: {exc}") from exc
    return conn


def connect_readonly(url: str) -> PgConnection:
    """The shared memory at `url` in a read-only session, not migrated (what reports read)."""
    conn = PgConnection(url)
    conn.execute("SET default_transaction_read_only = on")
    return conn


def table_names(conn: Any) -> set[str]:
    """The tables of a memory connection, either backend (a reader asks before it reads)."""
    if dialect(conn) == "sqlite":
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    else:
        rows = conn.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = "
                            "current_schema()").fetchall()
    return {str(r[0]) for r in rows}


def open_memory(url: str | None, workspace: Path | str | None, *, write: bool = False) -> Any:
    """The memory connection: the shared PostgreSQL memory at `url`, or the workspace's SQLite
    database (read-only unless `write`)."""
    if url is not None:
        return connect_memory(url)
    from sagekernel import db

    assert workspace is not None
    return db.connect(workspace, create=write, readonly=not write)


def dialect(conn: Any) -> str:
    return "sqlite" if isinstance(conn, sqlite3.Connection) else str(getattr(conn, "dialect", "sqlite"))
