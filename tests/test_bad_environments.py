"""Bad environments: filesystem and SQLite failures are clear messages, never tracebacks, and never
leave a broken workspace or a half-written file behind. Memory import/export validation. One test
per case."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sagekernel import db
from sagekernel.errors import WorkspaceError
from sagekernel.memory.io import MAX_FIELD_CHARS, export_jsonl, import_jsonl
from sagekernel.memory.records import Item
from sagekernel.memory.store import MemoryStoreError, Store

SRC = str(Path(__file__).resolve().parents[1] / "src")


@contextmanager
def read_only(path: Path) -> Iterator[None]:
    """Make `path` unwritable even for root (the immutable attribute), else by permissions."""
    if os.geteuid() == 0:
        if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(path)]).returncode:
            pytest.skip("running as root without a working chattr: cannot make a path read-only")
        try:
            yield
        finally:
            subprocess.run(["chattr", "-i", str(path)], check=False)
    else:
        mode = path.stat().st_mode
        path.chmod(0o555 if path.is_dir() else 0o444)
        try:
            yield
        finally:
            path.chmod(mode)


def make_item(title: str, **fields: object) -> Item:
    base: dict[str, object] = {"id": 0, "title": title, "type": "correctness", "category": "elementwise",
                               "error_message": "", "wrong_code": "", "correct_code": ""}
    return Item(**{**base, **fields})  # type: ignore[arg-type]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def child(code: str, *, fsize: int | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run `code` in a fresh interpreter, optionally with a file-size limit (a full disk in miniature:
    writes past it fail with EFBIG, as they fail with ENOSPC on a full disk)."""
    prelude = "import resource, signal\n"
    if fsize is not None:
        prelude += (f"signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
                    f"resource.setrlimit(resource.RLIMIT_FSIZE, ({fsize}, {fsize}))\n")
    return subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, "PYTHONPATH": SRC})


# ----------------------------------------------------------------------------- workspace location

def test_workspace_path_that_is_a_file(tmp_path: Path) -> None:
    f = tmp_path / "notes.txt"
    f.write_text("hello")
    with pytest.raises(WorkspaceError, match="is a file, not a directory"):
        db.connect(f)
    assert f.read_text() == "hello"


def test_workspace_named_x_db_that_is_a_directory(tmp_path: Path) -> None:
    (tmp_path / "X.db").mkdir()
    with pytest.raises(WorkspaceError, match="is a directory"):
        db.connect(tmp_path / "X.db")


def test_workspace_named_x_db_that_is_not_a_database(tmp_path: Path) -> None:
    (tmp_path / "X.db").write_text("just text\n" * 200)
    with pytest.raises(WorkspaceError, match="corrupted"):
        db.connect(tmp_path / "X.db")


def test_workspace_in_a_read_only_directory(tmp_path: Path) -> None:
    parent = tmp_path / "locked"
    parent.mkdir()
    with read_only(parent), pytest.raises(WorkspaceError, match="read-only"):
        db.connect(parent / "ws")
    assert not (parent / "ws").exists()


def test_read_only_database(workspace: Path) -> None:
    db.connect(workspace).close()
    path = db.db_path(workspace)
    before = digest(path)
    with read_only(path), pytest.raises(WorkspaceError, match="read-only"):
        db.connect(workspace)
    assert digest(path) == before
    db.connect(workspace, readonly=True).close()  # reading it is still fine


