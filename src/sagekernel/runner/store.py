"""The run records of a workspace (migration 0003): runs, their planned stream, operator results,
round traces, candidate sources and the episode-update markers.

Written only by the runner (one writer, guarded by runner/lock.py). Every reader (`sage report`,
the experiment status and tables, the run summary) reads them through this module, read-only
where it only reads (`open_readonly`), so there is one mapping of each row to its record. Round
traces and candidates are autocommitted as each round ends, so a crash loses at
most the round in flight. The result of an operator and its last memory update are committed in
one transaction by the runner (result first), so resuming never finds one without the other.
"""

from __future__ import annotations

import json
import math
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sagekernel import db
from sagekernel.errors import SageError
from sagekernel.records import OperatorResult, RoundTrace
from sagekernel.tasks.task import Task


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


@dataclass(frozen=True)
class RunInfo:
    run_id: str
    status: str
    method: str
    model: str
    target: str
    suite: str
    schedule: str
    budget: int
    frozen: bool
    config: dict[str, Any]
    created_at: str
    finished_at: str | None

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> RunInfo:
        return cls(run_id=row["run_id"], status=row["status"], method=row["method"], model=row["model"],
                   target=row["target"], suite=row["suite"], schedule=row["schedule"], budget=row["budget"],
                   frozen=bool(row["frozen"]), config=json.loads(row["config_json"] or "{}"),
                   created_at=row["created_at"], finished_at=row["finished_at"])


@dataclass(frozen=True)
class PlannedOperator:
    position: int
    operator: str
    level: int
    category: str


def open_readonly(workspace: Path) -> RunStore | None:
    """The workspace's run tables, read-only; None while its database does not exist or has no run
    tables yet (a worker is creating it). The caller closes the store."""
    if not db.db_path(workspace).is_file():
        return None
    try:
        conn = db.connect(workspace, create=False, readonly=True)
    except (SageError, sqlite3.Error):
        return None
    if "round_traces" not in db.tables(conn):
        conn.close()
        return None
    return RunStore(conn)


def finite_latency(value: object) -> float | None:
    """A stored latency, or None when it is not a finite positive number (SQLite keeps ±inf; a
    0 or inf T_best would otherwise give an infinite speedup, or crash the geometric mean)."""
    if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        return None
    return float(value)


