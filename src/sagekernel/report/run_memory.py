"""Which memory a reported run learned into, and opening it read-only.

A run records the memory it used in its stored configuration (runner/config.py `stored`): the
shared PostgreSQL memory it was given (`memory`, the URL without its password), a frozen snapshot
of a donor's memory (`memory_from`: the copy `memory-from-RUN.db` beside its database), or neither
(the workspace's own SQLite memory). The report reads that memory — not the workspace's, which a
run with a shared memory leaves empty — so its memory figures are the run's.

`sage report --memory URL_OR_PATH` names the memory instead, for the same reason `sage run
--memory` does: to give what the record cannot hold (the password of a URL; a moved database).
It must be the same kind of memory the run learned into, and a URL the same server, user and
database (compared without passwords); a run that learned into another memory is refused, never
silently reported against the wrong one. Without `--memory`, the password of a recorded URL comes
from $SAGE_MEMORY_URL when that names the same memory, else from libpq's usual sources
(~/.pgpass, PGPASSWORD). A shared memory is opened in a read-only session and never migrated. A
recorded memory that cannot be opened is a note in the report (load.py); a `--memory` one, an error.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sagekernel.errors import SageError

WORKSPACE, SHARED, SNAPSHOT, GIVEN_FILE = "workspace", "shared", "snapshot", "file"


class RunMemoryError(SageError):
    """The memory of a reported run cannot be chosen or opened."""


@dataclass(frozen=True)
class MemorySource:
    """Where a run's memory is read from."""

    kind: str  # WORKSPACE | SHARED | SNAPSHOT | GIVEN_FILE
    label: str  # for the report and messages: a path, or the URL without its password
    url: str | None = None  # SHARED: what to connect with
    path: Path | None = None  # the SQLite database (workspace, snapshot, given file)

    @property
    def sqlite(self) -> bool:
        return self.kind != SHARED


def recorded(config: dict[str, Any], workspace: Path, run_id: str) -> MemorySource:
    """The memory the run's stored configuration says it learned into (or evaluated with)."""
    from sagekernel.memory.backend import without_password

    cfg = config.get("cfg") if isinstance(config.get("cfg"), dict) else {}
    assert isinstance(cfg, dict)
    url = cfg.get("memory")
    if isinstance(url, str) and url:
        return MemorySource(SHARED, url, url=without_password(url))
    if cfg.get("memory_from"):
        snapshot = workspace / f"memory-from-{run_id}.db"
        return MemorySource(SNAPSHOT, str(snapshot), path=snapshot)
    return MemorySource(WORKSPACE, str(workspace), path=workspace)


def given(value: str) -> MemorySource:
    """`--memory URL_OR_PATH`: a PostgreSQL URL, or a workspace directory / SQLite database file."""
    from sagekernel.memory.backend import is_postgres_url, redact

    text = value.strip()
    if not text:
        raise RunMemoryError("--memory: give a PostgreSQL URL (postgresql://user@host:port/db) or a "
                             "workspace directory or database file")
    if is_postgres_url(text):
        return MemorySource(SHARED, redact(text), url=text)
    if "://" in text:
        raise RunMemoryError(f"--memory: {redact(text)!r} is not a PostgreSQL URL "
                             "(postgresql://user@host:port/db) nor a path")
    path = Path(text).expanduser()
    from sagekernel import db

    if not db.db_path(path).is_file():
        raise RunMemoryError(f"--memory: no memory database at {path} (a workspace directory holding "
                             f"{db.DB_FILENAME}, or a .db file)")
    return MemorySource(GIVEN_FILE, str(path), path=path)


def choose(run: MemorySource, option: MemorySource | None, run_label: str,
           env: str | None = None) -> MemorySource:
    """The memory to read for a run that recorded `run`: `option` if it is that memory (else a
    RunMemoryError naming both), else the recorded one, with $SAGE_MEMORY_URL's password when that
    names the same shared memory."""
    from sagekernel.memory.backend import MEMORY_URL_ENV, is_postgres_url, redact, same_memory

    if option is None:
        env = os.environ.get(MEMORY_URL_ENV) if env is None else env
        if run.kind == SHARED and env and is_postgres_url(env) and same_memory(redact(env), run.label):
            return MemorySource(SHARED, run.label, url=env)
        return run
    if run.kind == SHARED:
        if option.kind == SHARED and same_memory(option.label, run.label):
            return MemorySource(SHARED, run.label, url=option.url)
        raise RunMemoryError(f"--memory {option.label}: run {run_label} learned into the shared memory "
                             f"{run.label}; leave --memory out or name that memory")
    if option.kind == SHARED:
        what = ("a snapshot of another workspace's memory" if run.kind == SNAPSHOT
                else "its workspace's memory")
        raise RunMemoryError(f"--memory {option.label}: run {run_label} did not learn into a shared memory "
                             f"(it used {what}, {run.label}); leave --memory out or pass that database")
    return option


def open_readonly(source: MemorySource) -> Any:
    """A read-only connection to the memory (sqlite3.Connection or memory.backend.PgConnection)."""
    from sagekernel import db

    if source.kind == SHARED:
        from sagekernel.memory.backend import connect_readonly

        assert source.url is not None
        return connect_readonly(source.url)  # a report never writes nor migrates
    assert source.path is not None
    if not db.db_path(source.path).is_file():
        raise RunMemoryError(f"the memory database {db.db_path(source.path)} is gone")
    return db.connect(source.path, create=False, readonly=True)


def has_memory_tables(conn: Any, names: tuple[str, ...]) -> bool:
    """Whether every table in `names` exists (either backend; a report never creates them)."""
    from sagekernel.memory.backend import table_names

    return set(names) <= table_names(conn)
