"""Who may touch a workspace: every command that writes it takes the one workspace lock (a second
writer is refused, naming the holder, before it writes anything), and the commands that only read
work while a run holds it and on a read-only mount (SQLite opened read-only, immutable there)."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sagekernel import db
from sagekernel.memory.io import export_jsonl, load_seed
from sagekernel.models.base import Message, Reply
from sagekernel.models.exchange_log import ExchangeLog
from sagekernel.records import OperatorResult
from sagekernel.runner.lock import WorkspaceLock
from sagekernel.runner.store import RunInfo, RunStore, now_iso
from sagekernel.tasks.suites import load_suite
from test_cli_values import invoke

SEED = [
    {
        "title": f"Elementwise lesson {i}",
        "type": "correctness",
        "category": "elementwise",
        "error_message": f"error {i}",
        "wrong_code": f"x{i}",
        "correct_code": f"y{i}",
    }
    for i in range(3)
]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A workspace with memory items, one run with a finished operator, and a logged exchange."""
    ws = tmp_path / "ws"
    conn = db.connect(ws)
    seed = tmp_path / "seed.jsonl"
    seed.write_text("\n".join(json.dumps(s) for s in SEED) + "\n")
    load_seed(conn, seed)
    task = load_suite("demo")[0]
    store = RunStore(conn)
    store.create_run(
        RunInfo(
            run_id="r1",
            status="finished",
            method="sage",
            model="scripted:x",
            target="cpu",
            suite="demo",
            schedule="given",
            budget=3,
            frozen=False,
            config={},
            created_at=now_iso(),
            finished_at=now_iso(),
        ),
        [task],
    )
    with db.transaction(conn):
        store.insert_result(
            OperatorResult(
                run_id="r1",
                position=0,
                operator=task.name,
                level=task.level,
                category=task.category,
                compiled=True,
                correct=True,
                rounds_used=1,
                first_correct_round=1,
                t_first_ms=1.0,
                t_best_ms=1.0,
                t_ref_ms=2.0,
            )
        )
    ExchangeLog(conn, run_id="r1").record(
        call_id="c",
        attempt=1,
        status="ok",
        model_spec="scripted:x",
        messages=[Message("user", "hi")],
        params={},
        reply=Reply(text="hello", model="x"),
    )
    export_jsonl(conn, tmp_path / "export.jsonl")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return ws


READERS = [
    ["report", "{ws}"],
    ["memory", "list", "--workspace", "{ws}"],
    ["memory", "stats", "--workspace", "{ws}"],
    ["memory", "show", "1", "--workspace", "{ws}"],
    ["memory", "export", "{out}", "--workspace", "{ws}"],
    ["log", "list", "--workspace", "{ws}"],
    ["log", "show", "1", "--workspace", "{ws}"],
    ["audit", "adoptions", "{ws}:r1", "--no-interactive"],
]
WRITERS = [
    ["memory", "import", "{export}", "--workspace", "{ws}", "--mode", "merge"],
    ["audit", "adoptions", "{ws}:r1", "--rate", "op/1/E1=full"],
    ["run", "--workspace", "{ws}", "--model", "scripted:/nonexistent", "--no-progress", "--new"],
    ["mcp", "--workspace", "{ws}", "--model", "scripted:/nonexistent"],
]


def _digest(ws: Path) -> str:
    """The database and its write-ahead log (not the shared-memory index every reader touches)."""
    files = [ws / "sage.db", ws / "sage.db-wal"]
    return hashlib.sha256(b"".join(p.read_bytes() for p in files if p.exists())).hexdigest()


def test_writers_take_the_lock_and_readers_work_while_a_run_holds_it(workspace: Path, tmp_path: Path) -> None:
    places = {
        "ws": str(workspace),
        "export": str(tmp_path / "export.jsonl"),
        "out": str(tmp_path / "out.jsonl"),
    }
    with WorkspaceLock(workspace, "the-running-run"):
        before = _digest(workspace)
        for argv in WRITERS:
            code, _, err = invoke([a.format(**places) for a in argv])
            assert code == 2 and "in use by run 'the-running-run'" in err, (argv, code, err)
            assert _digest(workspace) == before, argv  # refused before writing anything
        for argv in READERS:
            code, out, err = invoke([a.format(**places) for a in argv])
            assert code == 0, (argv, out, err)
        assert _digest(workspace) == before


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap to mount the workspace read-only")
def test_readers_work_on_a_read_only_mount(workspace: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    places = {"ws": str(workspace), "out": str(out / "export.jsonl")}
    script = (
        "import sys, json\nfrom test_cli_values import invoke\n"
        "for argv in json.loads(sys.argv[1]):\n    print(json.dumps(invoke(argv)))\n"
    )
    readers = [[a.format(**places) for a in argv] for argv in READERS]
    proc = subprocess.run(
        [
            "bwrap",
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--bind",
            str(out),
            str(out),
            sys.executable,
            "-c",
            script,
            json.dumps(readers),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).parent,
    )
    if proc.returncode != 0 and "Creating new namespace failed" in proc.stderr:
        pytest.skip("bubblewrap cannot create a namespace here")
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("[")]
    assert len(results) == len(READERS), proc.stderr[-2000:]
    failed = {
        " ".join(argv[:2]): err for argv, (code, _, err) in zip(readers, results, strict=True) if code != 0
    }
    assert failed == {}
