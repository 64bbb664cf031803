"""Self-check of a suite: every hand-written kernel must pass, every null-kernel canary must fail.

Above both the harness and the targets (it judges through `harness.evaluate` the targets found by
name), so the harness imports no target.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from sagekernel.harness.config import HarnessConfig
from sagekernel.harness.evaluate import evaluate
from sagekernel.harness.verdict import Stage, Verdict
from sagekernel.targets import get_target
from sagekernel.targets.cpu.canaries import canary_sources
from sagekernel.tasks.task import Task


@dataclass
class CheckRow:
    task: str
    kernel: str  # "reference" or "canary:<name>"
    expect: str  # "pass" or "fail"
    stage: str
    ok: bool  # the expectation held
    message: str
    seconds: float
    speedup: float | None = None
    #: beside the speedup (issue 31): its 95% interval and the roofline fraction reached
    speedup_low: float | None = None
    speedup_high: float | None = None
    roofline_fraction: float | None = None


def jobs(tasks: list[Task], target_name: str = "cpu") -> Iterator[tuple[Task, str, str, str]]:
    """(task, kernel label, expectation, source) for every check of the suite. The null-kernel
    canaries written as C kernels run on the cpu target; every target's evaluation also runs the
    harness's own task-level canaries (canaries.py) in the parent."""
    for task in tasks:
        ref = task.reference_kernels.get(target_name)
        if ref is not None:
            yield task, "reference", "pass", ref.read_text(encoding="utf-8")
        if target_name == "cpu":
            for name, source in canary_sources(task).items():
                yield task, f"canary:{name}", "fail", source


def check_one(
    task: Task, label: str, expect: str, source: str, config: HarnessConfig, target_name: str = "cpu",
    device: str | None = None,
) -> CheckRow:
    t0 = time.perf_counter()
    cfg = config if expect == "pass" else HarnessConfig(**{**config.__dict__, "skip_timing": True})
    verdict: Verdict = evaluate(task, source, get_target(target_name), cfg, device=device)
    # a canary must be rejected as wrong, not crash or trip a static rule
    ok = verdict.ok if expect == "pass" else verdict.stage is Stage.CORRECTNESS
    interval = verdict.timing.get("speedup_interval") or {}
    roofline = verdict.timing.get("roofline") or {}
    return CheckRow(
        task.name,
        label,
        expect,
        verdict.stage.value,
        ok,
        verdict.message,
        time.perf_counter() - t0,
        verdict.speedup,
        interval.get("low"),
        interval.get("high"),
        roofline.get("fraction"),
    )


def run_selfcheck(
    tasks: list[Task],
    config: HarnessConfig,
    target_name: str = "cpu",
    device: str | None = None,
    starting: Callable[[Task, str], None] | None = None,
    done: Callable[[CheckRow], None] | None = None,
) -> list[CheckRow]:
    """Every check of the suite. The cpu target needs a hand-written kernel for every task (a
    missing one is a failing row); other targets check the tasks they have one for."""
    rows = [
        CheckRow(t.name, "reference", "pass", "missing", False, f"no hand-written {target_name} kernel", 0.0)
        for t in tasks
        if target_name == "cpu" and target_name not in t.reference_kernels
    ]
    for task, label, expect, source in jobs(tasks, target_name):
        if starting is not None:
            starting(task, label)
        row = check_one(task, label, expect, source, config, target_name, device)
        rows.append(row)
        if done is not None:
            done(row)
    return rows


def planned_checks(tasks: list[Task], target_name: str = "cpu") -> int:
    """How many rows `run_selfcheck` will evaluate (for a progress bar)."""
    return sum(1 for _ in jobs(tasks, target_name))
