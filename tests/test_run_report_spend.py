"""`sage run`'s summary and `sage report` read one run's spend the same way (models/exchange_log.run_spend),
retries and failed attempts included, and map the same results (non-finite latencies guarded)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from typer.testing import CliRunner

from openai_server import OpenAITestServer
from sagekernel import db
from sagekernel.cli import app
from sagekernel.records import OperatorResult
from sagekernel.runner.run import run
from sagekernel.runner.store import RunInfo, RunStore
from test_e2e_run import Script, config, prepare, query


def test_run_summary_and_report_show_the_same_spend_with_retries(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    prepare(ws)
    # Two transient failures: the first model call is answered on its third attempt.
    with OpenAITestServer(fallback=Script(), fail_first=[503, 503]) as srv:
        cfg = config(ws, srv, method="refinement")
        cfg = cfg.model_copy(update={"model_options": {"max_retries": 3, "retry_base_delay_s": 0.0}})
        summary = run(cfg)
    assert summary.status == "finished"
    attempts = query(ws, "SELECT count(*) FROM exchanges")[0][0]
    calls = query(ws, "SELECT count(DISTINCT call_id) FROM exchanges")[0][0]
    retries = query(ws, "SELECT count(*) FROM exchanges WHERE status = 'retry'")[0][0]
    assert retries == 2 and attempts == calls + 2

    shown = CliRunner().invoke(app, ["report", str(ws), "--json"])
    assert shown.exit_code == 0, shown.output
    reported = json.loads(shown.output)["runs"][0]["spend"]
    reported.pop("unfinished_attempt_tokens")
    assert summary.spend.to_dict() == reported
    assert reported["calls"] == calls and reported["attempts"] == attempts
    assert reported["answered"] == calls  # every call got its reply in the end
    assert reported["tokens"] == query(
        ws, "SELECT sum(prompt_tokens) + sum(completion_tokens) FROM exchanges")[0][0]
    assert reported["cost_usd"] is None  # an unpriced endpoint: the cost is unknown, not $0


def test_one_results_mapping_guards_non_finite_latencies(tmp_path: Path) -> None:
    conn = db.connect(tmp_path / "ws")
    store = RunStore(conn)
    store.create_run(RunInfo("r", "finished", "sage", "m", "cpu", "s", "given", 3, False, {}, "t", None), [])
    for pos, best in enumerate([math.inf, 0.0, -1.0, math.nan, 2.0]):
        store.insert_result(OperatorResult("r", pos, f"op{pos}", 1, "c", True, True, 1, 1, 4.0, best, 8.0))
    assert [r.t_best_ms for r in store.results("r")] == [None, None, None, None, 2.0]
    assert [r.speedup for r in store.results("r")] == [None, None, None, None, 4.0]
