"""The check of timed calls' outputs (timing.py, device_timing.py): after each round, the calls the
parent drew are compared with fresh float64-derived references, and inputs and guard bytes must be
untouched. A timed call must compute what a checked call computes."""

from __future__ import annotations

import torch

from sagekernel.harness.compare import compare, tensor_from_bytes
from sagekernel.harness.runs import RoundResult
from sagekernel.harness.trials import slack_from, trial_atol
from sagekernel.tasks.reference import checked_outputs
from sagekernel.tasks.task import Task


def param_seed(seed: int) -> int:
    return seed & 0x7FFFFFFF


def recheck(
    task: Task, result: RoundResult, sets: list[tuple[int, list[torch.Tensor]]], where: str
) -> str | None:
    """Compare every returned output of a timed round with a fresh reference."""
    for call in result.calls:
        if call.outputs is None:
            continue
        seed, tensors = sets[call.call]
        inputs = tensors[: len(task.inputs)]
        # both references in one request to the task sandbox while the harness judges
        expected, declared = checked_outputs(task, inputs, dict(task.sizes), param_seed(seed))
        atol = trial_atol(task, inputs, expected, dict(task.sizes), seed=param_seed(seed))
        slack = slack_from(declared, expected)
        if any(c >= 0 for c in call.inputs_changed) or not all(call.guards):
            return (
                f"during timing ({where}, call {call.call}) the kernel modified an input or wrote outside "
                "its buffers"
            )
        for k, spec in enumerate(task.outputs):
            exp = expected[k]
            dtype = torch.uint8 if spec.dtype == "bool" else exp.dtype
            got = tensor_from_bytes(call.outputs[k], dtype, tuple(exp.shape))
            extra = slack[k]
            tol = atol if extra is None else extra + atol
            mism = compare(got, exp, tol, task.rtol, spec.dtype, call.outputs[k])
            if mism is not None:
                return (
                    f"wrong result during timing ({where}, call {call.call}, checked after the round): "
                    f"{mism.describe(spec.name)}; timed calls must compute the same result as checked calls"
                )
    return None


__all__ = ["param_seed", "recheck"]
