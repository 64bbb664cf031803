"""The tolerances a verdict judges a task by: the task's own, or those its target declares for it.

A target may declare per-task tolerances (`target.tolerances(task) -> (atol, rtol) | None`): the
ascendc target reads them from the task file's `SAGE_ASCENDC` block, for tasks whose NPU results
cannot meet tolerances tuned on a CPU (targets/ascendc/settings.py). Every comparison of a verdict
-- correctness, the timing rechecks, the null-kernel canaries, the diagnostic probe -- reads the
task's `atol` / `rtol` (and the trials derive their element-wise slack from `atol`), so the harness
judges a copy of the task that carries the target's tolerances: one substitution, every comparison.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from sagekernel.tasks.task import Task


def judged_task(target: Any, task: Task) -> Task:
    """`task` as `target`'s verdicts judge it (the same object when the target declares nothing)."""
    declare = getattr(target, "tolerances", None)
    declared = declare(task) if declare is not None else None
    if declared is None or tuple(declared) == (task.atol, task.rtol):
        return task
    atol, rtol = (float(v) for v in declared)
    return replace(task, atol=atol, rtol=rtol)


def tolerance_record(task: Task, judged: Task, target: Any) -> dict[str, Any] | None:
    """What the verdict records when the target's tolerances replaced the task's; None otherwise."""
    if judged is task:
        return None
    return {
        "atol": judged.atol,
        "rtol": judged.rtol,
        "task_atol": task.atol,
        "task_rtol": task.rtol,
        "declared_by": getattr(target, "name", type(target).__name__),
    }


__all__ = ["judged_task", "tolerance_record"]
