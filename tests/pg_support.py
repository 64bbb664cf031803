"""A real PostgreSQL server for the shared-memory tests (memory/pgserver.py): one throwaway
cluster per test session on a unix socket in a temporary folder, one fresh database per test.
Tests skip, with the reason, only when no server can be started here."""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Iterator

import pytest

from sagekernel.memory.pgserver import LocalPostgres, ServerUnavailable


@pytest.fixture(scope="session")
def pg_server() -> Iterator[LocalPostgres]:
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip("psycopg 3 is not installed (pip install 'sagekernel[postgres]')")
    root = tempfile.mkdtemp(prefix="sagepg-")  # not under pytest's 0700 tmp: the server runs as `postgres`
    server = LocalPostgres(root)
    try:
        server.start()
    except (ServerUnavailable, OSError) as exc:
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip(f"no PostgreSQL server can be started here: {exc}")
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def pg_url(pg_server: LocalPostgres) -> str:
    """The URL of a fresh, empty database on the session's server."""
    return pg_server.create_database(f"t_{uuid.uuid4().hex[:12]}")