def test_locked_database_waits_then_names_the_holder(workspace: Path) -> None:
    db.connect(workspace).close()
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sqlite3, sys, time
            c = sqlite3.connect({str(db.db_path(workspace))!r}, isolation_level=None)
            c.execute("BEGIN EXCLUSIVE")
            print("held", flush=True)
            time.sleep(60)
        """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        start = time.monotonic()
        with pytest.raises(WorkspaceError, match="locked by another process") as info:
            conn = db.connect(workspace, timeout_s=0.5)
            with db.transaction(conn):
                pass
        assert time.monotonic() - start < 10, "the busy wait is bounded"
        assert f"pid {holder.pid}" in str(info.value), info.value
    finally:
        holder.kill()
        holder.wait()


def test_full_disk_during_migration_leaves_no_schema_less_database(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    result = child(f"""
        from sagekernel import db
        from sagekernel.errors import WorkspaceError
        try:
            db.connect({str(ws)!r})
        except WorkspaceError as exc:
            print("MSG", exc)
    """, fsize=6000)
    assert "MSG" in result.stdout and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert "full" in result.stdout or "disk" in result.stdout
    assert not db.db_path(ws).exists(), "a database without its schema is removed"
    assert not any(p.name.startswith("sage.db") for p in ws.iterdir())


def test_full_disk_during_export_leaves_no_file(workspace: Path, tmp_path: Path) -> None:
    conn = db.connect(workspace)
    store = Store(conn)
    for i in range(40):
        store.insert_item(make_item(f"item {i}", wrong_code="x" * 2000,
                               correct_code="y" * 2000))
    conn.close()
    out = tmp_path / "exports" / "memory.jsonl"
    out.parent.mkdir()
    result = child(f"""
        from sagekernel import db
        from sagekernel.memory.io import export_jsonl
        from sagekernel.memory.store import MemoryStoreError
        conn = db.connect({str(workspace)!r})
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))  # the disk fills during the export
        try:
            export_jsonl(conn, {str(out)!r})
        except MemoryStoreError as exc:
            print("MSG", exc)
    """)
    assert "MSG could not write the export" in result.stdout, result.stdout + result.stderr[-2000:]
    assert list(out.parent.iterdir()) == [], "no 0-byte or partial export under any name"


def test_database_damaged_in_the_middle_is_named_before_any_write(workspace: Path) -> None:
    conn = db.connect(workspace)
    store = Store(conn)
    for i in range(300):
        store.insert_item(make_item(f"item {i}", wrong_code="w" * 900))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    path = db.db_path(workspace)
    data = bytearray(path.read_bytes())
    page = 4096
    middle = (len(data) // page // 2) * page
    data[middle:middle + page] = b"\x5a" * page
    path.write_bytes(bytes(data))
    before = digest(path)
    with pytest.raises(WorkspaceError, match=r"damaged|corrupted"):
        db.connect(workspace)
    assert digest(path) == before, "nothing was written into the damaged database"


def test_sqlite_errors_reaching_the_cli_are_messages(tmp_path: Path) -> None:
    f = tmp_path / "afile"
    f.write_text("x")
    result = subprocess.run([sys.executable, "-c", "from sagekernel.cli import main; main()", "memory",
                             "list", "--workspace", str(f)], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": SRC}, timeout=120)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "is a file, not a directory" in " ".join(result.stderr.split())


# ----------------------------------------------------------------------------- memory import / export

def _export(workspace: Path, tmp_path: Path, n: int = 3) -> Path:
    conn = db.connect(workspace)
    store = Store(conn)
    for i in range(n):
        store.insert_item(make_item(f"item {i}", correct_code=f"code {i}"))
    out = tmp_path / "export.jsonl"
    export_jsonl(conn, out)
    conn.close()
    return out


def test_import_refuses_an_export_shorter_than_its_header(workspace: Path, tmp_path: Path) -> None:
    out = _export(workspace, tmp_path)
    lines = out.read_text().splitlines()
    out.write_text("\n".join(lines[:-1]) + "\n")
    fresh = db.connect(tmp_path / "other")
    with pytest.raises(MemoryStoreError, match="shorter than its header declares"):
        import_jsonl(fresh, out)
    assert Store(fresh).count() == 0


@pytest.mark.parametrize("version", [0, -1, "1", True, 2.5, None])
def test_import_rejects_unknown_schema_versions(workspace: Path, tmp_path: Path, version: object) -> None:
    out = _export(workspace, tmp_path)
    lines = out.read_text().splitlines()
    header = json.loads(lines[0])
    header["schema_version"] = version
    out.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    with pytest.raises(MemoryStoreError, match="schema version"):
        import_jsonl(db.connect(tmp_path / "other"), out)


def test_import_caps_item_text_fields(workspace: Path, tmp_path: Path) -> None:
    out = _export(workspace, tmp_path, n=1)
    header, item = out.read_text().splitlines()
    data = json.loads(item)
    data["wrong_code"] = "z" * (MAX_FIELD_CHARS + 1)
    out.write_text(header + "\n" + json.dumps(data) + "\n")
    with pytest.raises(MemoryStoreError, match="wrong_code is too long") as info:
        import_jsonl(db.connect(tmp_path / "other"), out)
    assert str(MAX_FIELD_CHARS) in str(info.value)


def test_memory_show_on_a_huge_item_returns_at_once(workspace: Path) -> None:
    from sagekernel.cli import app

    conn = db.connect(workspace)
    item_id = Store(conn).insert_item(make_item("huge [/x]", wrong_code="w" * 20_000_000))
    conn.close()
    start = time.monotonic()
    result = CliRunner().invoke(app, ["memory", "show", str(item_id), "--workspace", str(workspace)])
    assert result.exit_code == 0, result.output
    assert time.monotonic() - start < 10
    assert "more characters" in result.output and len(result.output) < 100_000
    assert "huge [/x]" in result.output


# ----------------------------------------------------------------------------- help

def test_help_fits_80_columns_without_cutting_option_names() -> None:
    import typer.main

    from sagekernel.cli import app

    root = typer.main.get_command(app)

    def commands(cmd: Any, path: list[str]) -> Iterator[tuple[list[str], Any]]:
        yield path, cmd
        for name, sub in getattr(cmd, "commands", {}).items():
            if True:
                yield from commands(sub, [*path, name])

    runner = CliRunner()
    checked = 0
    for path, cmd in commands(root, []):
        result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "80"}, terminal_width=80)
        assert result.exit_code == 0, (path, result.output)
        for line in result.output.splitlines():
            assert len(line) <= 80, f"sage {' '.join(path)} --help: {line!r}"
        for param in cmd.params:
            for opt in param.opts:
                if opt.startswith("--"):
                    assert opt in result.output, f"sage {' '.join(path)} --help cuts {opt}"
        checked += 1
    assert checked > 10


# ----------------------------------------------------------------------------- spend of killed attempts

def test_report_counts_spend_of_attempts_that_never_finished(tmp_path: Path) -> None:
    from sagekernel.report.build import build, notes_for, to_json
    from sagekernel.report.load import load
    from test_report_workspace import Op, add_run, insert

    ws = tmp_path / "ws"
    ws.mkdir()
    add_run(ws, "r1", "sage", "m", [Op("relu", 1, tokens=1000)], status="interrupted",
            planned=[Op("gelu", 1)])
    conn = db.connect(ws)
    for op, tokens in (("relu", 1000), ("gelu", 700)):  # gelu's attempt was killed before its result
        insert(conn, "exchanges", {"created_at": "t", "call_id": op, "attempt": 1, "status": "ok",
                                   "run_id": "r1", "operator": op, "model_spec": "m", "messages_json": "[]",
                                   "params_json": "{}", "prompt_text": "", "prompt_tokens": tokens // 2,
                                   "completion_tokens": tokens - tokens // 2})
    conn.close()
    reports = build(load([str(ws)]))
    data = to_json(reports)["runs"][0]["spend"]
    assert data["tokens"] == 1700 and data["unfinished_attempt_tokens"] == 700 and data["calls"] == 2
    assert any("700 of the run's 1,700 tokens" in n for n in notes_for(reports))


def test_run_with_a_workspace_named_x_db_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    from sagekernel.runner.config import RunConfig
    from sagekernel.runner.run import run

    target = tmp_path / "X.db"
    with pytest.raises(WorkspaceError, match="needs a workspace directory"):
        run(RunConfig(workspace=target, suite="demo", model="openai:m@http://127.0.0.1:9", progress=False))
    assert not target.exists()
