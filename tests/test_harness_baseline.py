"""`--baseline eager|compile|best` (harness/baseline.py): refused before anything runs where it
cannot work, recorded in the verdict, and (slow) timed against torch.compile in the sandbox."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from sagekernel.harness.baseline import baseline_problem
from sagekernel.harness.config import HarnessConfig, HarnessConfigError
from sagekernel.harness.evaluate import evaluate
from sagekernel.harness.verdict import Stage
from sagekernel.runner.config import RunConfig, RunConfigError
from sagekernel.targets import get_target
from sagekernel.tasks.suites import find_task

SUITE = Path(__file__).resolve().parents[1] / "src" / "sagekernel" / "tasks" / "suite" / "level1"


def test_eager_is_always_possible_and_a_device_target_cannot_compile_its_reference() -> None:
    assert baseline_problem("eager", "triton") is None
    problem = baseline_problem("compile", "triton")
    assert problem is not None and "cpu" in problem and "--baseline eager" in problem
    assert baseline_problem("nonsense", "cpu") is not None
    if shutil.which("g++") or shutil.which("c++"):
        assert baseline_problem("compile", "cpu") is None and baseline_problem("best", "cpu") is None


def test_a_bad_baseline_fails_before_the_run_starts() -> None:
    with pytest.raises(HarnessConfigError, match="baseline"):
        HarnessConfig(baseline="fastest")
    with pytest.raises(RunConfigError, match="--baseline"):
        RunConfig(target="triton", harness={"baseline": "compile"})
    assert RunConfig(target="cpu", harness={"baseline": "eager"}).harness_config().baseline == "eager"


def test_a_device_target_refuses_a_compile_baseline_in_the_verdict() -> None:
    task = find_task("abs")
    verdict = evaluate(task, "void sage_kernel(void) {}", get_target("triton"),
                       HarnessConfig(baseline="best"))
    assert verdict.stage is Stage.PARSE and "baseline 'best'" in verdict.message and not verdict.correct


@pytest.mark.slow
def test_a_compile_baseline_is_timed_and_recorded() -> None:
    task = find_task("abs")
    config = HarnessConfig(iters=12, rounds=4, warmup=2, baseline="compile", timed_held_out=False)
    verdict = evaluate(task, (SUITE / "abs.cpu.c").read_text(), get_target("cpu"), config)
    assert verdict.stage is Stage.OK and verdict.speedup, verdict.message
    assert verdict.timing["baseline"] == "compile" == verdict.timing["protocol"]["baseline"]
