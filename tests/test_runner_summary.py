"""`sage run`'s summary uses the report's metric functions and guards (one source of truth)."""

from __future__ import annotations

import math
from pathlib import Path

from sagekernel import db, metrics
from sagekernel.records import OperatorResult
from sagekernel.runner.run import summarize
from sagekernel.runner.store import RunInfo, RunStore


def _result(pos: int, *, compiled: bool, correct: bool, first: float | None = None,
            best: float | None = None, ref: float | None = None) -> OperatorResult:
    return OperatorResult(run_id="r", position=pos, operator=f"op{pos}", level=1, category="c",
                          compiled=compiled, correct=correct, rounds_used=2,
                          first_correct_round=1 if correct else None, t_first_ms=first, t_best_ms=best,
                          t_ref_ms=ref)


def test_summary_matches_the_report_metrics_including_their_guards(tmp_path: Path) -> None:
    conn = db.connect(tmp_path / "ws")
    store = RunStore(conn)
    info = RunInfo("r", "finished", "sage", "m", "cpu", "s", "given", 3, False, {}, "t", None)
    store.create_run(info, [])
    empty = summarize(store, info, tmp_path)
    assert empty.cr is None and empty.er is None and empty.fast_1 is None  # nothing finished: no rate
    results = [
        _result(0, compiled=True, correct=True, first=2.0, best=1.0, ref=4.0),
        _result(1, compiled=False, correct=True, first=1.0, best=math.nan, ref=1.0),  # a failed measurement
        _result(2, compiled=True, correct=False),
        _result(3, compiled=False, correct=False),
    ]
    for r in results:
        store.insert_result(r)
    summary = summarize(store, info, tmp_path)
    report = metrics.summarize(results)
    assert (summary.cr, summary.er, summary.fast_1, summary.s_self) == (
        report.cr, report.er, report.fast_solved, report.s_self)
    assert summary.cr == 75.0  # a correct kernel compiled, whatever its row's flag says
    assert summary.s_self == 2.0  # the NaN latency is no speed-up (the old summary gave nan)
    assert summary.compiled == report.n_compiled
