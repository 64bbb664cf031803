"""The correctness trials: secret seeds, shapes, value distributions, references, tolerances.

Every evaluation covers every value distribution on the task's default shape, whatever the number
of shape variants (large magnitudes and large offsets included), then the trials of what the task
declares valid (tasks/coverage.py): special values, ties and each named edge case on the default
shape; then the variants and the held-out shapes drawn fresh for this evaluation (tasks/sizegen.py:
one below the smallest published sizes, one above the largest, at tail residues of the vector
widths). Attribute values drawn from their declared domains ride on the held-out large shape (or,
without one, get their own process on the default shape, "attributes").

Tolerances: the task's atol scales with the reference outputs' magnitude (tasks.inputs.
reference_scale), never with the inputs'; on top, each output element gets a slack for what
float32 itself cannot avoid there (`framework_slack`). Seeds come from `secrets` and stay in this
process.
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass, field

import torch

from sagekernel.errors import TaskError
from sagekernel.harness.compare import SENTINELS
from sagekernel.harness.config import HarnessConfig
from sagekernel.harness.wire import Arg
from sagekernel.tasks.confine import TaskChildFailure
from sagekernel.tasks.frames import nbytes, raw_bytes
from sagekernel.tasks.inputs import reference_scale
from sagekernel.tasks.loader import DISTRIBUTIONS
from sagekernel.tasks.reference import declared_precision_outputs, trial_tensors
from sagekernel.tasks.sizegen import LARGE, HeldOutPlan, held_out_plan
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
#: The shape label of the trials with drawn attribute values when there is no held-out large shape
#: to carry them (it does otherwise: one process less).
ATTRIBUTES = "attributes"
#: A drawn attribute lies at least this fraction of its domain away from the published value.
ATTR_DISTANCE = 0.25


@dataclass
class Trial:
    index: int
    shape_label: str  # "default", "variant 1", "held-out small", "held-out large", "attributes"
    sizes: dict[str, int]
    distribution: str  # a value distribution, "special_values", "ties" or an edge case name
    seed: int
    inputs: list[torch.Tensor]
    expected: list[torch.Tensor] = field(default_factory=list)
    atol: float = 0.0  # the task's atol times reference_scale(expected)
    #: The reference Model's parameters and buffers (`Task.params`), drawn under `param_seed` as
    #: KernelBench seeds Model and ModelNew alike; the kernel receives them after the inputs.
    params: list[torch.Tensor] = field(default_factory=list)
    param_seed: int = 0
    #: Per output: the elementwise framework slack added to `atol` (None: none needed).
    slack: list[torch.Tensor | None] = field(default_factory=list)
    #: Attribute values drawn for this trial (empty: the task's published attrs).
    attrs: dict[str, float | int] = field(default_factory=dict)

    @property
    def tensors(self) -> list[torch.Tensor]:
        """What the kernel reads: the inputs, then the parameters."""
        return [*self.inputs, *self.params]

    def tolerance(self, k: int) -> float | torch.Tensor:
        """The absolute tolerance of output `k`: a number, or one per element."""
        extra = self.slack[k] if k < len(self.slack) else None
        return self.atol if extra is None else extra + self.atol

    def widest_atol(self) -> float:
        widest = (float(s.max()) for s in self.slack if s is not None and s.numel())
        return self.atol + max(widest, default=0.0)

    def describe(self) -> str:
        sizes = ", ".join(f"{k}={v}" for k, v in self.sizes.items())
        attrs = ", attributes " + ", ".join(f"{k}={v:g}" for k, v in self.attrs.items()) if self.attrs else ""
        return f"{self.shape_label} shape ({sizes}{attrs}), trial {self.index}, {self.distribution} inputs"


def trial_task(task: Task, trial: Trial) -> Task:
    """The task as this trial runs it (its drawn attribute values bound)."""
    return task.with_attrs(trial.attrs) if trial.attrs else task


#: An honest kernel in the declared precision may be this many times less accurate than PyTorch's
#: own declared-precision forward (a different but sound accumulation order); reduced precision and
#: numerically naive formulas are orders of magnitude worse.
FRAMEWORK_ERROR_FACTOR = 8.0
#: Output elements are grouped by decade of |expected| (neighbouring decades pooled) for the slack.
_ZERO_BUCKET = -1000


def elementwise_slack(declared: torch.Tensor, expected: torch.Tensor) -> torch.Tensor | None:
    """The framework slack of each output element: FRAMEWORK_ERROR_FACTOR x the largest error
    PyTorch's declared-precision forward makes on elements of the same magnitude (the decade of
    |expected|, and the two next to it), or at this element if larger. An honest kernel errs about
    as much as PyTorch does on outputs of that size; a 1e30 error on an exp output near 1e37 says
    nothing about an output near 1 (the old rule applied the largest error anywhere to every
    element). Where errors do not scale with the output (a dot product's cancellation), every
    decade sees them and keeps them. None when PyTorch is exact on every finite element."""
    work = torch.float64 if expected.dtype == torch.float64 else torch.float32
    e = expected.to(work).reshape(-1)
    d = (declared.to(work).reshape(-1) - e).abs()
    finite = torch.isfinite(d) & torch.isfinite(e)
    d = torch.where(finite, d, torch.zeros((), dtype=work))
    if not bool((d > 0).any()):
        return None
    mag = e.abs().double()
    bucket = torch.where(
        finite & (mag > 0),
        torch.floor(torch.log10(mag.clamp_min(1e-300))),
        torch.full_like(mag, _ZERO_BUCKET),
    ).to(torch.int64)
    values, inverse = torch.unique(bucket, return_inverse=True)
    worst = torch.zeros(values.numel(), dtype=work).scatter_reduce(0, inverse, d, reduce="amax")
    by_value = dict(zip(values.tolist(), worst.tolist(), strict=True))
    pooled = torch.tensor(
        [max(by_value.get(v + k, 0.0) for k in (-1, 0, 1)) for v in values.tolist()], dtype=work
    )
    return (FRAMEWORK_ERROR_FACTOR * torch.maximum(d, pooled[inverse])).reshape(expected.shape)


def framework_slack(
    task: Task, inputs: list[torch.Tensor], expected: list[torch.Tensor], sizes: dict[str, int], seed: int = 0
) -> list[torch.Tensor | None]:
    """Per output, the elementwise slack for what float32 itself cannot avoid on these inputs
    (e.g. at large offsets), or None."""
    return slack_from(declared_precision_outputs(task, inputs, sizes, seed=seed), expected)


def slack_from(declared: list[torch.Tensor] | None,
               expected: list[torch.Tensor]) -> list[torch.Tensor | None]:
    """`framework_slack` given PyTorch's declared-precision outputs (None: that run failed)."""
    if declared is None:
        return [None] * len(expected)
    out: list[torch.Tensor | None] = []
    for got, exp in zip(declared, expected, strict=True):
        # a reference whose shapes depend on how it was called gives no slack
        usable = exp.is_floating_point() and exp.numel() and got.shape == exp.shape
        out.append(elementwise_slack(got, exp) if usable else None)
    return out


def trial_atol(
    task: Task, inputs: list[torch.Tensor], expected: list[torch.Tensor], sizes: dict[str, int], seed: int = 0
) -> float:
    """The scalar part of a trial's tolerance: the task's atol scaled by the reference outputs'
    magnitude (the elementwise part is `framework_slack`)."""
    return task.atol * reference_scale(expected)


def make_trial(
    task: Task,
    index: int,
    label: str,
    sizes: dict[str, int],
    distribution: str,
    attrs: dict[str, float | int] | None = None,
) -> Trial:
    run = task.with_attrs(attrs) if attrs else task
    seed = secrets.randbits(62)
    param_seed = secrets.randbits(31)
    # in the task sandbox while the harness judges (tasks/task_child.py): one request per trial
    inputs, params, expected, declared = trial_tensors(run, sizes, seed, distribution, param_seed)
    atol = trial_atol(run, inputs, expected, sizes, seed=param_seed)
    slack = slack_from(declared, expected)
    return Trial(index, label, sizes, distribution, seed, inputs, expected, atol, params, param_seed, slack,
                 dict(attrs or {}))


#: A drawn float attribute has at most ATTR_SIGNIFICANT_BITS significant bits: exactly representable
#: in every float type a kernel uses (bf16 has 8), so a reference's own arithmetic on published-style
#: values (one_hot's `hot * (on - off) + off`) stays exact and a zero tolerance stays valid.
ATTR_SIGNIFICANT_BITS = 8


def dyadic(value: float) -> float:
    """`value` rounded to ATTR_SIGNIFICANT_BITS significant bits (0 stays 0; never rounds to 0)."""
    mantissa, exponent = math.frexp(value)
    scale = 2**ATTR_SIGNIFICANT_BITS
    return math.ldexp(round(mantissa * scale) / scale, exponent)


def draw_attrs(task: Task, rng: secrets.SystemRandom) -> dict[str, float | int]:
    """One value per declared attribute domain, different from the published value where the
    domain allows (an attribute compiled into the kernel then gives wrong results)."""
    out: dict[str, float | int] = {}
    for name, dom in task.coverage.attr_domains.items():
        value: float | int = task.attrs[name]
        for _ in range(16):  # a quarter of the domain away from the published value, if it has room
            drawn = (rng.randint(int(dom.low), int(dom.high)) if dom.integer
                     else dyadic(rng.uniform(dom.low, dom.high)))
            if not dom.low <= drawn <= dom.high:  # rounded past an end of the domain: draw again
                continue
            value = drawn
            if abs(value - task.attrs[name]) >= ATTR_DISTANCE * (dom.high - dom.low) > 0:
                break
        out[name] = value
    return out


@dataclass
class TrialPlan:
    trials: list[Trial]
    #: What the plan could not cover and why (stated in the verdict's checks and message).
    notes: list[str] = field(default_factory=list)


def plan_trials(task: Task, config: HarnessConfig) -> TrialPlan:
    """Inputs and float64-derived references for every trial. Raises TaskError."""
    rng = secrets.SystemRandom()
    trials: list[Trial] = []
    notes: list[str] = []
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
    if config.coverage_trials:
        cov = task.coverage
        kinds = (["special_values"] if cov.special_values else []) + (["ties"] if cov.ties else [])
        for kind in [*kinds, *cov.edge_cases]:
            trials.append(make_trial(task, len(trials), "default", dict(task.sizes), kind))
    # one process runs a shape: one set of attribute values for it
    drawn = draw_attrs(task, rng) if config.coverage_trials and task.coverage.attr_domains else {}
    plan = held_out_plan(task, rng) if config.held_out_shape else HeldOutPlan()
    carrier = next((s for s in plan.shapes if s.label == LARGE), None)
    if drawn and carrier is None:
        for k in range(max(1, config.variant_trials)):
            dist = DISTRIBUTION_ORDER[(k + 1) % len(DISTRIBUTION_ORDER)]
            trials.append(make_trial(task, len(trials), ATTRIBUTES, dict(task.sizes), dist, drawn))
    offset = rng.randrange(len(DISTRIBUTION_ORDER))
    for i, sizes in enumerate(task.all_shapes()[1:]):
        for k in range(config.variant_trials):
            dist = DISTRIBUTION_ORDER[(offset + i * config.variant_trials + k) % len(DISTRIBUTION_ORDER)]
            trials.append(make_trial(task, len(trials), f"variant {i + 1}", sizes, dist))
    if config.held_out_shape:
        if plan.unavailable:
            notes.append(plan.unavailable)
        for shape in plan.shapes:
            attrs = drawn if shape is carrier else None
            try:
                trials.append(make_trial(
                    task, len(trials), shape.label, shape.sizes, rng.choice(DISTRIBUTION_ORDER), attrs
                ))
            except TaskChildFailure:
                raise  # a hang or a crash is the task's fault, not a refusal of this shape
            except TaskError as exc:
                if task.layout_note.startswith("level and category from SAGE_TASK"):
                    raise TaskError(
                        f"the {shape.label} shape {shape.sizes} drawn within the task's size rules is not "
                        f"a valid shape of the file ({exc}); declare what the sizes must satisfy in "
                        "SAGE_TASK['size_rules'] (tasks/coverage.py)"
                    ) from exc
                notes.append(f"no {shape.label} shape: the file refused {shape.sizes} ({exc})")
    return TrialPlan(trials, notes)


def kernel_args(task: Task, trial: Trial) -> list[Arg]:
    """The call's arguments in ABI order: inputs, parameters, outputs, sizes, attributes."""
    args = [
        Arg("in", nbytes(t), dtype=spec.dtype, shape=tuple(t.shape))
        for spec, t in zip(task.inputs, trial.inputs, strict=True)
    ]
    args += [
        Arg("in", nbytes(t), dtype=spec.dtype, shape=tuple(t.shape))
        for spec, t in zip(task.params, trial.params, strict=True)
    ]
    args += [
        Arg("out", nbytes(e), fill=SENTINELS[spec.dtype], dtype=spec.dtype, shape=tuple(e.shape))
        for spec, e in zip(task.outputs, trial.expected, strict=True)
    ]
    args += [Arg("i64", value=int(trial.sizes[s])) for s in task.sizes]
    attrs = {**task.attrs, **trial.attrs}
    args += [
        Arg("f32", value=float(v)) if isinstance(task.attrs[k], float) else Arg("i64", value=int(v))
        for k, v in attrs.items()
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
    "ATTRIBUTES",
    "DISTRIBUTION_ORDER",
    "Trial",
    "TrialPlan",
    "elementwise_slack",
    "framework_slack",
    "kernel_args",
    "make_trial",
    "pack_sets",
    "plan_trials",
    "raw_bytes",
    "trial_task",
]
