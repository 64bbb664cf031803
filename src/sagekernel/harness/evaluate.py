"""parse -> lint -> build -> correctness -> timing -> quarantine, for one candidate on any target.

    evaluate(task, candidate, target, config, device=None) -> Verdict

The target supplies the static rules, the build and the runtime (docs/target_seam.md); every
judgement is made here: seeds, inputs and float64 references (computed on a thread while the
compiler runs), the comparison, the timing protocol, and quarantine of implausible or
integrity-flagged timings (re-measured in fresh processes; a verdict that stays flagged is
`suspect` and never counts as a success). Each verdict records the level of evidence it reached.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sagekernel import sandbox, watchdog
from sagekernel.candidate import Candidate
from sagekernel.devices import selection_env
from sagekernel.errors import SageError, TaskError
from sagekernel.harness.baseline import baseline_problem
from sagekernel.harness.config import HarnessConfig
from sagekernel.harness.correctness import run_correctness
from sagekernel.harness.scores import annotate, combine_groups
from sagekernel.harness.timed import time_held_out, timing_attempts, timing_verdict
from sagekernel.harness.tolerances import judged_task, tolerance_record
from sagekernel.harness.trials import TrialPlan, plan_trials
from sagekernel.harness.verdict import Stage, Verdict
from sagekernel.protocols import Target
from sagekernel.seam import Evidence
from sagekernel.tasks.npukb_rule import score_record
from sagekernel.tasks.sizegen import LARGE
from sagekernel.tasks.task import Task
from sagekernel.tasks.task_child import confined

__all__ = ["HarnessConfig", "as_candidate", "evaluate"]


def as_candidate(target: Target, task: Task, source: Candidate | str) -> Candidate:
    """A plain source string is the single file of a single-file target."""
    if isinstance(source, Candidate):
        return source
    return Candidate.single(target.files(task)[0].path, source)


def _lint_message(verdict: Verdict) -> str:
    first = verdict.lint[0]
    where = f" at line {first.line}" if first.line else ""
    more = f" (and {len(verdict.lint) - 1} more findings)" if len(verdict.lint) > 1 else ""
    return f"static check '{first.rule}' failed{where}: {first.reason}{more}"


def evaluate(
    task: Task,
    source: Candidate | str,
    target: Target,
    config: HarnessConfig | None = None,
    device: str | None = None,
) -> Verdict:
    """Judge one candidate for `task` on `target` (its first device unless `device` is given).
    A task with input groups (NPUKernelBench's `get_input_groups()`) is judged group by group."""
    config = config or HarnessConfig()
    with ExitStack() as scope:
        try:  # the task's own code (inputs, references, its precision rule) runs in its sandbox
            scope.enter_context(confined(config.sandbox))
        except TaskError as exc:  # the sandbox layer asked for does not work here (the loader's refusal)
            return _finish(Verdict(stage=Stage.PARSE, message=str(exc), sandbox={"kind": config.sandbox}),
                           time.perf_counter())
        return _evaluate(task, source, target, config, device, None)


@dataclass
class Builds:
    """The builds of one candidate by interface (`interface_key`), under `root` (kept until every
    input group is judged): the groups of a task share them."""

    root: Path
    by_key: dict[tuple[object, ...], Any] = field(default_factory=dict)


def interface_key(task: Task) -> tuple[object, ...]:
    """What a kernel's build depends on: names, element types and ranks of its tensors, its size
    symbols and its attributes' names and kinds (never the sizes' values). Input groups that agree
    on it are built once."""
    tensors = tuple((s.name, s.dtype, len(s.dims)) for s in (*task.inputs, *task.params, *task.outputs))
    attrs = tuple((k, isinstance(v, float)) for k, v in task.attrs.items())
    return (tensors, tuple(task.sizes), attrs)


def _evaluate(
    task: Task,
    source: Candidate | str,
    target: Target,
    config: HarnessConfig,
    device: str | None,
    builds: Builds | None,
) -> Verdict:
    """`builds`: the candidate's builds so far (input groups): lint and build happen once."""
    if (len(task.groups) > 1 or task.benchmark is not None) and task.group_index is None:
        return _evaluate_groups(task, source, target, config, device)
    t_start = time.perf_counter()
    declared = task
    task = judged_task(target, task)  # the target's per-task tolerances, where it declares them
    candidate = as_candidate(target, task, source)
    device_info = next((d for d in target.devices() if device in (None, d.name)), None)
    kind = sandbox.best_kind(config.sandbox)
    verdict = Verdict(stage=Stage.PARSE, message="", sandbox={"kind": kind}, evidence=Evidence.STATIC.value)
    if device_info is None:
        verdict.message = f"target {target.name!r} has no device {device!r}"
        return _finish(verdict, t_start)
    problem = baseline_problem(config.baseline, target.name)
    if problem:
        verdict.message = f"baseline {config.baseline!r}: {problem}"
        return _finish(verdict, t_start)
    ok, why = target.available(device_info.name)
    if not ok:
        verdict.message = f"target {target.name!r} cannot run on {device_info.name!r} here: {why}"
        return _finish(verdict, t_start)
    wanted = [f.path for f in target.files(task)]
    required = getattr(target, "missing_files", None)  # a target whose projects' file sets vary
    missing = required(task, candidate) if required is not None else [
        p for p in wanted if not candidate.files.get(p, "").strip()]
    if candidate.is_empty() or (len(wanted) > 1 and missing):
        verdict.message = (
            "the reply had no usable source"
            if candidate.is_empty()
            else f"the reply is missing the file(s) {', '.join(missing)}"
        )
        return _finish(verdict, t_start)
    if config.static_checks and builds is None:  # the input groups' candidate is linted once
        verdict.lint = target.lint(candidate, task)
        if verdict.lint:
            verdict.stage = Stage.LINT
            verdict.message = _lint_message(verdict)
            return _finish(verdict, t_start)
    workdir = Path(tempfile.mkdtemp(prefix="sage-eval-"))
    planner: _Planner | None = None
    try:
        with parent_threads(config.parent_threads):
            planner = _Planner(task, config)
            judged = _run(
                task,
                candidate,
                target,
                device_info.name,
                device_info.timed,
                config,
                kind,
                verdict,
                workdir,
                t_start,
                planner,
                builds,
            )
            if (record := tolerance_record(declared, task, target)) is not None:
                judged.checks["tolerances"] = record
            return judged
    finally:
        if planner is not None:
            planner.thread.join()  # never leave tensor work running after the verdict
        shutil.rmtree(workdir, ignore_errors=True)


@contextmanager
def parent_threads(n: int) -> Iterator[None]:
    """Run the parent's tensor work on `n` torch threads (restored on exit; `n <= 0`: unchanged).

    Measured on the 2-core box with a neighbour busy: an elementwise op over 1e5 floats took ~13 ms
    on 2 threads (the OpenMP barrier waits for the loaded core) against ~0.01 ms on one."""
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
    """`plan_trials` on a background thread; `result()` joins and re-raises."""

    def __init__(self, task: Task, config: HarnessConfig) -> None:
        self.trials: TrialPlan | None = None
        self.error: BaseException | None = None
        self.seconds = 0.0
        # the task's code runs here: the caller's deadline (runner/interrupts.py) must stop it too
        self.thread = threading.Thread(target=self._run, args=(task, config, watchdog.inherited()),
                                       daemon=True)
        self.thread.start()

    def _run(self, task: Task, config: HarnessConfig, dog: watchdog.Watchdog | None) -> None:
        t0 = time.perf_counter()
        try:
            with watchdog.covering(dog):
                self.trials = plan_trials(task, config)
        except BaseException as exc:  # handed to the caller in result()
            self.error = exc
        self.seconds = time.perf_counter() - t0

    def result(self) -> TrialPlan:
        self.thread.join()
        if self.error is not None:
            raise self.error
        assert self.trials is not None
        return self.trials


def _run(
    task: Task,
    candidate: Candidate,
    target: Target,
    device: str,
    timed: bool,
    config: HarnessConfig,
    kind: str,
    verdict: Verdict,
    workdir: Path,
    t_start: float,
    planner: _Planner,
    builds: Builds | None,
) -> Verdict:
    t0 = time.perf_counter()
    key = interface_key(task)
    built = builds.by_key.get(key) if builds is not None else None
    if built is None:
        where = workdir if builds is None else builds.root / f"build{len(builds.by_key)}"
        where.mkdir(parents=True, exist_ok=True)
        built = target.build(
            candidate, task, where, device=device, sandbox_kind=kind, timeout_s=config.build_timeout_s
        )
        if builds is not None:
            builds.by_key[key] = built
    verdict.durations_s["build"] = time.perf_counter() - t0
    verdict.build = dict(built.info)
    if not built.ok and not (built.stage == "lint" and not config.static_checks):
        verdict.stage = {"compile": Stage.COMPILE, "load": Stage.LOAD, "lint": Stage.LINT}.get(
            built.stage, Stage.COMPILE
        )
        verdict.lint = list(built.findings)
        verdict.message = _lint_message(verdict) if built.stage == "lint" and verdict.lint else built.message
        return _finish(verdict, t_start)
    verdict.compiled = True
    t0 = time.perf_counter()
    try:
        plan = planner.result()
        spec = target.runtime(built, task, device)
    except TaskError as exc:
        verdict.stage = Stage.BROKEN_TASK
        verdict.flags.append("broken_task")
        verdict.message = f"the task's reference failed: {exc}"
        return _finish(verdict, t_start)
    except (RuntimeError, ValueError, TypeError, IndexError, ArithmeticError) as exc:
        # task code (its reference, its inputs) failing in a way the loader did not foresee
        verdict.stage = Stage.BROKEN_TASK
        verdict.flags.append("broken_task")
        verdict.message = (
            f"the task's reference failed while the harness prepared trials: {type(exc).__name__}: {exc}"
        )
        return _finish(verdict, t_start)
    except SageError as exc:  # the target's runtime could not be prepared (not the candidate's fault)
        verdict.stage = Stage.RUNTIME
        verdict.message = str(exc)
        return _finish(verdict, t_start)
    verdict.durations_s["reference"] = time.perf_counter() - t0
    verdict.durations_s["reference_compute"] = planner.seconds
    t0 = time.perf_counter()
    outcome = run_correctness(task, plan.trials, spec, config, kind, workdir / "run", plan.notes)
    verdict.durations_s["correctness"] = time.perf_counter() - t0
    verdict.sandbox, verdict.checks = outcome.sandbox, outcome.checks
    if pinned := selection_env():  # the device slot every runtime process of this verdict was given
        verdict.sandbox["device_selection"] = pinned
    verdict.flags.extend(outcome.flags)
    if outcome.stage is not Stage.OK:
        verdict.stage, verdict.message = outcome.stage, outcome.message
        return _finish(verdict, t_start)
    verdict.correct = True
    verdict.evidence = next(d.evidence.value for d in target.devices() if d.name == device)
    if config.skip_timing or not timed:
        verdict.stage = Stage.OK
        verdict.message = outcome.message + (
            "; timing skipped"
            if timed
            else f"; not timed (device {device!r} is an emulator or interpreter: its times mean nothing)"
        )
        return _finish(verdict, t_start)
    t0 = time.perf_counter()
    # Quarantine: a flagged timing is re-measured in fresh processes, every timed call checked.
    attempts = timing_attempts(task, spec, config, kind, workdir / "timing")
    verdict = timing_verdict(verdict, outcome.message, attempts)
    large = next((t.sizes for t in plan.trials if t.shape_label == LARGE), None)
    if verdict.stage is Stage.OK and config.timed_held_out and large is not None:
        verdict = time_held_out(verdict, task, large, spec, config, kind, workdir)
    verdict.durations_s["timing"] = time.perf_counter() - t0
    annotate(verdict, task, target.name, device, config)  # interval, roofline, protocol (scores.py)
    return _finish(verdict, t_start)


def _evaluate_groups(
    task: Task, source: Candidate | str, target: Target, config: HarnessConfig, device: str | None
) -> Verdict:
    """Every group checked (the first failing one decides the verdict) and timed; the speedup is the
    geometric mean of the groups' speedups, each group's timing is kept."""
    t_start = time.perf_counter()
    verdicts: list[Verdict] = []
    if config.static_checks:  # lint once per candidate (the groups share its source)
        linted = _lint_only(task.group_task(0), source, target)
        if linted is not None:
            return linted
    builds = Builds(Path(tempfile.mkdtemp(prefix="sage-builds-")))
    try:
        return _judge_groups(task, source, target, config, device, builds, verdicts, t_start)
    finally:
        shutil.rmtree(builds.root, ignore_errors=True)


def _judge_groups(
    task: Task,
    source: Candidate | str,
    target: Target,
    config: HarnessConfig,
    device: str | None,
    builds: Builds,
    verdicts: list[Verdict],
    t_start: float,
) -> Verdict:
    failed: Verdict | None = None
    cases: list[dict[str, Any]] = []
    for i, group in enumerate(task.group_tasks()):
        v = _evaluate(group, source, target, config, device, builds)
        name = getattr(task.groups[i], "name", "") or f"group {i}"
        if task.benchmark is not None:  # its score counts every case: judge them all
            cases.append(_benchmark_case(name, v))
        if not v.ok:
            v.message = f"input group {i} ({name}): {v.message}"
            failed = failed or v
            if task.benchmark is None:
                return v
            continue
        verdicts.append(v)
    if failed is not None:
        failed.checks["benchmark"] = score_record(task.benchmark.case_count if task.benchmark else 0, cases)
        return failed
    first = verdicts[0]
    combined = Verdict(
        stage=Stage.OK,
        message="",
        compiled=True,
        correct=True,
        evidence=first.evidence,
        build=first.build,
        sandbox=first.sandbox,
        lint=[],
    )
    combined.checks = {"groups": [v.checks for v in verdicts]}
    if task.benchmark is not None:
        combined.checks["benchmark"] = score_record(task.benchmark.case_count, cases)
    combined.flags = sorted({f for v in verdicts for f in v.flags})
    combined.suspect = any(v.suspect for v in verdicts)
    combined.quarantine = sorted({q for v in verdicts for q in v.quarantine})
    speedups = [v.speedup for v in verdicts]
    if all(sp for sp in speedups):
        import math

        combined.speedup = math.exp(sum(math.log(float(sp)) for sp in speedups if sp) / len(speedups))
        combined.candidate_ms = math.exp(
            sum(math.log(float(v.candidate_ms or 1e-9)) for v in verdicts) / len(verdicts)
        )
        combined.reference_ms = math.exp(
            sum(math.log(float(v.reference_ms or 1e-9)) for v in verdicts) / len(verdicts)
        )
    combined.timing = {
        "method": "per input group; speedup is the geometric mean",
        "groups": [
            {
                "group": i,
                "speedup": v.speedup,
                "candidate_ms": v.candidate_ms,
                "reference_ms": v.reference_ms,
                "timing": v.timing,
            }
            for i, v in enumerate(verdicts)
        ],
    }
    combine_groups(combined, verdicts)
    parts = "; ".join(f"group {i}: {v.message}" for i, v in enumerate(verdicts))
    geo = f"; geometric-mean speedup {combined.speedup:.2f}x" if combined.speedup else ""
    combined.message = f"correct on all {len(verdicts)} input groups{geo} ({parts})"
    combined.durations_s = {"total": round(time.perf_counter() - t_start, 4)}
    combined.build = {**first.build, "builds": len(builds.by_key)}
    return combined


def _benchmark_case(name: str, v: Verdict) -> dict[str, Any]:
    """One case of a benchmark task: its rule's result (recorded by the correctness stage) and the
    harness's. A case whose kernel never produced outputs fails both."""
    from sagekernel.tasks.npukb_rule import CaseCheck, case_record

    raw = v.checks.get("benchmark") if isinstance(v.checks, dict) else None
    check = None
    if isinstance(raw, dict) and "rule_passed" in raw:
        check = CaseCheck(bool(raw["rule_passed"]), str(raw.get("rule", "")),
                          float(raw.get("max_abs_error") or 0.0), float(raw.get("max_rel_error") or 0.0),
                          str(raw.get("error", "")))
    return case_record(name, check, v.ok and v.correct)


def _lint_only(task: Task, source: Candidate | str, target: Target) -> Verdict | None:
    """A LINT verdict if the candidate fails the static checks, else None."""
    t_start = time.perf_counter()
    candidate = as_candidate(target, task, source)
    if candidate.is_empty():
        return None  # _evaluate reports it
    lint = target.lint(candidate, task)
    if not lint:
        return None
    verdict = Verdict(stage=Stage.LINT, message="", evidence=Evidence.STATIC.value, lint=lint)
    verdict.message = _lint_message(verdict)
    return _finish(verdict, t_start)


def _finish(verdict: Verdict, t_start: float) -> Verdict:
    verdict.durations_s = {k: round(v, 4) for k, v in verdict.durations_s.items()}
    verdict.durations_s["total"] = round(time.perf_counter() - t_start, 4)
    return verdict
