"""Null-kernel canaries: zeros, a constant, a copy of an input, run through the same comparison.

A canary that passes every trial means the task cannot tell right from wrong (its tolerance or its
inputs are broken), so the verdict is `broken_task`, not a pass. The conclusion is a property of the
task and the harness settings, so it is computed once per task file and settings in a process.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from sagekernel.harness.compare import compare
from sagekernel.harness.config import HarnessConfig
from sagekernel.harness.trials import Trial
from sagekernel.tasks.task import Task

CANARIES = ("zeros", "constant", "input_copy")


def _constant_for(exp: torch.Tensor) -> float:
    wide = exp.double()
    finite = wide[torch.isfinite(wide)]
    return float(finite.mean()) if finite.numel() else 0.0


def canary_outputs(name: str, task: Task, trial: Trial, anchor: Trial | None = None) -> list[torch.Tensor]:
    """The outputs of null kernel `name` on `trial`. The "constant" kernel writes the mean of
    `anchor`'s reference (one fixed value for every trial, as a real constant kernel would)."""
    outs = []
    for k, exp in enumerate(trial.expected):
        if name == "zeros":
            outs.append(torch.zeros_like(exp))
        elif name == "constant":
            value = _constant_for((anchor or trial).expected[k])
            outs.append(torch.full_like(exp, value if exp.is_floating_point() else round(value)))
        else:
            src = next(
                (t for t in trial.inputs if t.numel() == exp.numel()),
                trial.inputs[0] if trial.inputs else None,
            )
            if src is None or src.numel() == 0:
                outs.append(torch.zeros_like(exp))
                continue
            flat = src.reshape(-1).to(exp.dtype)
            reps = exp.numel() // flat.numel() + 1
            outs.append(flat.repeat(reps)[: exp.numel()].reshape(exp.shape))
    return outs


#: Canary conclusions per (task file, its mtime, tolerances, trial plan): a property of the task and
#: the harness settings, not of a candidate, so it is computed on the first candidate of a task in
#: this process and reused (selfcheck also runs the C canaries through the full harness).
_CANARY_CACHE: dict[tuple[Any, ...], list[str]] = {}


def task_canaries(task: Task, config: HarnessConfig, trials: list[Trial]) -> tuple[list[str], bool]:
    """(null kernels that pass every trial, whether the answer came from the cache)."""
    try:
        mtime = Path(task.source_path).stat().st_mtime_ns
    except OSError:
        mtime = None
    key = (
        str(Path(task.source_path).resolve()),
        mtime,
        task.atol,
        task.rtol,
        config.trials,
        config.variant_trials,
        config.held_out_shape,
        config.coverage_trials,
    )
    cached = _CANARY_CACHE.get(key)
    if cached is not None:
        return list(cached), True
    passing = passing_canaries(task, trials)
    _CANARY_CACHE[key] = list(passing)
    return passing, False


def passing_canaries(task: Task, trials: list[Trial]) -> list[str]:
    passing = []
    for name in CANARIES:
        ok = True
        for trial in trials:
            got_all = canary_outputs(name, task, trial, anchor=trials[0])
            for k, (spec, got, exp) in enumerate(zip(task.outputs, got_all, trial.expected, strict=True)):
                if compare(got, exp, trial.tolerance(k), task.rtol, spec.dtype) is not None:
                    ok = False
                    break
            if not ok:
                break
        if ok:
            passing.append(name)
    return passing


__all__ = ["CANARIES", "canary_outputs", "passing_canaries", "task_canaries"]
