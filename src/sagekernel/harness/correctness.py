"""The correctness stage: every trial through the target's runtime, judged here.

Each shape runs in its own fresh runtime process (one round returning every output); the default
shape's trials then run again, in reverse order, in another fresh process, and every output must
match bit for bit: state a kernel keeps between calls (globals, heap or stack residue, errno, the
runtime's own memory) shows up as a difference. Per call the runtime reports whether inputs
changed and whether guard bytes survived; outputs are compared element-wise (compare.py), with
a message naming the trial, the shape and the first wrong element. Null-kernel canaries judge the
task itself (canaries.py).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from sagekernel import sandbox
from sagekernel.harness.canaries import CANARIES, task_canaries
from sagekernel.harness.compare import compare, tensor_from_bytes
from sagekernel.harness.config import HarnessConfig
from sagekernel.harness.runs import Failure, RoundResult, RuntimeRun
from sagekernel.harness.trials import Trial, kernel_args, pack_sets, raw_bytes, trial_task
from sagekernel.harness.verdict import Stage
from sagekernel.harness.wire import ALL, Plan, Round
from sagekernel.seam import RuntimeSpec
from sagekernel.tasks.reference import attrs_bound
from sagekernel.tasks.task import Task


@dataclass
class Outcome:
    stage: Stage  # OK, RUNTIME, CORRECTNESS, INTEGRITY, LOAD or BROKEN_TASK
    message: str
    sandbox: dict[str, Any] = field(default_factory=dict)
    checks: dict[str, Any] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)


def limits_for(config: HarnessConfig, spec: RuntimeSpec, calls: int) -> sandbox.Limits:
    wall = config.call_timeout_s * max(1, calls) + config.start_timeout_s
    return sandbox.Limits(
        wall_s=wall,
        cpu_s=int(wall * max(1, config.threads)) + 1,
        address_space_bytes=spec.address_space_bytes
        and max(spec.address_space_bytes, config.memory_limit_bytes),
    )


def run_shape(
    task: Task, trials: list[Trial], spec: RuntimeSpec, config: HarnessConfig, kind: str, scratch: Path
) -> tuple[RoundResult | Failure, dict[str, Any]]:
    """One fresh runtime process running `trials` (one shape) in one round."""
    plan = Plan(secrets.token_hex(16), kernel_args(task, trials[0]), [], threads=config.threads)
    blob, spans = pack_sets([t.tensors for t in trials])
    plan.rounds = [Round(spans, ALL)]
    plan.artifact_blob = spec.artifact.read_bytes() if spec.artifact else b""
    plan.artifact = {**spec.artifact_record, "blob": [0, len(plan.artifact_blob)]}
    if spec.artifact_for is not None:
        # the artifact record (e.g. ModelNew's init arguments) under the trials' attribute values
        with attrs_bound(trial_task(task, trials[0])):
            plan.artifact.update(spec.artifact_for(dict(trials[0].sizes)))
    run = RuntimeRun(spec, plan, kind=kind, limits=limits_for(config, spec, len(trials)), scratch=scratch)
    failure = run.started()
    if failure is not None:
        return failure, {}
    result = run.run_round(
        blob, [t.describe() for t in trials], config.call_timeout_s * len(trials) + config.start_timeout_s
    )
    run.finish()
    return result, dict(run.hello)


def judge_call(task: Task, trial: Trial, call: Any) -> str | None:
    """Why this call's result is wrong, or None."""
    read_only = [*task.inputs, *task.params]
    for pos, changed in enumerate(call.inputs_changed):
        if changed >= 0 and pos < len(read_only):
            elem = changed // max(1, trial.tensors[pos].element_size())
            what = "input" if pos < len(task.inputs) else "parameter"
            return (
                f"{what} '{read_only[pos].name}' was modified by the kernel (first changed element at flat "
                f"index {elem}) on the {trial.describe()}; inputs and parameters are read-only"
            )
    names = [s.name for s in read_only] + [s.name for s in task.outputs]
    for pos, ok in enumerate(call.guards):
        if not ok:
            what = "input" if pos < len(read_only) else "output"
            return (
                f"the kernel wrote outside the bounds of {what} '{names[pos]}' (guard bytes around the "
                f"buffer changed) on the {trial.describe()}; check loop bounds and vector tails against "
                "the sizes passed in"
            )
    for k, spec in enumerate(task.outputs):
        exp = trial.expected[k]
        dtype = torch.uint8 if spec.dtype == "bool" else exp.dtype
        actual = tensor_from_bytes(call.outputs[k], dtype, tuple(exp.shape))
        mism = compare(actual, exp, trial.tolerance(k), task.rtol, spec.dtype, call.outputs[k])
        if mism is not None:
            return f"wrong result on the {trial.describe()}: {mism.describe(spec.name)}."
    return None


