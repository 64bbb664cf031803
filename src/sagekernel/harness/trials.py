"""The correctness trials: secret seeds, shapes, value distributions, references, tolerances.

Every evaluation covers every value distribution on the task's default shape, whatever the number
of shape variants (large magnitudes and large offsets included), then the variants and one
held-out shape derived at random. The absolute tolerance scales with the reference outputs'
magnitude (tasks.inputs.reference_scale), never with the inputs'. Seeds come from `secrets` and
stay in this process.
"""

from __future__ import annotations

import contextlib
import secrets
from dataclasses import dataclass, field

import torch

from sagekernel.errors import TaskError
from sagekernel.harness.compare import SENTINELS
from sagekernel.harness.config import HarnessConfig
from sagekernel.harness.wire import Arg
from sagekernel.tasks.inputs import declared_precision_outputs, reference_scale
from sagekernel.tasks.loader import DISTRIBUTIONS, build_inputs, reference_outputs
from sagekernel.tasks.params import param_tensors
from sagekernel.tasks.task import Task

#: The order distributions are given to a shape's trials ("default" is the file's own).
DISTRIBUTION_ORDER = tuple(
    d
    for d in (
        "default",
        "normal",
        "large_offset",
        "heavy_tailed",
        "offset_uniform",
        "large_magnitude",
        "uniform",
    )
    if d in DISTRIBUTIONS
)


@dataclass
class Trial:
    index: int
    shape_label: str  # "default", "variant 1", "held-out"
    sizes: dict[str, int]
    distribution: str
    seed: int
    inputs: list[torch.Tensor]
    expected: list[torch.Tensor] = field(default_factory=list)
    atol: float = 0.0  # the task's atol times reference_scale(expected)
    #: The reference Model's parameters and buffers (`Task.params`), drawn under `param_seed` as
    #: KernelBench seeds Model and ModelNew alike; the kernel receives them after the inputs.
    params: list[torch.Tensor] = field(default_factory=list)
    param_seed: int = 0

    @property
    def tensors(self) -> list[torch.Tensor]:
        """What the kernel reads: the inputs, then the parameters."""
        return [*self.inputs, *self.params]

    def describe(self) -> str:
        sizes = ", ".join(f"{k}={v}" for k, v in self.sizes.items())
        return f"{self.shape_label} shape ({sizes}), trial {self.index}, {self.distribution} inputs"


def held_out_sizes(task: Task, rng: secrets.SystemRandom) -> dict[str, int]:
    sizes = {}
    for sym, value in task.sizes.items():
        if value <= 2:
            sizes[sym] = value
            continue
        v = max(1, round(value * rng.uniform(0.55, 0.95)))
        sizes[sym] = v if v % 2 else v + 1
    return sizes


#: An honest kernel in the declared precision may be this many times less accurate than PyTorch's
#: own declared-precision forward (a different but sound accumulation order); reduced precision and
#: numerically naive formulas are orders of magnitude worse.
FRAMEWORK_ERROR_FACTOR = 8.0


def trial_atol(
    task: Task, inputs: list[torch.Tensor], expected: list[torch.Tensor], sizes: dict[str, int], seed: int = 0
) -> float:
    """The absolute tolerance of one trial: the task's atol scaled by the reference outputs'
    magnitude, plus FRAMEWORK_ERROR_FACTOR times the largest error PyTorch's own declared-precision
    forward makes on these inputs (what float32 itself cannot avoid, e.g. at large offsets)."""
    atol = task.atol * reference_scale(expected)
    declared = declared_precision_outputs(task, inputs, sizes, seed=seed)
    if declared is None:
        return atol
    worst = 0.0
    for got, exp in zip(declared, expected, strict=True):
        if not exp.is_floating_point() or not exp.numel():
            continue
        if got.shape != exp.shape:
            continue  # a reference whose shapes depend on how it was called: no slack from it
        work = torch.float32 if exp.dtype in (torch.float16, torch.bfloat16, torch.float32) else torch.float64
        diff = (got.to(work) - exp.to(work)).abs()
        diff = torch.where(torch.isfinite(diff), diff, torch.zeros((), dtype=work))
        worst = max(worst, float(diff.max()))
    return atol + FRAMEWORK_ERROR_FACTOR * worst


