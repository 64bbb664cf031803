"""Report loading from workspace databases, plus the fixture builder the other report tests use.

The builder writes rows straight into a temp workspace through `db.connect` (the shipped schema:
0003 runs and 0001 memory tables), the way the runner and memory write them.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sagekernel import db
from sagekernel.errors import WorkspaceError
from sagekernel.records import EpisodeKind, RoundTrace
from sagekernel.report.load import LATEST, ReportError, load, parse_run_arg

NOW = "2026-11-30T03:00:00"


# ---------------------------------------------------------------- fixture builder
@dataclass
class Op:
    """One finished operator of a recorded run."""

    name: str
    level: int
    compiled: bool = True
    correct: bool = True
    t_first: float | None = 2.0
    t_best: float | None = 1.0
    t_ref: float | None = 1.5
    first_round: int | None = 3
    rounds: int = 10
    tokens: int = 1000
    cost: float | None = 0.01


def insert(conn: sqlite3.Connection, table: str, row: dict[str, Any]) -> None:
    """INSERT the row, filling any other NOT NULL column without a default (schemas may grow)."""
    row = dict(row)
    for _, name, ctype, notnull, default, pk in conn.execute(f"PRAGMA table_info({table})"):
        if notnull and default is None and not pk and name not in row:
            row[name] = 0 if "INT" in ctype.upper() or "REAL" in ctype.upper() else ""
    cols = ", ".join(row)
    conn.execute(f"INSERT INTO {table} ({cols}) VALUES ({', '.join('?' * len(row))})", list(row.values()))


def add_run(ws: Path, run_id: str, method: str, model: str, ops: Sequence[Op], *, status: str = "finished",
            created_at: str = NOW, planned: Sequence[Op] = ()) -> None:
    """A run with its planned stream (ops + planned) and a result row per op (with round traces)."""
    conn = db.connect(ws)
    with db.transaction(conn):
        insert(conn, "runs", {"run_id": run_id, "created_at": created_at, "finished_at": None,
                              "status": status, "method": method, "model": model, "target": "cpu",
                              "suite": "mini", "schedule": "fixed", "budget": 30, "frozen": 0,
                              "config_json": "{}"})
        for pos, op in enumerate([*ops, *planned]):
            insert(conn, "run_stream", {"run_id": run_id, "position": pos, "operator": op.name,
                                        "level": op.level, "category": "elementwise"})
        for pos, op in enumerate(ops):
            insert(conn, "operator_results", {
                "run_id": run_id, "position": pos, "operator": op.name, "level": op.level,
                "category": "elementwise", "compiled": int(op.compiled), "correct": int(op.correct),
                "rounds_used": op.rounds, "first_correct_round": op.first_round if op.correct else None,
                "t_first_ms": op.t_first if op.correct else None,
                "t_best_ms": op.t_best if op.correct else None,
                "t_ref_ms": op.t_ref, "prompt_tokens": op.tokens // 2, "completion_tokens": op.tokens // 2,
                "cost_usd": op.cost, "wall_s": 1.0, "recorded_at": created_at})
            trace = RoundTrace(round=1, episode=EpisodeKind.CORR, compiled=op.compiled, correct=op.correct,
                               latency_ms=op.t_first if op.correct else None)
            insert(conn, "round_traces", {"run_id": run_id, "operator": op.name, "round": 1,
                                          "episode": "corr", "compiled": int(op.compiled),
                                          "correct": int(op.correct), "latency_ms": trace.latency_ms,
                                          "trace_json": json.dumps(trace.to_dict()),
                                          "created_at": created_at})
    conn.close()


def add_item(ws: Path, item_id: int, title: str, *, state: str = "cold", u: float = 0.0, n_ret: int = 0,
             n_ado: int = 0, adopters: Sequence[str] = (), category: str = "elementwise",
             rule_tokens: int = 0) -> None:
    conn = db.connect(ws)
    with db.transaction(conn):
        insert(conn, "items", {"id": item_id, "title": title, "type": "correctness", "category": category,
                               "u": u, "n_ret": n_ret, "n_ado": n_ado, "state": state,
                               "rule_tokens": rule_tokens, "created_at": NOW,
                               "content_hash": hashlib.sha256(title.encode()).hexdigest()})
        for op in adopters:
            insert(conn, "item_adopters", {"item_id": item_id, "operator": op})
    conn.close()


def add_adoptions(ws: Path, run_id: str, rows: Sequence[tuple[str, int, int, bool | None]]) -> None:
    """rows: (operator, round, item_id, adopted)."""
    conn = db.connect(ws)
    with db.transaction(conn):
        for op, rnd, item_id, adopted in rows:
            insert(conn, "adoptions", {"run_id": run_id, "operator": op, "episode": "corr", "round": rnd,
                                       "item_id": item_id,
                                       "adopted": None if adopted is None else int(adopted),
                                       "rationale": "because", "created_at": NOW})
    conn.close()


def add_snapshot(ws: Path, run_id: str, n_ops: int, entries: Sequence[tuple[int, int]], *,
                 budget: int = 10000, created_at: str = NOW) -> None:
    """entries: (item_id, tokens)."""
    conn = db.connect(ws)
    with db.transaction(conn):
        insert(conn, "hot_snapshots", {
            "run_id": run_id, "created_at": created_at, "budget": budget, "n_ops": n_ops,
            "total_tokens": sum(t for _, t in entries),
            "entries_json": json.dumps([{"id": i, "L": t} for i, t in entries])})
    conn.close()


def sage_workspace(ws: Path) -> Path:
    """A SAGE run: 5 operators (L1: 3, L2: 2), 4 compiled, 3 solved; memory with 4 items."""
    ops = [Op("relu", 1, t_first=2.0, t_best=1.0, t_ref=4.0, first_round=2),      # speedup 4, self 2
           Op("gelu", 1, t_first=3.0, t_best=2.0, t_ref=1.0, first_round=4),      # 0.5, self 1.5
           Op("softmax", 1, correct=False, tokens=3000),
           Op("layernorm", 2, t_first=1.2, t_best=1.0, t_ref=2.0, first_round=6),  # 2, self 1.2
           Op("matmul", 2, compiled=False, correct=False, tokens=5000, cost=0.05)]
    add_run(ws, "20261130_030000_sage", "sage", "qwen3-coder", ops, planned=[Op("conv", 3)])
    add_item(ws, 1, "Guard the tail of the last tile", state="consolidated", u=0.6, n_ret=6, n_ado=4,
             adopters=["relu", "gelu", "layernorm"], rule_tokens=40)
    add_item(ws, 2, "Accumulate in float32", state="validated", u=0.3, n_ret=4, n_ado=3,
             adopters=["gelu", "layernorm", "softmax"])
    add_item(ws, 3, "Vectorise the inner loop", u=-0.1, n_ret=5, n_ado=1, adopters=["relu"])
    add_item(ws, 4, "Never adopted idea", u=-0.2, n_ret=3)
    add_adoptions(ws, "20261130_030000_sage", [
        ("relu", 1, 1, True), ("relu", 1, 3, True), ("relu", 2, 4, False), ("gelu", 1, 1, True),
        ("gelu", 1, 2, True), ("gelu", 1, 4, False), ("softmax", 1, 2, True), ("softmax", 1, 4, None)])
    add_snapshot(ws, "20261130_030000_sage", 2, [(1, 40)], created_at="2026-11-30T03:01:00")
    add_snapshot(ws, "20261130_030000_sage", 4, [(1, 40), (2, 25)], created_at="2026-11-30T03:02:00")
    return ws


def refinement_workspace(ws: Path) -> Path:
    """A Refinement run over the same 5 operators: 3 compiled, 1 solved, no memory items."""
    ops = [Op("relu", 1, t_first=1.0, t_best=1.0, t_ref=0.5),  # speedup 0.5, self 1.0
           Op("gelu", 1, correct=False), Op("softmax", 1, correct=False),
           Op("layernorm", 2, compiled=False, correct=False), Op("matmul", 2, compiled=False, correct=False)]
    add_run(ws, "20261130_020000_refinement", "refinement", "qwen3-coder", ops)
    return ws


# ---------------------------------------------------------------- tests
def file_digest(ws: Path) -> str:
    return hashlib.sha256(db.db_path(ws).read_bytes()).hexdigest()


def test_loads_results_and_memory_of_a_run(tmp_path: Path) -> None:
    ws = sage_workspace(tmp_path / "sage_ws")
    loaded = load([str(ws)])
    assert len(loaded.runs) == 1
    run = loaded.runs[0]
    assert run.info.method == "sage" and run.model == "qwen3-coder"
    assert run.planned == 6 and run.planned_by_level == {1: 3, 2: 2, 3: 1}
    assert [r.operator for r in run.results] == ["relu", "gelu", "softmax", "layernorm", "matmul"]
    assert run.results[0].speedup == 4.0 and run.results[1].self_speedup == 1.5
    assert run.results[2].t_best_ms is None and run.results[4].cost_usd == 0.05
    assert run.memory is not None
    items = {i.id: i for i in run.memory.items}
    assert items[1].state == "consolidated" and items[1].n_operators == 3 and items[1].rule_tokens == 40
    assert items[4].n_operators == 0 and items[3].u == -0.1
    assert len(run.memory.adoptions) == 8
    assert [a.adopted for a in run.memory.adoptions if a.operator == "softmax"] == [True, None]
    assert [(s.n_ops, s.n_entries, s.total_tokens) for s in run.memory.snapshots] == [(2, 1, 40), (4, 2, 65)]


def test_loading_never_writes_the_database(tmp_path: Path) -> None:
    ws = sage_workspace(tmp_path / "ws")
    before = file_digest(ws)
    load([str(ws), f"{ws}:latest"])
    assert file_digest(ws) == before


def test_workspace_means_all_runs_and_latest_means_the_newest(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    add_run(ws, "a_old", "sage", "m", [Op("relu", 1)], created_at="2026-11-01T00:00:00")
    add_run(ws, "b_new", "sage", "m", [Op("relu", 1, correct=False)], created_at="2026-11-02T00:00:00")
    assert [r.info.run_id for r in load([str(ws)]).runs] == ["a_old", "b_new"]
    assert [r.info.run_id for r in load([f"{ws}:{LATEST}"]).runs] == ["b_new"]
    assert [r.info.run_id for r in load([f"{ws}:a_old"]).runs] == ["a_old"]
    # Naming the same run twice reports it once.
    assert len(load([str(ws), f"{ws}:a_old"]).runs) == 2


def test_parse_run_arg(tmp_path: Path) -> None:
    ws = tmp_path / "w"
    ws.mkdir()
    assert parse_run_arg(str(ws)).run_id is None
    ref = parse_run_arg(f"{ws}:20261130_x")
    assert ref.workspace == ws and ref.run_id == "20261130_x"
    with pytest.raises(ReportError, match="no workspace at"):
        parse_run_arg(str(tmp_path / "missing"))


def test_unknown_run_lists_the_runs_there(tmp_path: Path) -> None:
    ws = refinement_workspace(tmp_path / "ws")
    with pytest.raises(ReportError, match="its runs are: 20261130_020000_refinement"):
        load([f"{ws}:nope"])


def test_run_without_finished_operators_is_a_clear_message(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    add_run(ws, "empty", "sage", "m", [], status="running", planned=[Op("relu", 1), Op("gelu", 1)])
    message = r"run empty .* no finished operators yet \(status running, 2 planned"
    with pytest.raises(ReportError, match=message):
        load([f"{ws}:empty"])
    with pytest.raises(ReportError, match=r"nothing to report: .*no finished operators"):
        load([str(ws)])
    # In all-runs mode an empty run is skipped with a note when others have results.
    add_run(ws, "full", "sage", "m", [Op("relu", 1)], created_at="2026-12-01T00:00:00")
    loaded = load([str(ws)])
    assert [r.info.run_id for r in loaded.runs] == ["full"]
    assert any("empty" in n and "skipped" in n for n in loaded.notes)


def test_workspace_without_runs(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    db.connect(ws).close()
    with pytest.raises(ReportError, match="has no runs yet"):
        load([str(ws)])


def test_missing_workspace_database(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    with pytest.raises(WorkspaceError, match="no SAGE workspace database"):
        load([str(ws)])


def test_older_schema_without_run_tables_is_explained_and_not_migrated(tmp_path: Path) -> None:
    ws = tmp_path / "old"
    ws.mkdir()
    conn = sqlite3.connect(db.db_path(ws))
    conn.executescript("CREATE TABLE schema_migrations (number INTEGER PRIMARY KEY, name TEXT, "
                       "applied_at TEXT); "
                       "INSERT INTO schema_migrations VALUES (2, '0002_exchanges.sql', 'then');")
    conn.close()
    with pytest.raises(ReportError, match=r"schema version 2\) has no operator_results or runs table: "
                                          "it was written by an older SAGE"):
        load([str(ws)])
    assert db.schema_version(sqlite3.connect(db.db_path(ws))) == 2  # still unmigrated


def test_older_schema_without_memory_tables_reports_runs_with_a_note(tmp_path: Path) -> None:
    ws = tmp_path / "runs_only"
    ws.mkdir()
    sql = {number: text for number, _, text in db.migrations()}[3]
    conn = sqlite3.connect(db.db_path(ws))
    conn.executescript(sql + "CREATE TABLE schema_migrations (number INTEGER PRIMARY KEY, name TEXT, "
                       "applied_at TEXT); INSERT INTO schema_migrations VALUES (3, '0003_runs.sql', 'then');")
    insert(conn, "runs", {"run_id": "r", "created_at": NOW, "status": "finished", "method": "refinement",
                          "model": "m", "target": "cpu", "suite": "s", "schedule": "fixed", "budget": 30})
    insert(conn, "operator_results", {"run_id": "r", "position": 0, "operator": "relu", "level": 1,
                                      "category": "c", "compiled": 1, "correct": 1, "rounds_used": 2,
                                      "recorded_at": NOW})
    conn.commit()
    conn.close()
    loaded = load([str(ws)])
    assert loaded.runs[0].memory is None
    assert any("no memory tables" in n for n in loaded.notes)


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    ws = refinement_workspace(tmp_path / "ws")
    conn = db.connect(ws)
    conn.execute("INSERT INTO schema_migrations VALUES (9999, '9999_future.sql', 'now')")
    conn.close()
    with pytest.raises(WorkspaceError, match="newer than this SAGE"):
        load([str(ws)])
