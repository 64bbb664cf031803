"""Diagnostics of one candidate, for the model: the target's tools on a small probe, and the first
mismatch located against the reference (the harness owns inputs and references).

`diagnose(task, candidate, target, config)` picks the task's smallest shape, builds one trial of
it (inputs, parameters, float64-derived reference, tolerance; fresh secret seed as every trial),
hands the target a `DiagnosticProbe`, and compares the outputs the debug run wrote. It never
decides a verdict and never spends an evaluation round: the built-in loop attaches its text to
the feedback after a crash or a wrong result, and the MCP server's `diagnose` tool returns it.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from sagekernel import sandbox
from sagekernel.candidate import Candidate
from sagekernel.diagnostics_seam import DiagnosticProbe, ProbeTensor, TargetDiagnostics
from sagekernel.errors import SageError
from sagekernel.harness.compare import SENTINELS, compare, tensor_from_bytes
from sagekernel.harness.config import HarnessConfig
from sagekernel.harness.tolerances import judged_task
from sagekernel.harness.trials import Trial, make_trial, raw_bytes
from sagekernel.protocols import Target
from sagekernel.tasks.task import Task
from sagekernel.tasks.task_child import confined

NEIGHBOURHOOD = 3  # elements shown on each side of the first mismatch


@dataclass
class MismatchLocation:
    """The first wrong element of one output, with its neighbourhood (flat indices)."""

    output: str
    index: tuple[int, ...]
    flat_index: int
    expected: str
    got: str
    detail: str
    wrong: int
    total: int
    neighbourhood: list[tuple[int, float, float]]  # (flat index, expected, got)

    def describe(self) -> str:
        where = "[" + ", ".join(str(i) for i in self.index) + "]"
        near = ", ".join(f"{i}: expected {e:.6g} got {g:.6g}" for i, e, g in self.neighbourhood)
        return (
            f"first mismatch in output '{self.output}' at index {where} (flat {self.flat_index}): expected "
            f"{self.expected}, got {self.got} ({self.detail}); {self.wrong} of {self.total} elements wrong. "
            f"Neighbourhood: {near}"
        )


@dataclass
class DiagnosticReport:
    """Everything `diagnose` found (`text()` is what the model reads)."""

    operator: str
    target: str
    shape: dict[str, int] = field(default_factory=dict)
    available: bool = True
    message: str = ""
    diagnostics: TargetDiagnostics | None = None
    mismatch: MismatchLocation | None = None
    seconds: float = 0.0

    def text(self) -> str | None:
        if not self.available:
            return None
        sizes = ", ".join(f"{k}={v}" for k, v in self.shape.items())
        lines = [f"DIAGNOSTICS (debug run on the small shape {sizes}; no evaluation round spent):"]
        if self.message:
            lines.append(self.message)
        d = self.diagnostics
        if d is not None:
            if d.fault is not None:
                buffer = f", touching buffer '{d.fault_buffer}'" if d.fault_buffer else ""
                where = f" in {d.fault.function}" if d.fault.function else ""
                lines.append(f"FAULT: {d.fault_kind} at {d.fault.path} line {d.fault.line}{where}{buffer}")
            for section in d.sections:
                lines.append(f"--- {section.title} ---\n{section.text}")
        if self.mismatch is not None:
            lines.append("--- first mismatch ---\n" + self.mismatch.describe())
        elif d is not None and d.ran:
            lines.append("--- outputs ---\nthe debug run's outputs match the reference on this shape")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "text": self.text()}


def smallest_shape(task: Task) -> dict[str, int]:
    """The task's shape with the fewest elements over its size symbols (default or a variant)."""

    def volume(sizes: dict[str, int]) -> int:
        total = 1
        for v in sizes.values():
            total *= max(1, v)
        return total

    return min(task.all_shapes(), key=volume)


