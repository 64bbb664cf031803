"""Read-only loading of runs from workspace databases into records.

A RUN argument is one of:
- `WORKSPACE` (a directory, or its `sage.db`): every run in the workspace that has finished
  operators, oldest first. A workspace usually holds one method's stream (its memory is
  shared by all its runs), so "all runs" is what a comparison wants; `WORKSPACE:latest` picks
  only the newest.
- `WORKSPACE:RUN_ID`: that run.

Each run's memory figures come from the memory it learned into (report/run_memory.py): its
workspace's, the shared PostgreSQL memory it recorded, or its frozen snapshot; `memory` (`sage
report --memory`) names it instead, and must be that memory.

Reports never mutate a store: every connection is `db.connect(..., readonly=True)` (a shared
memory: a read-only session, never migrated). A database
written by a newer SAGE is refused by `db.connect`; one written by an older SAGE (missing
tables) gets a `ReportError` that says what is missing.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sagekernel import db
from sagekernel.errors import SageError
from sagekernel.memory.methods import VARIANTS
from sagekernel.memory.store import Store
from sagekernel.models.exchange_log import Spend, run_spend, tool_clients
from sagekernel.records import OperatorResult
from sagekernel.report.memory_metrics import AdoptionView, ItemView, RunProvenance, SnapshotView
from sagekernel.report.npukb_score import OperatorCases, best_cases, verdict_record
from sagekernel.report.run_memory import (
    MemorySource,
    choose,
    given,
    has_memory_tables,
    open_readonly,
    recorded,
)
from sagekernel.runner.store import RunInfo, RunStore

LATEST = "latest"
MEMORY_TABLES = ("items", "adoptions", "hot_snapshots")


class ReportError(SageError):
    """A run cannot be reported (unknown run, no finished operators, schema too old)."""


@dataclass(frozen=True)
class RunRef:
    workspace: Path
    run_id: str | None  # None: every run; LATEST: the newest


@dataclass
class MemoryData:
    items: list[ItemView]
    adoptions: list[AdoptionView]
    snapshots: list[SnapshotView]
    #: Where it was read: the workspace path, the snapshot path, or the shared memory's URL (no password).
    where: str = ""
    provenance: RunProvenance | None = None  # None: the memory has no provenance table


@dataclass
class RunData:
    """One run as the report reads it: its `runs` row, and what the report adds to it."""

    info: RunInfo
    workspace: Path
    #: Who wrote the kernels: the run's model, or for a `sage mcp` run the coding agents that
    #: called its tools ("opencode 1.18.33 via MCP"); the server's own model only distilled.
    model: str
    planned_by_level: dict[int, int]
    spend: Spend
    results: list[OperatorResult]
    memory: MemoryData | None  # None: the workspace has no memory tables
    #: NPUKernelBench's per-operator cases (report/npukb_score.py); empty for other tasks.
    benchmark: list[OperatorCases] = field(default_factory=list)
    #: Each solved operator's best verdict (the round that set T_best): its interval, roofline and
    #: protocol (report/scores.py). Empty for runs without round traces.
    best_verdicts: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def planned(self) -> int:
        """Operators in the planned stream (0 if unknown)."""
        return sum(self.planned_by_level.values())

    @property
    def key(self) -> str:
        return f"{self.workspace.name}:{self.info.run_id}"


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


class _Memories:
    """The memories the reported runs learned into, each opened once (read-only) and read once per run."""

    def __init__(self, option: str | None) -> None:
        self.option = given(option) if option is not None else None
        self.open: dict[tuple[str, str], Any] = {}

    def read(self, info: RunInfo, workspace: Path, notes: list[str]) -> MemoryData | None:
        label = f"{workspace}:{info.run_id}"
        source = choose(recorded(info.config, workspace, info.run_id), self.option, label)
        key = (source.kind, source.label)
        if key not in self.open:
            try:
                conn = open_readonly(source)
            except SageError as exc:
                if self.option is not None:
                    raise  # the memory asked for must be read
                # the recorded one (a server down, a snapshot deleted): the results are still reported
                notes.append(f"run {label}: its memory cannot be read, so no memory figures ({exc}); "
                             "name it with --memory")
                self.open[key] = None
                return None
            if not has_memory_tables(conn, MEMORY_TABLES):
                notes.append(f"{source.label}: no memory tables, so no memory figures")
                conn.close()
                conn = None
            self.open[key] = conn
        conn = self.open[key]
        if conn is None:
            return None
        data = _memory(conn, info.run_id, source)
        retrieves = info.method in VARIANTS  # refinement reads no memory
        if retrieves and not data.adoptions and not data.snapshots and not (
                data.provenance and data.provenance.touched):
            notes.append(f"run {label}: the memory {source.label} holds no retrieval, snapshot or "
                         "change of this run")
        return data

    def close(self) -> None:
        for conn in self.open.values():
            if conn is not None:
                conn.close()


def load(args: Sequence[str], memory: str | None = None) -> Loaded:
    """Load every run the arguments name; `memory` (a PostgreSQL URL or a SQLite memory's path)
    names the memory the runs learned into. Raises ReportError when nothing can be reported."""
    if not args:
        raise ReportError("name at least one run: a workspace directory or WORKSPACE:RUN_ID")
    runs: list[RunData] = []
    notes: list[str] = []
    seen: set[tuple[Path, str]] = set()
    memories = _Memories(memory)
    try:
        for arg in args:
            ref = parse_run_arg(arg)
            conn = db.connect(ref.workspace, readonly=True)
            try:
                for run in _load_ref(conn, ref, notes, memories):
                    key = (ref.workspace.resolve(), run.info.run_id)
                    if key not in seen:
                        seen.add(key)
                        runs.append(run)
            finally:
                conn.close()
    finally:
        memories.close()
    if not runs:
        raise ReportError("nothing to report: " + ("; ".join(notes) if notes else "no runs found"))
    return Loaded(runs, notes)


def _load_ref(conn: sqlite3.Connection, ref: RunRef, notes: list[str], memories: _Memories) -> list[RunData]:
    path = db.conn_path(conn)
    tables = db.tables(conn)
    missing = {"runs", "operator_results"} - tables
    if missing:
        raise ReportError(
            f"the workspace database {path} (schema version {db.schema_version(conn)}) has no "
            f"{' or '.join(sorted(missing))} table: it was written by an older SAGE. Any `sage` "
            "command that writes to the workspace migrates it; reports only read.")
    store = RunStore(conn)
    all_ids = store.run_ids()
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
    out = []
    for run_id in ids:
        info = store.run(run_id)
        assert info is not None  # listed just above, and reports never delete
        planned = store.planned_by_level(run_id) if "run_stream" in tables else {}
        results = store.results(run_id)
        if not results:
            msg = (f"run {run_id} in {ref.workspace} has no finished operators yet "
                   f"(status {info.status}, {sum(planned.values())} planned)")
            if explicit:
                raise ReportError(msg + "; report it once at least one operator has finished")
            notes.append(msg + "; skipped")
            continue
        memory = memories.read(info, ref.workspace, notes)
        traced = "round_traces" in tables
        benchmark = _benchmark(store, run_id, results) if traced else []
        best = _best_verdicts(store, run_id, results) if traced else {}
        out.append(RunData(info, ref.workspace, _credited_model(conn, run_id, info.model), planned,
                           run_spend(conn, run_id), results, memory, benchmark, best))
    return out


def _credited_model(conn: sqlite3.Connection, run_id: str, model: str) -> str:
    """Who wrote the kernels. A `sage mcp` run's kernels come from the coding agents that called its
    tools (named by their MCP handshake, e.g. "opencode 1.18.33"); the run's own model (`runs.model`)
    only distilled and is left out of the label. Other runs: their model."""
    labels = tool_clients(conn, run_id)
    agents = list(dict.fromkeys(label.split(" (")[0] for label in labels))  # "(stdio)", "(http ...)" dropped
    if not agents:
        return model
    return f"{', '.join(agents)} via MCP"


def _benchmark(store: RunStore, run_id: str, results: Sequence[OperatorResult]) -> list[OperatorCases]:
    """Each finished operator's best benchmark record, from its rounds' verdicts."""
    records: dict[str, list[Any]] = {}
    for operator, verdict in store.verdicts(run_id):
        record = verdict_record(verdict)
        if record is not None:
            records.setdefault(operator, []).append(record)
    found = [best_cases(r.operator, r.level, records.get(r.operator, [])) for r in results]
    return [f for f in found if f is not None]


def _best_verdicts(store: RunStore, run_id: str,
                   results: Sequence[OperatorResult]) -> dict[str, dict[str, Any]]:
    """Per solved operator, the verdict of the first correct round whose latency is its T_best (the
    round the agent took as the best: agent/state.py records T_best from that verdict)."""
    wanted = {r.operator: r.t_best_ms for r in results if r.correct and r.t_best_ms is not None}
    out: dict[str, dict[str, Any]] = {}
    for op, latency, verdict in store.correct_verdicts(run_id):
        if op not in out and op in wanted and latency == wanted[op] and isinstance(verdict, dict):
            out[op] = verdict
    return out


def _memory(conn: Any, run_id: str, source: MemorySource) -> MemoryData:
    store = Store(conn)
    items = [ItemView(id=i.id, title=i.title, type=i.type, category=i.category, state=i.state.value,
                      u=i.u, n_ret=i.n_ret, n_ado=i.n_ado, n_operators=len(i.adopting_ops),
                      rule_tokens=i.rule_tokens)
             for i in store.all_items()]
    adoptions = [AdoptionView(operator=a.operator, episode=a.episode, round=a.round, item_id=a.item_id,
                              adopted=a.adopted) for a in store.run_adoptions(run_id)]
    snapshots = [SnapshotView(created_at=s.created_at, n_ops=s.n_ops, budget=s.budget, n_entries=s.n_entries,
                              total_tokens=s.total_tokens) for s in store.snapshot_sizes(run_id)]
    provenance = _provenance(store, run_id) if store.has_history() else None
    return MemoryData(items, adoptions, snapshots, source.label, provenance)


def _provenance(store: Store, run_id: str) -> RunProvenance:
    """What the run did to the memory (its provenance rows: migrations 0008 / postgres 0002)."""
    return RunProvenance(**store.run_changes(run_id))
