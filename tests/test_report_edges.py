"""Edge cases found in review: non-finite or non-positive latencies never reach the figures."""

from __future__ import annotations

import json
import math
from pathlib import Path

from sagekernel.metrics import fast_p, self_speedup_median, speedup_distribution, summarize
from sagekernel.records import OperatorResult
from sagekernel.report.build import build, to_json
from sagekernel.report.load import load
from test_report_workspace import Op, add_run  # type: ignore[import-not-found]


def result(pos: int, t_first: float, t_best: float, t_ref: float) -> OperatorResult:
    return OperatorResult(run_id="r", position=pos, operator=f"op{pos}", level=1, category="c", compiled=True,
                          correct=True, rounds_used=3, first_correct_round=1, t_first_ms=t_first,
                          t_best_ms=t_best, t_ref_ms=t_ref)


def test_metrics_skip_infinite_and_negative_speedups() -> None:
    rows = [result(0, 2.0, 1.0, 2.0), result(1, 2.0, math.inf, 2.0), result(2, 2.0, -1.0, 2.0),
            result(3, math.inf, 1.0, math.inf)]
    dist = speedup_distribution(rows)  # the geometric mean used to raise on the 0 and −2 speedups
    assert (dist.count, dist.median, dist.geomean) == (1, 2.0, 2.0)
    assert self_speedup_median(rows) == 2.0
    assert fast_p(rows) == 25.0  # inf reference is no evidence of a fast kernel
    assert summarize(rows).n_fast == 1


def test_loaded_infinite_latency_is_missing_and_json_stays_valid(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    add_run(ws, "r1", "sage", "m", [Op("relu", 1, t_best=math.inf), Op("gelu", 1, t_ref=-1.0)])
    loaded = load([str(ws)])
    [relu, gelu] = loaded.runs[0].results
    assert relu.t_best_ms is None and relu.speedup is None and gelu.t_ref_ms is None
    text = json.dumps(to_json(build(loaded)), allow_nan=False)  # no Infinity/NaN tokens
    assert json.loads(text)["runs"][0]["metrics"]["n_solved"] == 2
