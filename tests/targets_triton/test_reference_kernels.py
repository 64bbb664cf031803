"""Every hand-written Triton kernel of the built-in suite, judged by `harness.evaluate` on the
interpreter (the production path `sage selfcheck --target triton --device interpreter` takes):
all under `-m slow`, since each is a sandboxed build and run."""

from __future__ import annotations

from pathlib import Path

import pytest

from sagekernel.harness.config import HarnessConfig
from sagekernel.harness.evaluate import evaluate
from sagekernel.targets import get_target
from sagekernel.tasks.loader import load_dir
from sagekernel.tasks.task import Task

pytest.importorskip("triton")

SUITE = Path(__file__).resolve().parents[2] / "src" / "sagekernel" / "tasks" / "suite"
TASKS = [t for t in load_dir(SUITE).tasks if "triton" in t.reference_kernels]


def test_at_least_fifteen_triton_kernels() -> None:
    assert len(TASKS) >= 15, [t.name for t in TASKS]


@pytest.mark.slow
@pytest.mark.parametrize("task", TASKS, ids=[t.name for t in TASKS])
def test_kernel_is_judged_correct(task: Task) -> None:
    cfg = HarnessConfig(skip_timing=True)
    verdict = evaluate(
        task, task.reference_kernels["triton"].read_text(), get_target("triton"), cfg, device="interpreter"
    )
    assert verdict.ok, verdict.message
