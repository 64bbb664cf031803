"""The runner bounds what runs in its own process: an evaluation that outlives its deadline (a task
reference that hangs only in float64, as the harness runs it, while `sage tasks check` says ok)
fails its operator with the reason, and the stream goes on instead of blocking forever."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from openai_server import OpenAITestServer
from sagekernel.harness.config import HarnessConfig
from sagekernel.runner.config import evaluation_deadline_s
from sagekernel.runner.interrupts import EvaluationTimeout, deadline
from sagekernel.runner.run import run
from test_e2e_run import FAST, TASKS, Script, config, prepare


def test_a_deadline_stops_a_python_loop_and_leaves_no_timer() -> None:
    started = time.monotonic()
    with pytest.raises(EvaluationTimeout, match="took longer than"), deadline(0.3, "spinning"):
        while True:
            pass
    assert time.monotonic() - started < 5
    with deadline(5, "quick"):
        pass
    time.sleep(0.1)  # no alarm left armed to fire later


def test_the_deadline_is_above_every_harness_limit() -> None:
    h = HarnessConfig()
    assert evaluation_deadline_s(h) > h.build_timeout_s + h.start_timeout_s + h.timing_timeout_s


HANGS_IN_FLOAT64 = (
    (TASKS / "e2e_double.py")
    .read_text()
    .replace(
        "        return x * 2.0",
        "        while x.dtype == torch.float64:\n            pass\n        return x * 2.0",
    )
)


@pytest.mark.slow
def test_a_reference_that_hangs_only_in_the_harness_fails_its_operator(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "e2e_double.py").write_text(HANGS_IN_FLOAT64)
    shutil.copy(TASKS / "e2e_negate.py", suite / "e2e_negate.py")
    ws = tmp_path / "ws"
    prepare(ws)
    harness = {
        **FAST,
        "build_timeout_s": 5.0,
        "start_timeout_s": 2.0,
        "timing_timeout_s": 2.0,
        "call_timeout_s": 0.5,
    }
    with OpenAITestServer(fallback=Script()) as srv:
        cfg = config(ws, srv, harness=harness).model_copy(update={"suite": str(suite)})
        summary = run(cfg)
    errors = {r["operator"]: r["error"] for r in summary.results}
    assert summary.status == "finished" and summary.done == 2
    assert "took longer than" in (errors["e2e_double"] or "") and errors["e2e_negate"] is None
