"""The workspace database: migrations, and clear errors for the failures users meet."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from sagekernel import db
from sagekernel.errors import WorkspaceError


def test_new_workspace_is_migrated_to_newest(workspace: Path) -> None:
    conn = db.connect(workspace)
    newest = db.migrations()[-1][0]
    assert db.schema_version(conn) == newest
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_missing_database_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError, match="no SAGE workspace database"):
        db.connect(tmp_path / "nowhere", create=False)


def test_corrupted_database_is_a_clear_error(workspace: Path) -> None:
    (workspace / db.DB_FILENAME).write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(WorkspaceError, match="corrupted"):
        db.connect(workspace)


def test_newer_schema_is_refused(workspace: Path) -> None:
    conn = db.connect(workspace)
    conn.execute("INSERT INTO schema_migrations VALUES (9999, '9999_future.sql', 'now')")
    conn.close()
    with pytest.raises(WorkspaceError, match="newer than this SAGE"):
        db.connect(workspace)


def test_locked_database_is_a_clear_error(workspace: Path) -> None:
    db.connect(workspace).close()
    holder = sqlite3.connect(db.db_path(workspace), isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        conn = db.connect(workspace, timeout_s=0.1)
        with pytest.raises(WorkspaceError, match="locked"), db.transaction(conn):
            pass
    finally:
        holder.execute("ROLLBACK")


def test_transaction_rolls_back_on_error(workspace: Path) -> None:
    conn = db.connect(workspace)
    conn.execute("CREATE TABLE t (x INTEGER)")
    with pytest.raises(RuntimeError), db.transaction(conn):
        conn.execute("INSERT INTO t VALUES (1)")
        raise RuntimeError("crash mid-update")
    assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 0