class RunStore:
    """Reads and writes the run tables over the workspace connection."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- runs -----------------------------------------------------------------------------------
    def create_run(self, info: RunInfo, stream: list[Task]) -> None:
        with db.transaction(self.conn):
            self.conn.execute(
                "INSERT INTO runs (run_id, created_at, finished_at, status, method, model, target, suite, "
                "schedule, budget, frozen, config_json) VALUES (?, ?, NULL, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (info.run_id, info.created_at, info.status, info.method, info.model, info.target, info.suite,
                 info.schedule, info.budget, int(info.frozen), json.dumps(info.config, sort_keys=True)))
            self.conn.executemany(
                "INSERT INTO run_stream (run_id, position, operator, level, category) VALUES (?, ?, ?, ?, ?)",
                [(info.run_id, i, t.name, t.level, t.category) for i, t in enumerate(stream)])

    def run(self, run_id: str) -> RunInfo | None:
        row = self.conn.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        return RunInfo.from_row(row) if row else None

    def runs(self) -> list[RunInfo]:
        return [RunInfo.from_row(r) for r in
                self.conn.execute("SELECT * FROM runs ORDER BY created_at DESC, rowid DESC")]

    def run_ids(self) -> list[str]:
        """Every run, oldest first."""
        return [r[0] for r in self.conn.execute("SELECT run_id FROM runs ORDER BY created_at, run_id")]

    def unfinished_run_ids(self) -> set[str]:
        return {str(r[0]) for r in self.conn.execute("SELECT run_id FROM runs WHERE status != 'finished'")}

    def latest_unfinished(self, config_key: dict[str, Any] | None = None) -> RunInfo | None:
        """The newest run that did not finish, optionally only one whose config matches `config_key`."""
        for info in self.runs():
            if info.status == "finished":
                continue
            if config_key is None or info.config.get("key") == config_key:
                return info
        return None

    def set_status(self, run_id: str, status: str) -> None:
        finished = now_iso() if status == "finished" else None
        self.conn.execute("UPDATE runs SET status = ?, finished_at = ? WHERE run_id = ?",
                          (status, finished, run_id))

    def stream(self, run_id: str) -> list[PlannedOperator]:
        return [PlannedOperator(r["position"], r["operator"], r["level"], r["category"]) for r in
                self.conn.execute("SELECT * FROM run_stream WHERE run_id = ? ORDER BY position", (run_id,))]

    def planned_by_level(self, run_id: str) -> dict[int, int]:
        """How many operators of each level the run's stream plans."""
        return {int(lv): int(n) for lv, n in self.conn.execute(
            "SELECT level, count(*) FROM run_stream WHERE run_id = ? GROUP BY level", (run_id,))}

    # ---- operators --------------------------------------------------------------------------------
    def done_positions(self, run_id: str) -> set[int]:
        return {r[0] for r in self.conn.execute(
            "SELECT position FROM operator_results WHERE run_id = ?", (run_id,))}

    def restart_operator(self, run_id: str, operator: str) -> int:
        """Forget the round traces of a partially processed operator (it restarts from scratch)."""
        cur = self.conn.execute("DELETE FROM round_traces WHERE run_id = ? AND operator = ?",
                                (run_id, operator))
        return cur.rowcount

    def save_round(self, run_id: str, operator: str, trace: RoundTrace, source: str | None) -> None:
        with db.transaction(self.conn):
            if source is not None and trace.candidate_hash:
                self.conn.execute("INSERT OR IGNORE INTO candidates (hash, source) VALUES (?, ?)",
                                  (trace.candidate_hash, source))
            self.conn.execute(
                "INSERT OR REPLACE INTO round_traces (run_id, operator, round, episode, compiled, correct, "
                "latency_ms, trace_json, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (run_id, operator, trace.round, trace.episode.value, int(trace.compiled), int(trace.correct),
                 trace.latency_ms, json.dumps(trace.to_dict(), sort_keys=True), now_iso()))

    def insert_result(self, result: OperatorResult) -> None:
        """Caller holds the transaction that also applies the last episode's memory update."""
        self.conn.execute(
            "INSERT INTO operator_results (run_id, position, operator, level, category, compiled, correct, "
            "rounds_used, first_correct_round, t_first_ms, t_best_ms, t_ref_ms, prompt_tokens, "
            "completion_tokens, cost_usd, wall_s, error, recorded_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (result.run_id, result.position, result.operator, result.level, result.category,
             int(result.compiled), int(result.correct), result.rounds_used, result.first_correct_round,
             result.t_first_ms, result.t_best_ms, result.t_ref_ms, result.prompt_tokens,
             result.completion_tokens, result.cost_usd, result.wall_s, result.error, now_iso()))

    def results(self, run_id: str) -> list[OperatorResult]:
        """The run's finished operators in stream order. A latency that is not a finite positive
        number reads as None (finite_latency), for every reader alike."""
        rows = self.conn.execute("SELECT * FROM operator_results WHERE run_id = ? ORDER BY position",
                                 (run_id,))
        return [OperatorResult(
            run_id=r["run_id"], position=int(r["position"]), operator=r["operator"], level=int(r["level"]),
            category=r["category"], compiled=bool(r["compiled"]), correct=bool(r["correct"]),
            rounds_used=int(r["rounds_used"]), first_correct_round=r["first_correct_round"],
            t_first_ms=finite_latency(r["t_first_ms"]), t_best_ms=finite_latency(r["t_best_ms"]),
            t_ref_ms=finite_latency(r["t_ref_ms"]), prompt_tokens=int(r["prompt_tokens"] or 0),
            completion_tokens=int(r["completion_tokens"] or 0), cost_usd=r["cost_usd"],
            wall_s=float(r["wall_s"] or 0.0),
            error=r["error"] if "error" in r.keys() else None)  # noqa: SIM118 (a Row's `in` tests values)
            for r in rows]

    def round_traces(self, run_id: str, operator: str | None = None) -> list[RoundTrace]:
        sql = "SELECT trace_json FROM round_traces WHERE run_id = ?"
        args: list[Any] = [run_id]
        if operator is not None:
            sql += " AND operator = ?"
            args.append(operator)
        rows = self.conn.execute(sql + " ORDER BY created_at, operator, round", args)
        return [RoundTrace.from_dict(json.loads(r[0])) for r in rows]

    def traces_by_operator(self, run_id: str) -> dict[str, list[RoundTrace]]:
        """The run's round traces per operator, operators in the order they were first recorded."""
        out: dict[str, list[RoundTrace]] = {}
        for operator, text in self.conn.execute(
                "SELECT operator, trace_json FROM round_traces WHERE run_id = ? ORDER BY rowid", (run_id,)):
            out.setdefault(str(operator), []).append(RoundTrace.from_dict(json.loads(text)))
        return out

    def recorded_rounds(self, run_id: str | None = None) -> list[tuple[str, str, str, RoundTrace]]:
        """(run_id, operator, episode, trace) of every recorded round of `run_id` (None: of every
        run), in the order they were recorded."""
        sql = "SELECT run_id, operator, episode, trace_json FROM round_traces"
        rows = (self.conn.execute(sql + " WHERE run_id = ? ORDER BY rowid", (run_id,)) if run_id
                else self.conn.execute(sql + " ORDER BY rowid"))
        return [(str(r[0]), str(r[1]), str(r[2]), RoundTrace.from_dict(json.loads(r[3]))) for r in rows]

    def recorded_latencies(self, run_id: str | None = None) -> dict[tuple[str, str], tuple[Any, Any]]:
        """(run_id, operator) -> (T_first, T_best) as the runner recorded them, raw (a reader
        decides what a non-finite value means)."""
        sql = "SELECT run_id, operator, t_first_ms, t_best_ms FROM operator_results"
        rows = self.conn.execute(sql + " WHERE run_id = ?", (run_id,)) if run_id else self.conn.execute(sql)
        return {(str(r[0]), str(r[1])): (r[2], r[3]) for r in rows}

    def candidate(self, digest: str) -> str | None:
        row = self.conn.execute("SELECT source FROM candidates WHERE hash = ?", (digest,)).fetchone()
        return None if row is None else str(row[0])

    def verdicts(self, run_id: str) -> list[tuple[str, Any]]:
        """(operator, the stored verdict as JSON data) of each recorded round; rounds whose trace
        does not parse are left out (a reader of old or damaged rows must not fail on them)."""
        out = []
        for operator, text in self.conn.execute(
                "SELECT operator, trace_json FROM round_traces WHERE run_id = ?", (run_id,)):
            try:
                verdict = json.loads(text).get("verdict")
            except (ValueError, AttributeError):
                continue
            out.append((str(operator), verdict))
        return out

    def correct_verdicts(self, run_id: str) -> list[tuple[str, Any, Any]]:
        """(operator, latency_ms, the stored verdict as JSON data) of each correct round, by
        operator and round; rounds whose trace does not parse are left out."""
        out = []
        for operator, latency, text in self.conn.execute(
                "SELECT operator, latency_ms, trace_json FROM round_traces WHERE run_id = ? AND correct = 1 "
                "ORDER BY operator, round", (run_id,)):
            try:
                verdict = json.loads(text).get("verdict")
            except (ValueError, AttributeError):
                continue
            out.append((str(operator), latency, verdict))
        return out

    def last_round(self, run_id: str) -> tuple[str, int, str] | None:
        """(operator, round, episode) of the newest recorded round."""
        row = self.conn.execute("SELECT operator, round, episode FROM round_traces WHERE run_id = ? "
                                "ORDER BY rowid DESC LIMIT 1", (run_id,)).fetchone()
        return None if row is None else (str(row[0]), int(row[1]), str(row[2]))

    # ---- episode markers --------------------------------------------------------------------------
    def episode_applied(self, run_id: str, operator: str, episode: str) -> bool:
        return self.conn.execute(
            "SELECT 1 FROM episode_updates WHERE run_id = ? AND operator = ? AND episode = ?",
            (run_id, operator, episode)).fetchone() is not None

    def mark_episode(self, run_id: str, operator: str, episode: str) -> None:
        """Caller holds the transaction of the memory update this marks."""
        self.conn.execute("INSERT INTO episode_updates (run_id, operator, episode, applied_at) "
                          "VALUES (?, ?, ?, ?)", (run_id, operator, episode, now_iso()))

    # ---- adoption ratings (migration 0004) ----------------------------------------------------------
    def save_ratings(self, rows: list[tuple[Any, ...]]) -> None:
        """(run_id, operator, round, item_id, rating, rater, auto_match, rated_at) rows, in one
        transaction; a rater's new rating of a record replaces the old one."""
        with db.transaction(self.conn):
            self.conn.executemany(
                "INSERT OR REPLACE INTO adoption_ratings (run_id, operator, round, item_id, rating, rater, "
                "auto_match, rated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)

    def ratings(self, run_id: str, rater: str | None = None) -> list[tuple[str, int, int, str]]:
        """(operator, round, item_id, rating) of the run's ratings, oldest first."""
        sql = "SELECT operator, round, item_id, rating FROM adoption_ratings WHERE run_id = ?"
        args: list[object] = [run_id]
        if rater is not None:
            sql += " AND rater = ?"
            args.append(rater)
        rows = self.conn.execute(sql + " ORDER BY rated_at", args)
        return [(str(r[0]), int(r[1]), int(r[2]), str(r[3])) for r in rows]