def probe_for(task: Task, trial: Trial) -> DiagnosticProbe:
    tensors = [
        ProbeTensor(s.name, s.dtype, tuple(t.shape), raw_bytes(t), "input")
        for s, t in zip(task.inputs, trial.inputs, strict=True)
    ]
    tensors += [
        ProbeTensor(s.name, s.dtype, tuple(t.shape), raw_bytes(t), "param")
        for s, t in zip(task.params, trial.params, strict=True)
    ]
    tensors += [
        ProbeTensor(s.name, s.dtype, tuple(e.shape), SENTINELS[s.dtype] * e.numel(), "output")
        for s, e in zip(task.outputs, trial.expected, strict=True)
    ]
    scalars: list[tuple[str, str, int | float]] = [(s, "i64", int(trial.sizes[s])) for s in task.sizes]
    scalars += [
        (k, "f32", float(v)) if isinstance(v, float) else (k, "i64", int(v)) for k, v in task.attrs.items()
    ]
    return DiagnosticProbe(trial.shape_label, dict(trial.sizes), tensors, scalars, trial.param_seed)


def locate_mismatch(task: Task, trial: Trial, outputs: list[bytes]) -> MismatchLocation | None:
    """The first output element outside tolerance, with NEIGHBOURHOOD elements either side."""
    for k, spec in enumerate(task.outputs):
        exp = trial.expected[k]
        dtype = torch.uint8 if spec.dtype == "bool" else exp.dtype
        width = exp.element_size()
        if len(outputs[k]) != exp.numel() * width:  # a target that returns whole tensors (triton)
            n = len(outputs[k]) // max(1, width)
            want = f"{exp.numel()} elements {tuple(exp.shape)}"
            total = exp.numel()
            got_n = f"{n} elements"
            return MismatchLocation(spec.name, (), 0, want, got_n, "wrong element count", total, total, [])
        got = tensor_from_bytes(outputs[k], dtype, tuple(exp.shape))
        mism = compare(got, exp, trial.tolerance(k), task.rtol, spec.dtype, outputs[k])
        if mism is None:
            continue
        flat = 0
        for i, dim in zip(mism.index, exp.shape, strict=True):
            flat = flat * dim + i
        e, g = exp.reshape(-1).double(), got.reshape(-1).double()
        lo, hi = max(0, flat - NEIGHBOURHOOD), min(e.numel(), flat + NEIGHBOURHOOD + 1)
        near = [(i, float(e[i]), float(g[i])) for i in range(lo, hi)]
        return MismatchLocation(
            spec.name, mism.index, flat, mism.expected, mism.actual, mism.detail, mism.count, mism.total, near
        )
    return None


def diagnose(
    task: Task,
    candidate: Candidate,
    target: Target,
    config: HarnessConfig | None = None,
    device: str | None = None,
) -> DiagnosticReport:
    """Run the target's diagnostics on the task's smallest shape (see module docstring)."""
    config = config or HarnessConfig()
    t0 = time.perf_counter()
    report = DiagnosticReport(operator=task.name, target=target.name)
    tool = getattr(target, "diagnose", None)
    if tool is None:
        report.available, report.message = False, f"target {target.name!r} has no diagnostics"
        return report
    if len(task.groups) > 1 and task.group_index is None:
        task = task.group_task(0)  # diagnose on the first input group's contract
    task = judged_task(target, task)  # the probe's mismatch under the tolerances verdicts use
    sizes = smallest_shape(task)
    report.shape = sizes
    workdir = Path(tempfile.mkdtemp(prefix="sage-diag-"))
    try:
        with confined(config.sandbox):  # the task's code runs in its sandbox (tasks/task_child.py)
            trial = make_trial(task, 0, "debug", sizes, "default")
            dev = device or next(iter(target.devices())).name
            found: TargetDiagnostics = tool(
                candidate,
                task,
                probe_for(task, trial),
                workdir,
                device=dev,
                sandbox_kind=sandbox.best_kind(config.sandbox),
                timeout_s=config.build_timeout_s,
            )
            report.diagnostics = found
            if found.outputs is not None:
                report.mismatch = locate_mismatch(task, trial, found.outputs)
    except (SageError, OSError, RuntimeError, ValueError) as exc:  # diagnostics help; they never stop a run
        report.message = f"the diagnostics could not run: {type(exc).__name__}: {exc}"
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    report.seconds = round(time.perf_counter() - t0, 3)
    return report
