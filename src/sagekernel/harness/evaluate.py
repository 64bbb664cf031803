"""compile -> correctness -> timing for one candidate; the parent builds the verdict.

    evaluate(task, source, target, config) -> Verdict

Stages stop at the first failure (the verdict's `stage` names it): parse, lint (source rules),
compile (plus symbol/section checks of the object), load, runtime (crash, signal, limit, timeout),
correctness, broken_task (a null-kernel canary passed), timing. Every candidate process is
sandboxed (sandbox.py); seeds, inputs, references and all judgements stay in this process.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sagekernel.errors import TaskError
from sagekernel.harness import correctness, sandbox
from sagekernel.harness.config import HarnessConfig
from sagekernel.harness.timing import run_timing
from sagekernel.harness.verdict import Stage, Verdict
from sagekernel.protocols import Target
from sagekernel.targets.cpu.contract import KERNEL_SYMBOL
from sagekernel.tasks.task import Task

__all__ = ["HarnessConfig", "evaluate"]


def _lint_message(verdict: Verdict) -> str:
    first = verdict.lint[0]
    where = f" at line {first.line}" if first.line else ""
    more = f" (and {len(verdict.lint) - 1} more findings)" if len(verdict.lint) > 1 else ""
    return f"static check '{first.rule}' failed{where}: {first.reason}{more}"


def evaluate(task: Task, source: str, target: Target, config: HarnessConfig | None = None) -> Verdict:
    """Judge one candidate kernel `source` for `task` on `target`."""
    config = config or HarnessConfig()
    t_start = time.perf_counter()
    kind = sandbox.best_kind(config.sandbox)
    verdict = Verdict(stage=Stage.PARSE, message="", sandbox={"kind": kind})
    if not source.strip() or not re.search(rf"\b{KERNEL_SYMBOL}\s*\(", source):
        verdict.message = (
            f"no function named `{KERNEL_SYMBOL}` in the submitted source; implement exactly "
            f"the contract's signature"
        )
        return _finish(verdict, t_start)
    if config.static_checks:
        verdict.lint = target.lint(source, task)
        if verdict.lint:
            verdict.stage = Stage.LINT
            verdict.message = _lint_message(verdict)
            return _finish(verdict, t_start)
    workdir = Path(tempfile.mkdtemp(prefix="sage-eval-"))
    # The parent's inputs and float64 references (fresh secret seeds) do not depend on the
    # candidate: compute them on a thread while the compiler runs in its sandbox.
    planner: _Planner | None = None
    try:
        with parent_threads(config.parent_threads):
            planner = _Planner(task, config)
            return _run_stages(task, source, target, config, kind, verdict, workdir, t_start, planner)
    finally:
        if planner is not None:
            planner.thread.join()  # never leave tensor work running after the verdict (failed builds)
        shutil.rmtree(workdir, ignore_errors=True)


@contextmanager
def parent_threads(n: int) -> Iterator[None]:
    """Run the parent's tensor work (inputs, float64 references, comparisons) on `n` torch threads.

    Measured on the 2-core box with a neighbour busy: an elementwise op over 1e5 floats took
    ~13 ms on 2 threads (the OpenMP barrier waits for the loaded core) against ~0.01 ms on one,
    and the whole reference stage of a Level-1 task went from ~300 ms to ~20 ms. The setting is
    process-wide, so it is restored on exit. `n <= 0` leaves torch's setting alone.
    """
    if n <= 0:
        yield
        return
    import torch

    before = torch.get_num_threads()
    if before != n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if before != n:
            torch.set_num_threads(before)


class _Planner:
    """`correctness.plan_trials` on a background thread; `result()` joins and re-raises."""

    def __init__(self, task: Task, config: HarnessConfig) -> None:
        self.trials: list[correctness.Trial] | None = None
        self.error: BaseException | None = None
        self.seconds = 0.0
        self.thread = threading.Thread(target=self._run, args=(task, config), daemon=True)
        self.thread.start()

    def _run(self, task: Task, config: HarnessConfig) -> None:
        t0 = time.perf_counter()
        try:
            self.trials = correctness.plan_trials(task, config)
        except BaseException as exc:  # handed to the caller in result()
            self.error = exc
        self.seconds = time.perf_counter() - t0

    def result(self) -> list[correctness.Trial]:
        self.thread.join()
        if self.error is not None:
            raise self.error
        assert self.trials is not None
        return self.trials


def _run_stages(
    task: Task,
    source: str,
    target: Target,
    config: HarnessConfig,
    kind: str,
    verdict: Verdict,
    workdir: Path,
    t_start: float,
    planner: _Planner,
) -> Verdict:
    t0 = time.perf_counter()
    built = target.build(source, task, workdir, sandbox_kind=kind, timeout_s=config.build_timeout_s)
    verdict.durations_s["build"] = time.perf_counter() - t0
    verdict.build = dict(built.info)
    if not built.ok:
        if built.stage == "lint" and not config.static_checks:
            pass  # runtime-defence tests: let the object through to the sandbox
        else:
            verdict.stage = {"compile": Stage.COMPILE, "load": Stage.LOAD, "lint": Stage.LINT}[built.stage]
            verdict.lint = list(built.findings)
            verdict.message = _lint_message(verdict) if built.stage == "lint" else built.message
            return _finish(verdict, t_start)
    verdict.compiled = True
    library = workdir / "build" / "kernel.so"
    t0 = time.perf_counter()
    try:
        trials = planner.result()
    except TaskError as exc:
        verdict.stage = Stage.BROKEN_TASK
        verdict.flags.append("broken_task")
        verdict.message = f"the task's reference failed: {exc}"
        return _finish(verdict, t_start)
    verdict.durations_s["reference"] = time.perf_counter() - t0  # wait beyond the build
    verdict.durations_s["reference_compute"] = planner.seconds
    t0 = time.perf_counter()
    scratch = workdir / "run"
    scratch.mkdir()
    result, parsed, plan = correctness.run_child(task, trials, library, config, kind, scratch)
    outcome = correctness.judge(task, config, result, parsed, plan)
    verdict.durations_s["correctness"] = time.perf_counter() - t0
    verdict.sandbox = outcome.sandbox
    verdict.checks = outcome.checks
    verdict.flags.extend(outcome.flags)
    if outcome.stage is not Stage.OK:
        verdict.stage = outcome.stage
        verdict.message = outcome.message
        return _finish(verdict, t_start)
    verdict.correct = True
    if config.skip_timing:
        verdict.stage = Stage.OK
        verdict.message = outcome.message + "; timing skipped"
        return _finish(verdict, t_start)
    t0 = time.perf_counter()
    default = [t for t in trials if t.shape_label == "default"][: max(1, config.timing_pool)]
    tscratch = workdir / "timing"
    tscratch.mkdir()
    timed = run_timing(task, default, library, config, kind, tscratch)
    verdict.durations_s["timing"] = time.perf_counter() - t0
    verdict.timing = timed.timing
    verdict.flags.extend(timed.flags)
    verdict.sandbox["timing"] = timed.sandbox
    if timed.stage is not Stage.OK:
        verdict.stage = timed.stage
        verdict.correct = timed.stage is not Stage.CORRECTNESS
        verdict.message = timed.message
        return _finish(verdict, t_start)
    verdict.candidate_ms, verdict.reference_ms, verdict.speedup = (
        timed.candidate_ms,
        timed.reference_ms,
        timed.speedup,
    )
    verdict.stage = Stage.OK
    verdict.message = f"{outcome.message}; {timed.message}"
    return _finish(verdict, t_start)


def _finish(verdict: Verdict, t_start: float) -> Verdict:
    verdict.durations_s = {k: round(v, 4) for k, v in verdict.durations_s.items()}
    verdict.durations_s["total"] = round(time.perf_counter() - t_start, 4)
    return verdict