def benchmark_check(task: Task, trial: Trial, call: Any) -> dict[str, Any]:
    """The benchmark's own rule (NPUKernelBench: tasks/npukb_rule.py) on this case's own inputs,
    recorded beside the harness's verdict; it never replaces it."""
    from sagekernel.tasks.npukb_rule import case_check

    outputs = []
    for k, spec in enumerate(task.outputs):
        exp = trial.expected[k]
        dtype = torch.bool if spec.dtype == "bool" else exp.dtype
        raw = call.outputs[k] if call.outputs and k < len(call.outputs) else b""
        outputs.append(tensor_from_bytes(raw, torch.uint8 if dtype == torch.bool else dtype,
                                         tuple(exp.shape)).to(dtype))
    check = case_check(task, trial.inputs, outputs, trial.expected, trial.sizes, seed=trial.param_seed)
    return {"rule_passed": check.passed, "rule": check.rule, "max_abs_error": check.max_abs_error,
            "max_rel_error": check.max_rel_error, "error": check.error}


def run_correctness(
    task: Task,
    trials: list[Trial],
    spec: RuntimeSpec,
    config: HarnessConfig,
    kind: str,
    scratch: Path,
    notes: list[str] | None = None,
) -> Outcome:
    """`notes`: what the trial plan could not cover (stated in the checks and the message)."""
    box: dict[str, Any] = {"kind": kind, "runtime": spec.name}
    checks: dict[str, Any] = {
        "trials": [
            {
                "shape": t.shape_label,
                "sizes": t.sizes,
                "distribution": t.distribution,
                "seed": t.seed,
                "atol": t.atol,
                "widest_atol": t.widest_atol(),
                **({"attrs": t.attrs} if t.attrs else {}),
            }
            for t in trials
        ],
        "distributions": sorted({t.distribution for t in trials}),
        "not_covered": list(notes or []),
    }

    def out(stage: Stage, message: str, flags: list[str] | None = None) -> Outcome:
        return Outcome(stage, message, box, checks, list(flags or []))

    shapes: dict[str, list[Trial]] = {}
    for t in trials:
        shapes.setdefault(t.shape_label, []).append(t)
    first_outputs: dict[int, list[bytes]] = {}
    for n, (label, group) in enumerate(shapes.items()):
        result, hello = run_shape(task, group, spec, config, kind, scratch / f"shape{n}")
        box.setdefault("seccomp", hello.get("seccomp", "unknown"))
        if isinstance(hello.get("device_view"), dict):  # the selection the runtime itself was started with
            box.setdefault("device_view", hello["device_view"])
        if isinstance(result, Failure):
            return out(result.stage, result.message, result.flags)
        for trial, call in zip(group, result.calls, strict=True):
            if task.benchmark is not None and label == "default" and trial.distribution == "default" \
                    and "benchmark" not in checks:
                checks["benchmark"] = benchmark_check(task, trial, call)
            problem = judge_call(task, trial, call)
            if problem:
                return out(Stage.CORRECTNESS, problem)
            if label == "default":
                first_outputs[trial.index] = list(call.outputs or [])
    # The default shape again, reversed, in a fresh process: hidden cross-call state shows up here.
    default = list(reversed(shapes.get("default", [])))
    if config.fresh_process_recheck and default:
        result, _ = run_shape(task, default, spec, config, kind, scratch / "fresh")
        if isinstance(result, Failure):
            return out(result.stage, result.message, result.flags)
        for trial, call in zip(default, result.calls, strict=True):
            if list(call.outputs or []) != first_outputs[trial.index]:
                k = next(
                    i
                    for i, (a, b) in enumerate(
                        zip(call.outputs or [], first_outputs[trial.index], strict=False)
                    )
                    if a != b
                )
                return out(
                    Stage.CORRECTNESS,
                    "not deterministic: the same inputs gave different bits in a fresh "
                    f"process with the calls in another order (output '{task.outputs[k].name}', the "
                    f"{trial.describe()}); the kernel reads uninitialised memory or keeps state "
                    "between calls",
                    ["cross_call_state"],
                )
    checks["calls"] = len(trials) + (len(default) if config.fresh_process_recheck else 0)
    checks["processes"] = len(shapes) + (1 if config.fresh_process_recheck and default else 0)
    if config.canaries:
        passing, cached = task_canaries(task, config, trials)
        checks["canaries"] = {"checked": list(CANARIES), "passing": passing, "cached": cached}
        if passing:
            return out(
                Stage.BROKEN_TASK,
                f"the task is broken: the null kernel(s) {', '.join(passing)} pass every "
                "trial, so passing says nothing about a candidate",
                ["broken_task"],
            )
    gaps = f" ({'; '.join(notes)})" if notes else ""
    return out(
        Stage.OK,
        f"correct on {len(trials)} trials over {len(shapes)} shapes and "
        f"{len(checks['distributions'])} input kinds{gaps}",
    )


__all__ = ["Outcome", "judge_call", "limits_for", "raw_bytes", "run_correctness", "run_shape"]
