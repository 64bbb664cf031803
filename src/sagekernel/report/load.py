"""Read-only loading of runs from workspace databases into records.

A RUN argument is one of:
- `WORKSPACE` (a directory, or its `sage.db`): every run in the workspace that has finished
  operators, oldest first. A workspace usually holds one method's stream (its memory is
  shared by all its runs), so "all runs" is what a comparison wants; `WORKSPACE:latest` picks
  only the newest.
- `WORKSPACE:RUN_ID`: that run.

Reports never mutate a store: every connection is `db.connect(..., readonly=True)`. A database
written by a newer SAGE is refused by `db.connect`; one written by an older SAGE (missing
tables) gets a `ReportError` that says what is missing.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sagekernel import db
from sagekernel.errors import SageError
from sagekernel.records import OperatorResult
from sagekernel.report.memory_metrics import AdoptionView, ItemView, SnapshotView
from sagekernel.report.npukb_score import OperatorCases, best_cases, verdict_record

LATEST = "latest"
MEMORY_TABLES = ("items", "adoptions", "hot_snapshots")


class ReportError(SageError):
    """A run cannot be reported (unknown run, no finished operators, schema too old)."""


@dataclass(frozen=True)
class RunRef:
    workspace: Path
    run_id: str | None  # None: every run; LATEST: the newest


@dataclass(frozen=True)
class RunInfo:
    workspace: Path
    run_id: str
    created_at: str
    finished_at: str | None
    status: str
    method: str
    model: str
    target: str
    suite: str
    schedule: str
    budget: int
    frozen: bool
    planned: int  # operators in the planned stream (0 if unknown)
    planned_by_level: dict[int, int] = field(default_factory=dict)
    #: The run's whole spend from the exchange log: every model call, including those of attempts
    #: that were killed or interrupted before their operator finished (operator results miss them).
    spend_tokens: int = 0
    spend_cost_usd: float | None = None
    spend_calls: int = 0

    @property
    def key(self) -> str:
        return f"{self.workspace.name}:{self.run_id}"


@dataclass
class MemoryData:
    items: list[ItemView]
    adoptions: list[AdoptionView]
    snapshots: list[SnapshotView]


@dataclass
class RunData:
    info: RunInfo
    results: list[OperatorResult]
    memory: MemoryData | None  # None: the workspace has no memory tables
    #: NPUKernelBench's per-operator cases (report/npukb_score.py); empty for other tasks.
    benchmark: list[OperatorCases] = field(default_factory=list)
    #: Each solved operator's best verdict (the round that set T_best): its interval, roofline and
    #: protocol (report/scores.py). Empty for runs without round traces.
    best_verdicts: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass
class Loaded:
    runs: list[RunData]
    notes: list[str]  # runs skipped and why, schema notes


def parse_run_arg(arg: str) -> RunRef:
    """`WORKSPACE` or `WORKSPACE:RUN_ID` (an existing path wins over the split)."""
    path = Path(arg).expanduser()
    if path.exists():
        return RunRef(path, None)
    if ":" in arg:
        ws, run_id = arg.rsplit(":", 1)
        if ws and run_id:
            return RunRef(Path(ws).expanduser(), run_id)
    raise ReportError(f"no workspace at {arg!r}: pass a workspace directory, or WORKSPACE:RUN_ID "
                      "(WORKSPACE:latest for its newest run)")


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}


def _col(cols: set[str], name: str, default: str) -> str:
    """`name` if the table has that column, else a literal default under that name."""
    return name if name in cols else f"{default} AS {name}"


def load(args: Sequence[str]) -> Loaded:
    """Load every run the arguments name. Raises ReportError when nothing can be reported."""
    if not args:
        raise ReportError("name at least one run: a workspace directory or WORKSPACE:RUN_ID")
    runs: list[RunData] = []
    notes: list[str] = []
    seen: set[tuple[Path, str]] = set()
    for arg in args:
        ref = parse_run_arg(arg)
        conn = db.connect(ref.workspace, readonly=True)
        try:
            for run in _load_ref(conn, ref, notes):
                key = (ref.workspace.resolve(), run.info.run_id)
                if key not in seen:
                    seen.add(key)
                    runs.append(run)
        finally:
            conn.close()
    if not runs:
        raise ReportError("nothing to report: " + ("; ".join(notes) if notes else "no runs found"))
    return Loaded(runs, notes)


def _load_ref(conn: sqlite3.Connection, ref: RunRef, notes: list[str]) -> list[RunData]:
    path = db.conn_path(conn)
    tables = _tables(conn)
    missing = {"runs", "operator_results"} - tables
    if missing:
        raise ReportError(
            f"the workspace database {path} (schema version {db.schema_version(conn)}) has no "
            f"{' or '.join(sorted(missing))} table: it was written by an older SAGE. Any `sage` "
            "command that writes to the workspace migrates it; reports only read.")
    all_ids = [row[0] for row in conn.execute("SELECT run_id FROM runs ORDER BY created_at, run_id")]
    if not all_ids:
        raise ReportError(f"the workspace {ref.workspace} has no runs yet (start one with `sage run`)")
    if ref.run_id is None:
        ids, explicit = all_ids, False
    elif ref.run_id == LATEST:
        ids, explicit = all_ids[-1:], True
    elif ref.run_id in all_ids:
        ids, explicit = [ref.run_id], True
    else:
        raise ReportError(f"no run {ref.run_id!r} in {ref.workspace}; its runs are: {', '.join(all_ids)}")
    memory_ok = all(t in tables for t in MEMORY_TABLES)
    if not memory_ok:
        notes.append(f"{ref.workspace}: no memory tables (schema version {db.schema_version(conn)}), "
                     "so no memory figures")
    out = []
    for run_id in ids:
        info = _run_info(conn, ref.workspace, run_id, tables)
        results = _results(conn, run_id)
        if not results:
            msg = (f"run {run_id} in {ref.workspace} has no finished operators yet "
                   f"(status {info.status}, {info.planned} planned)")
            if explicit:
                raise ReportError(msg + "; report it once at least one operator has finished")
            notes.append(msg + "; skipped")
            continue
        memory = _memory(conn, run_id, tables) if memory_ok else None
        out.append(RunData(info, results, memory, _benchmark(conn, run_id, results, tables),
                           _best_verdicts(conn, run_id, results, tables)))
    return out


def _run_info(conn: sqlite3.Connection, workspace: Path, run_id: str, tables: set[str]) -> RunInfo:
    row = conn.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    planned_by_level: dict[int, int] = {}
    if "run_stream" in tables:
        for lv, n in conn.execute("SELECT level, count(*) FROM run_stream WHERE run_id = ? GROUP BY level",
                                  (run_id,)):
            planned_by_level[int(lv)] = int(n)
    keys = row.keys()

    def get(name: str, default: str = "") -> str:
        return str(row[name]) if name in keys and row[name] is not None else default

    spend_tokens, spend_cost, spend_calls = 0, None, 0
    if "exchanges" in tables:
        srow = conn.execute(
            "SELECT coalesce(sum(prompt_tokens), 0) + coalesce(sum(completion_tokens), 0), sum(cost_usd), "
            "count(*) FROM exchanges WHERE run_id = ?", (run_id,)).fetchone()
        spend_tokens, spend_calls = int(srow[0]), int(srow[2])
        spend_cost = float(srow[1]) if srow[1] is not None else None
    return RunInfo(
        workspace=workspace, run_id=run_id, created_at=get("created_at"),
        finished_at=row["finished_at"] if "finished_at" in keys else None,
        status=get("status", "unknown"), method=get("method", "unknown"),
        model=_credited_model(conn, run_id, tables, get("model", "unknown")),
        target=get("target"), suite=get("suite"), schedule=get("schedule"),
        budget=int(get("budget", "0")), frozen=bool(int(get("frozen", "0"))),
        planned=sum(planned_by_level.values()), planned_by_level=planned_by_level,
        spend_tokens=spend_tokens, spend_cost_usd=spend_cost, spend_calls=spend_calls)


def _credited_model(conn: sqlite3.Connection, run_id: str, tables: set[str], model: str) -> str:
    """Who wrote the kernels. A `sage mcp` run's kernels come from the coding agents that called its
    tools (named by their MCP handshake, e.g. "opencode 1.18.33"); the run's own model (`runs.model`)
    only distilled and is left out of the label. Other runs: their model."""
    if "tool_calls" not in tables:
        return model
    labels = [str(c) for (c,) in conn.execute(
        "SELECT client FROM tool_calls WHERE run_id = ? GROUP BY client ORDER BY min(id)", (run_id,))]
    agents = list(dict.fromkeys(label.split(" (")[0] for label in labels))  # "(stdio)", "(http ...)" dropped
    if not agents:
        return model
    return f"{', '.join(agents)} via MCP"


def _results(conn: sqlite3.Connection, run_id: str) -> list[OperatorResult]:
    rows = conn.execute(
        "SELECT run_id, position, operator, level, category, compiled, correct, rounds_used, "
        "first_correct_round, t_first_ms, t_best_ms, t_ref_ms, prompt_tokens, completion_tokens, "
        "cost_usd, wall_s FROM operator_results WHERE run_id = ? ORDER BY position", (run_id,))
    return [OperatorResult(
        run_id=r["run_id"], position=int(r["position"]), operator=r["operator"], level=int(r["level"]),
        category=r["category"], compiled=bool(r["compiled"]), correct=bool(r["correct"]),
        rounds_used=int(r["rounds_used"]), first_correct_round=r["first_correct_round"],
        t_first_ms=_latency(r["t_first_ms"]), t_best_ms=_latency(r["t_best_ms"]),
        t_ref_ms=_latency(r["t_ref_ms"]),
        prompt_tokens=int(r["prompt_tokens"] or 0), completion_tokens=int(r["completion_tokens"] or 0),
        cost_usd=r["cost_usd"], wall_s=float(r["wall_s"] or 0.0)) for r in rows]


def _benchmark(conn: sqlite3.Connection, run_id: str, results: Sequence[OperatorResult],
               tables: set[str]) -> list[OperatorCases]:
    """Each finished operator's best benchmark record, from its rounds' verdicts."""
    if "round_traces" not in tables:
        return []
    records: dict[str, list[Any]] = {}
    for row in conn.execute("SELECT operator, trace_json FROM round_traces WHERE run_id = ?", (run_id,)):
        try:
            verdict = json.loads(row[1]).get("verdict")
        except (ValueError, AttributeError):
            continue
        record = verdict_record(verdict)
        if record is not None:
            records.setdefault(row[0], []).append(record)
    found = [best_cases(r.operator, r.level, records.get(r.operator, [])) for r in results]
    return [f for f in found if f is not None]


def _best_verdicts(conn: sqlite3.Connection, run_id: str, results: Sequence[OperatorResult],
                   tables: set[str]) -> dict[str, dict[str, Any]]:
    """Per solved operator, the verdict of the first correct round whose latency is its T_best (the
    round the agent took as the best: agent/state.py records T_best from that verdict)."""
    if "round_traces" not in tables:
        return {}
    wanted = {r.operator: r.t_best_ms for r in results if r.correct and r.t_best_ms is not None}
    out: dict[str, dict[str, Any]] = {}
    for row in conn.execute("SELECT operator, latency_ms, trace_json FROM round_traces WHERE run_id = ? AND "
                            "correct = 1 ORDER BY operator, round", (run_id,)):
        op = row[0]
        if op in out or op not in wanted or row[1] != wanted[op]:
            continue
        try:
            verdict = json.loads(row[2]).get("verdict")
        except (ValueError, AttributeError):
            continue
        if isinstance(verdict, dict):
            out[op] = verdict
    return out


def _latency(value: object) -> float | None:
    """A stored latency, or None when it is not a finite positive number (SQLite keeps ±inf; a
    0 or inf T_best would otherwise give an infinite speedup, or crash the geometric mean)."""
    if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        return None
    return float(value)


def _memory(conn: sqlite3.Connection, run_id: str, tables: set[str]) -> MemoryData:
    cols = _columns(conn, "items")
    n_ops_sql = "0 AS n_operators"
    if "item_adopters" in tables:
        n_ops_sql = ("(SELECT count(DISTINCT a.operator) FROM item_adopters a "
                     "WHERE a.item_id = items.id) AS n_operators")
    defaults = {"title": "''", "type": "''", "category": "''", "state": "'cold'", "u": "0.0",
                "n_ret": "0", "n_ado": "0", "rule_tokens": "NULL"}
    select = ", ".join(_col(cols, name, default) for name, default in defaults.items())
    items = [ItemView(
        id=int(r["id"]), title=str(r["title"]), type=str(r["type"]), category=str(r["category"]),
        state=str(r["state"]), u=float(r["u"] or 0.0), n_ret=int(r["n_ret"] or 0), n_ado=int(r["n_ado"] or 0),
        n_operators=int(r["n_operators"] or 0),
        rule_tokens=None if r["rule_tokens"] is None else int(r["rule_tokens"]))
        for r in conn.execute(f"SELECT id, {select}, {n_ops_sql} FROM items ORDER BY id")]
    adoptions = [AdoptionView(
        operator=str(r["operator"]), episode=str(r["episode"]), round=int(r["round"]),
        item_id=int(r["item_id"]), adopted=None if r["adopted"] is None else bool(r["adopted"]))
        for r in conn.execute("SELECT operator, episode, round, item_id, adopted FROM adoptions "
                              "WHERE run_id = ? ORDER BY operator, round, item_id", (run_id,))]
    snapshots = []
    for r in conn.execute("SELECT created_at, budget, n_ops, total_tokens, entries_json FROM hot_snapshots "
                          "WHERE run_id = ? ORDER BY n_ops, created_at, id", (run_id,)):
        entries = _entries(r["entries_json"])
        total = r["total_tokens"]
        if total is None:
            total = sum(_entry_tokens(e) for e in entries)
        snapshots.append(SnapshotView(created_at=str(r["created_at"]), n_ops=int(r["n_ops"] or 0),
                                      budget=int(r["budget"] or 0), n_entries=len(entries),
                                      total_tokens=int(total)))
    return MemoryData(items, adoptions, snapshots)


def _entries(text: str | None) -> list[dict[str, object]]:
    try:
        data = json.loads(text or "[]")
    except json.JSONDecodeError:
        return []
    return [e for e in data if isinstance(e, dict)] if isinstance(data, list) else []


def _entry_tokens(entry: dict[str, object]) -> int:
    value = entry.get("L", entry.get("tokens", 0))
    return int(value) if isinstance(value, (int, float)) else 0
