"""Fixed-bank replay of a workspace (`sage memory replay`, the experiments' replay streams).

Reads the saved round traces (`round_traces.trace_json` = RoundTrace.to_dict()) through the run
store, rebuilds each episode in stream order, and hands them to the pure replay
(memory/replay.py). The store is never mutated; `write_to` copies the bank into a new workspace
with the chosen utilities.
"""

from __future__ import annotations

import json
import sqlite3
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

from sagekernel import db, defaults
from sagekernel.memory.atu import valid_latency
from sagekernel.memory.io import export_jsonl, import_jsonl
from sagekernel.memory.replay import VARIANTS, replay
from sagekernel.memory.store import MemoryStoreError, Store
from sagekernel.records import EpisodeKind, EpisodeTrace, RoundTrace
from sagekernel.runner.store import RunStore


def load_episodes(conn: sqlite3.Connection, run_id: str | None = None) -> list[EpisodeTrace]:
    """Episodes in stream order (first appearance of each operator's rounds)."""
    if "round_traces" not in db.tables(conn):
        raise MemoryStoreError("this workspace has no round traces (table round_traces); "
                               "run `sage run` first")
    runs = RunStore(conn)
    rows = runs.recorded_rounds(run_id)
    if run_id and not rows:
        raise MemoryStoreError(f"no round traces for run {run_id!r}")
    grouped: dict[tuple[str, str, str], list[RoundTrace]] = defaultdict(list)
    recorded = runs.recorded_latencies(run_id)
    unfinished = runs.unfinished_run_ids()
    for run, op, ep, recorded_round in rows:
        # The operator in flight when an unfinished run stopped was never learned from (learning
        # waits for its result, runner/run.py) and a resume replaces its traces: skip it too.
        if run in unfinished and (run, op) not in recorded:
            continue
        grouped[(run, op, ep)].append(recorded_round)
    t_first: dict[tuple[str, str], float | None] = {}
    episodes: list[EpisodeTrace] = []
    for (run, op, ep), rounds in grouped.items():  # dicts keep first-insertion (stream) order
        rounds.sort(key=lambda r: r.round)
        kind = EpisodeKind(ep)
        first = next((r.latency_ms for r in rounds if r.counts_as_success), None)
        first = first if valid_latency(first) else None
        if kind is EpisodeKind.CORR:
            t_first[(run, op)] = first
        trace = EpisodeTrace(operator=op, category="", level=0, episode=kind, rounds=rounds,
                             success=any(r.counts_as_success for r in rounds))
        if kind is EpisodeKind.OPT:
            # The live update scored the agent's T_first/T_best (5 % noise margin, re-measured
            # kernels ignored), recorded in operator_results; raw round minima only without it.
            rec_first, rec_best = recorded.get((run, op), (None, None))
            trace.t_first_ms = rec_first if valid_latency(rec_first) else t_first.get((run, op))
            lat = [r.latency_ms for r in rounds
                   if r.counts_as_success and r.latency_ms is not None and valid_latency(r.latency_ms)]
            trace.t_best_ms = rec_best if valid_latency(rec_best) else min(lat, default=None)
        else:
            trace.t_first_ms = trace.t_best_ms = first
        episodes.append(trace)
    return episodes


def replay_workspace(workspace: Path | str, run_id: str | None = None, *, gamma: float = defaults.GAMMA,
                     write_to: Path | str | None = None, variant: str = "atu") -> dict[str, Any]:
    """Replay a workspace's traces against its bank; optionally write a copy with `variant`'s u."""
    if variant not in VARIANTS:
        raise MemoryStoreError(f"unknown replay variant {variant!r}; choose one of {', '.join(VARIANTS)}")
    conn = db.connect(workspace, create=False, readonly=True)
    try:
        store = Store(conn)
        items = {m.id: m for m in store.all_items()}
        result = replay(items, load_episodes(conn, run_id), gamma=gamma)
    finally:
        conn.close()
    out: dict[str, Any] = {
        "run": run_id or "all", "episodes": result.episodes, "rounds": result.rounds, "gamma": gamma,
        "reordered_rounds": {k: result.reordered[k] for k in ("uniform", "atu")},
        "items": [{"id": i, "title": m.title, "state": m.state.value, "stored_u": m.u,
                   **{v: result.utilities[v][i] for v in VARIANTS}} for i, m in sorted(items.items())],
        "top": {v: [i for i, _ in sorted(result.utilities[v].items(), key=lambda kv: (-kv[1], kv[0]))[:10]]
                for v in ("uniform", "atu")},
    }
    if write_to is not None:
        _write_copy(workspace, Path(write_to), result.utilities[variant])
        out["written_to"] = str(write_to)
        out["written_variant"] = variant
    return out


def _write_copy(workspace: Path | str, target: Path, u: dict[int, float]) -> None:
    """Export the bank, put the replayed u into the dump, and import it in ONE transaction, so the
    copy never holds the bank with its original utilities (a crash leaves it empty)."""
    src = db.connect(workspace, create=False, readonly=True)
    dst = db.connect(target)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            dump = Path(tmp) / "bank.jsonl"
            export_jsonl(src, dump)
            lines = dump.read_text(encoding="utf-8").splitlines()
            out = [lines[0]]
            for line in lines[1:]:
                data = json.loads(line)
                data["u"] = u.get(data["id"], 0.0)
                out.append(json.dumps(data, ensure_ascii=False))
            dump.write_text("\n".join(out) + "\n", encoding="utf-8")
            import_jsonl(dst, dump, mode="refuse")
    finally:
        src.close()
        dst.close()
