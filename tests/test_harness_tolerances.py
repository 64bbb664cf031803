"""A target's per-task tolerances reach every comparison of the verdict (harness/tolerances.py):
the real harness, the real CPU target, and a target that declares tolerances for the task, as the
ascendc target does for tasks whose NPU results cannot meet CPU-tuned tolerances."""

from __future__ import annotations

from pathlib import Path

from sagekernel.harness.config import HarnessConfig
from sagekernel.harness.evaluate import evaluate
from sagekernel.harness.verdict import Stage
from sagekernel.targets.cpu.target import CpuTarget
from sagekernel.tasks.loader import load_task
from sagekernel.tasks.task import Task

TASK = Path(__file__).resolve().parent / "fixtures" / "tasks" / "relu_rows.py"  # atol = rtol = 1e-6
#: ReLU 0.1% high: what a device whose arithmetic differs from the CPU's might return.
OFF = (
    "#include <stdint.h>\n"
    "void sage_kernel(const float* restrict x, float* restrict out, int64_t B, int64_t D) {\n"
    "  for (int64_t i = 0; i < B * D; ++i) out[i] = x[i] > 0 ? x[i] * 1.001f : 0;\n}\n"
)
FAST = HarnessConfig(skip_timing=True, coverage_trials=False)


class LooseCpu(CpuTarget):
    """The CPU target with per-task tolerances declared for the task (the ascendc seam)."""

    def tolerances(self, task: Task) -> tuple[float, float] | None:
        return (1e-2, 1e-2) if task.name == "relu_rows" else None


def test_declared_tolerances_judge_the_candidate_and_are_recorded() -> None:
    task = load_task(TASK)
    strict = evaluate(task, OFF, CpuTarget(), FAST)
    assert strict.stage is Stage.CORRECTNESS and "tolerance" in strict.message, strict.message
    assert "tolerances" not in strict.checks
    loose = evaluate(task, OFF, LooseCpu(), FAST)
    assert loose.stage is Stage.OK and loose.correct, loose.message
    assert loose.checks["tolerances"] == {
        "atol": 1e-2, "rtol": 1e-2, "task_atol": 1e-6, "task_rtol": 1e-6, "declared_by": "cpu"
    }
