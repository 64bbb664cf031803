"""Calibration: does the task's own reference, run on the device, pass the harness's comparator?

Before any candidate is blamed on an NPU, run the task's `Model` there (torch_npu, the task's
declared dtypes) on the harness's own trials -- the same inputs, the same float64-derived
expected outputs and the same tolerances a candidate faces (harness/trials.py, harness/compare.py)
-- and name the tasks whose reference itself fails. Transcendental functions on NPU hardware can
miss tolerances tuned on a CPU; such a task is unsolvable until its tolerance changes, which its
file does with `SAGE_ASCENDC = {"atol": ..., "rtol": ...}`: the calibration then judges with them,
as the harness judges ascendc candidates (AscendCTarget.tolerances, harness/tolerances.py).

    python -m sagekernel.targets.ascendc.calibrate [TASK ...] --device npu [--json]

`--device cpu` runs the same steps on the CPU (what CI can check); `npu` needs torch_npu and a board.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass, field

import torch

from sagekernel.harness.compare import compare
from sagekernel.harness.config import HarnessConfig
from sagekernel.harness.tolerances import judged_task
from sagekernel.harness.trials import Trial, plan_trials
from sagekernel.tasks.task import Task
from sagekernel.tasks.task_child import confined


@dataclass
class TaskCalibration:
    task: str
    device: str
    trials: int = 0
    failures: list[str] = field(default_factory=list)  # one line per failing trial and output
    error: str = ""  # the reference could not run on the device

    @property
    def ok(self) -> bool:
        return not self.failures and not self.error


def device_reference(task: Task, trial: Trial, device: str) -> list[torch.Tensor]:
    """The task's Model on `device` in its declared dtypes, under the trial's parameter seed (run in
    the task child while `calibrate_task` holds it open, as the harness runs the task's code)."""
    from sagekernel.tasks.reference import device_outputs

    return device_outputs(task, trial.inputs, dict(trial.sizes), trial.param_seed,
                          trial.params if task.params else None, device)


def calibrate_task(task: Task, device: str, config: HarnessConfig | None = None) -> TaskCalibration:
    from sagekernel.targets.ascendc.target import AscendCTarget

    result = TaskCalibration(task.name, device)
    task = judged_task(AscendCTarget(), task)  # the tolerances an ascendc candidate is judged by
    config = config or HarnessConfig()
    try:
        with confined(config.sandbox):  # the task's code runs in its sandbox (tasks/task_child.py)
            for trial in plan_trials(task, config).trials:
                got = device_reference(task, trial, device)
                result.trials += 1
                pairs = zip(task.outputs, got, trial.expected, strict=True)
                for k, (spec, actual, expected) in enumerate(pairs):
                    mism = compare(actual, expected, trial.tolerance(k), task.rtol, spec.dtype)
                    if mism is not None:
                        result.failures.append(f"{trial.describe()}: output {spec.name}: {mism.detail}")
    except Exception as exc:  # the reference itself cannot run there: that is the finding
        result.error = f"{type(exc).__name__}: {exc}"
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m sagekernel.targets.ascendc.calibrate", description=__doc__)
    p.add_argument("tasks", nargs="*", help="task names (default: the built-in suite)")
    p.add_argument("--device", default="npu", help="npu (torch_npu) or cpu")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    if a.device.startswith("npu"):
        import torch_npu  # noqa: F401  (registers the npu device)
    from sagekernel.tasks.suites import find_task, load_suite

    tasks = [find_task(t) for t in a.tasks] if a.tasks else load_suite("builtin")
    results = [calibrate_task(t, a.device) for t in tasks]
    failing = [r for r in results if not r.ok]
    if a.json:
        print(json.dumps([{**asdict(r), "ok": r.ok} for r in results], indent=2))
    else:
        print(f"{len(results) - len(failing)} of {len(results)} references pass on {a.device}")
        for r in failing:
            print(
                f"  {r.task}: {r.error or r.failures[0]}"
                + (f" (+{len(r.failures) - 1})" if len(r.failures) > 1 else "")
            )
    return 0 if not failing else 1


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["TaskCalibration", "calibrate_task", "device_reference"]