def make_trial(task: Task, index: int, label: str, sizes: dict[str, int], distribution: str) -> Trial:
    seed = secrets.randbits(62)
    inputs = build_inputs(task, sizes, seed, distribution)
    param_seed = secrets.randbits(31)
    params = param_tensors(task, sizes, param_seed) if task.params else []
    expected = reference_outputs(task, inputs, sizes, seed=param_seed)
    atol = trial_atol(task, inputs, expected, sizes, seed=param_seed)
    return Trial(index, label, sizes, distribution, seed, inputs, expected, atol, params, param_seed)


def plan_trials(task: Task, config: HarnessConfig) -> list[Trial]:
    """Inputs and float64-derived references for every trial. Raises TaskError."""
    rng = secrets.SystemRandom()
    trials: list[Trial] = []
    default_count = max(config.trials, len(DISTRIBUTION_ORDER))
    for k in range(default_count):
        trials.append(
            make_trial(
                task,
                len(trials),
                "default",
                dict(task.sizes),
                DISTRIBUTION_ORDER[k % len(DISTRIBUTION_ORDER)],
            )
        )
    offset = rng.randrange(len(DISTRIBUTION_ORDER))
    for i, sizes in enumerate(task.all_shapes()[1:]):
        for k in range(config.variant_trials):
            dist = DISTRIBUTION_ORDER[(offset + i * config.variant_trials + k) % len(DISTRIBUTION_ORDER)]
            trials.append(make_trial(task, len(trials), f"variant {i + 1}", sizes, dist))
    if config.held_out_shape and any(v > 2 for v in task.sizes.values()):
        # a TaskError means the task's sizes are coupled: this held-out guess is not a valid shape
        with contextlib.suppress(TaskError):
            trials.append(
                make_trial(
                    task, len(trials), "held-out", held_out_sizes(task, rng), rng.choice(DISTRIBUTION_ORDER)
                )
            )
    return trials


def raw_bytes(t: torch.Tensor) -> bytes:
    flat = t.detach().contiguous().reshape(-1)
    return flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""


def kernel_args(task: Task, trial: Trial) -> list[Arg]:
    """The call's arguments in ABI order: inputs, parameters, outputs, sizes, attributes."""
    args = [
        Arg("in", len(raw_bytes(t)), dtype=spec.dtype, shape=tuple(t.shape))
        for spec, t in zip(task.inputs, trial.inputs, strict=True)
    ]
    args += [
        Arg("in", len(raw_bytes(t)), dtype=spec.dtype, shape=tuple(t.shape))
        for spec, t in zip(task.params, trial.params, strict=True)
    ]
    args += [
        Arg("out", len(raw_bytes(e)), fill=SENTINELS[spec.dtype], dtype=spec.dtype, shape=tuple(e.shape))
        for spec, e in zip(task.outputs, trial.expected, strict=True)
    ]
    args += [Arg("i64", value=int(trial.sizes[s])) for s in task.sizes]
    args += [
        Arg("f32", value=float(v)) if isinstance(v, float) else Arg("i64", value=int(v))
        for v in task.attrs.values()
    ]
    return args


def pack_sets(sets: list[list[torch.Tensor]]) -> tuple[bytes, list[list[tuple[int, int]]]]:
    """One round's blob and, per call, the (offset, length) of each input in it."""
    blob = bytearray()
    calls = []
    for inputs in sets:
        spans = []
        for t in inputs:
            data = raw_bytes(t)
            spans.append((len(blob), len(data)))
            blob += data
        calls.append(spans)
    return bytes(blob), calls


__all__ = [
    "DISTRIBUTION_ORDER",
    "Trial",
    "kernel_args",
    "make_trial",
    "pack_sets",
    "plan_trials",
    "raw_bytes",
]
