"""`sage report`'s figures beside the paper's (report/scores.py): strict and noise-aware Fast_1, the
speedup intervals, the roofline distribution, the baseline, and the protocol warning; read from the
best round's verdict in the round traces, the paper's metrics unchanged."""

from __future__ import annotations

import json
import random
import sqlite3
from pathlib import Path
from typing import Any

from sagekernel import db
from sagekernel.harness.speedup_interval import speedup_interval
from sagekernel.report.build import build, notes_for, to_csv, to_json
from sagekernel.report.html import render_html
from sagekernel.report.load import load
from sagekernel.report.tables import interval_rows, scores_rows
from test_report_workspace import NOW, Op, add_run, insert  # type: ignore[import-not-found]


def _timing(speedup: float, rounds: int, fraction: float, seed: int, **protocol: Any) -> dict[str, Any]:
    rng = random.Random(seed)
    ratios = [speedup * rng.lognormvariate(0, 0.07) for _ in range(rounds)]
    proto = {"method": "interleaved_ab_two_processes", "timer": "accounted", "warmup": 5, "rounds": rounds,
             "calls_per_round": 10, "flush": "none", "input_policy": "fresh", "threads": 1,
             "baseline": "eager", "device": "AMD EPYC", "torch": "2.13", "harness_commit": "abc123",
             **protocol}
    return {"candidate_round_ms": [1.0 / r for r in ratios], "reference_round_ms": [1.0] * rounds,
            "speedup_interval": speedup_interval([ratios]).to_dict(), "baseline": proto["baseline"],
            "roofline": {"fraction": fraction, "bound": "memory"}, "protocol": proto}


def _add_best(ws: Path, run_id: str, op: Op, timing: dict[str, Any]) -> None:
    """The round that set T_best: latency T_best, its verdict with the timing record."""
    conn = db.connect(ws)
    verdict = {"stage": "ok", "message": "", "correct": True, "candidate_ms": op.t_best, "timing": timing}
    trace = {"round": 2, "episode": "opt", "correct": True, "compiled": True, "latency_ms": op.t_best,
             "verdict": verdict}
    with db.transaction(conn):
        insert(conn, "round_traces", {"run_id": run_id, "operator": op.name, "round": 2, "episode": "opt",
                                      "compiled": 1, "correct": 1, "latency_ms": op.t_best,
                                      "trace_json": json.dumps(trace), "created_at": NOW})
    conn.close()


# speedups T_ref/T_best: a near-tie that the strict median counts, a true 1.3x, a slow kernel
NEAR_TIE = Op("relu", 1, t_first=1.2, t_best=1.0, t_ref=1.02)
FAST = Op("gelu", 1, t_first=2.0, t_best=1.0, t_ref=1.3)
SLOW = Op("softmax", 1, t_first=2.0, t_best=2.0, t_ref=1.0)


def _workspace(ws: Path, run_id: str, rounds: int = 10, **protocol: Any) -> None:
    add_run(ws, run_id, "sage", "m", [NEAR_TIE, FAST, SLOW, Op("matmul", 2, correct=False)])
    _add_best(ws, run_id, NEAR_TIE, _timing(1.02, rounds, 0.4, 1, **protocol))
    _add_best(ws, run_id, FAST, _timing(1.3, rounds, 0.8, 2, **protocol))
    _add_best(ws, run_id, SLOW, _timing(0.5, rounds, 0.1, 3, **protocol))


def test_report_shows_strict_and_noise_aware_fast_1_intervals_roofline_and_baseline(tmp_path: Path) -> None:
    _workspace(tmp_path, "r1")
    (report,) = build(load([str(tmp_path)]))
    m, s = report.metrics, report.scores
    assert s is not None
    # the paper's figures, unchanged: Fast_1.0 strict counts the near-tie
    assert (m.n_solved, m.n_fast) == (3, 2) and round(m.fast_solved or 0, 6) == 66.666667
    assert m.cr == 100.0 and m.er == 75.0
    # noise-aware: only the true 1.3x
    assert s.n_fast_aware == 1 and round(s.fast_aware_solved or 0, 6) == 33.333333
    assert s.fast_aware_all == 25.0
    assert s.roofline["count"] == 3 and s.roofline["median"] == 0.4
    assert s.baselines == ["eager"]
    header, rows = scores_rows([report])
    assert "Fast_1.0 noise-aware" in header
    assert rows[0][1].startswith("66.7") and rows[0][2].startswith("33.3")
    assert "0.40 [" in rows[0][4] and rows[0][5] == "eager"
    _, per_op = interval_rows(report)
    by_name = {r[0]: r for r in per_op}
    assert by_name["relu"][3] == "no" and by_name["gelu"][3] == "yes" and by_name["softmax"][3] == "no"
    assert "–" in by_name["gelu"][2] and by_name["gelu"][4] == "0.80"
    data = to_json([report])["runs"][0]["scores"]
    assert data["n_fast_aware"] == 1 and len(data["operators"]) == 3
    assert "Fast_1.0_noise_aware" in to_csv([report]).splitlines()[0]
    page = render_html([report])
    assert 'id="scores"' in page and "Best kernels" in page and "noise-aware" in page


def test_report_warns_when_protocols_differ(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    _workspace(a, "r1")
    _workspace(b, "r2", rounds=5, baseline="compile")
    reports = build(load([str(a), str(b)]))
    notes = notes_for(reports)
    assert any("PROTOCOLS DIFFER" in n and "rounds" in n and "baseline" in n for n in notes)
    same = tmp_path / "c"
    _workspace(same, "r3")
    assert not any("PROTOCOL" in n for n in notes_for(build(load([str(a), str(same)]))))


def test_a_run_without_protocol_records_is_named_not_compared(tmp_path: Path) -> None:
    a, old = tmp_path / "a", tmp_path / "old"
    _workspace(a, "r1")
    add_run(old, "r0", "sage", "m", [FAST])  # round traces without verdicts: an older run
    reports = build(load([str(a), str(old)]))
    notes = notes_for(reports)
    assert any("no protocol record" in n for n in notes)
    older = next(r for r in reports if r.info.run_id == "r0")
    assert older.scores is not None
    assert older.scores.n_without_interval == 1 and older.scores.n_fast_aware == 0


def test_the_best_verdict_is_the_round_that_set_t_best(tmp_path: Path) -> None:
    _workspace(tmp_path, "r1")
    conn = sqlite3.connect(tmp_path / "sage.db")
    rows = conn.execute("SELECT round, latency_ms FROM round_traces WHERE operator = 'gelu' ORDER BY round")
    assert [tuple(r) for r in rows] == [(1, 2.0), (2, 1.0)]  # the first round is T_first, not T_best
    conn.close()
    (report,) = build(load([str(tmp_path)]))
    gelu = next(o for o in report.scores.operators if o.operator == "gelu")  # type: ignore[union-attr]
    assert gelu.interval is not None and gelu.interval.low > 1.0
