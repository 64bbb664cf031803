"""The seam between the functions that run a task's code and where that code runs.

tasks/reference.py, `inputs.build_inputs`, `sizegen`'s reading of module ints and
`npukb_rule.case_check` ask `child_for(task)` first: outside the harness's `task_child.confined`
block it is None and they run the task's code in this process (the loader does, inside its own
sandboxed child); inside it, it is the sandboxed task child (tasks/task_child.py, which registers
itself here), and the functions below send it the request instead. This module imports nothing
that runs task code, so the functions above can depend on it without a cycle.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

import torch

from sagekernel.errors import TaskError
from sagekernel.tasks.task import Task

TrialTensors = tuple[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor], list[torch.Tensor] | None]


class Child(Protocol):
    """What runs a task's code elsewhere: one request, (answer header, tensors)."""

    def call(self, op: str, task: Task, args: dict[str, Any],
             tensors: Sequence[torch.Tensor] = ()) -> tuple[dict[str, Any], list[torch.Tensor]]: ...


class TaskChildFailure(TaskError):
    """The task's code overran its limit, or killed or crashed its child: the task is broken
    whatever the shape (unlike a `TaskError` the code raised itself, e.g. refusing a size)."""


_LOCAL = threading.local()  # `standing_in`: the task (with drawn attributes) this thread's calls run
_FINDER: list[Callable[[Task], Child | None]] = []


def register(finder: Callable[[Task], Child | None]) -> None:
    """tasks/task_child.py: how to find the child of a task while the harness judges."""
    _FINDER[:] = [finder]


def child_for(task: Task) -> Child | None:
    """The child that runs `task`'s code now, or None: run it in this process."""
    return _FINDER[0](task) if _FINDER else None


def standing_task() -> Task | None:
    """The task `standing_in` binds for this thread's requests, or None."""
    return getattr(_LOCAL, "task", None)


@contextmanager
def standing_in(task: Task) -> Iterator[None]:
    """Within the block, this thread's requests for `task`'s file run `task` (its drawn attribute
    values bound): what `bound_sizes(task_module(task), task.attr_binding)` does in-process."""
    before = getattr(_LOCAL, "task", None)
    _LOCAL.task = task
    try:
        yield
    finally:
        _LOCAL.task = before


def _revive(value: Any, tensors: list[torch.Tensor]) -> Any:
    if isinstance(value, dict) and "tensor" in value:
        return tensors[int(value["tensor"])]
    if isinstance(value, dict) and "list" in value:
        items = [_revive(v, tensors) for v in value["list"]]
        return tuple(items) if value.get("tuple") else items
    if isinstance(value, dict):
        return Opaque(str(value.get("opaque", "?")))
    return value


class Opaque:
    """A value of get_init_inputs() that is neither JSON nor a tensor (it stays in the child)."""

    def __init__(self, type_name: str) -> None:
        self.type_name = type_name

    def __repr__(self) -> str:
        return f"<{self.type_name} from the task sandbox>"


# ---------------------------------------------------------------------- the functions, confined

def _sizes(sizes: Any) -> dict[str, int] | None:
    return None if sizes is None else {str(k): int(v) for k, v in dict(sizes).items()}


def build_inputs(child: Child, task: Task, sizes: Any, seed: int,
                 distribution: str) -> list[torch.Tensor]:
    return child.call("inputs", task, {"sizes": _sizes(sizes), "seed": int(seed),
                                       "distribution": distribution})[1]


def param_tensors(child: Child, task: Task, sizes: Any, seed: int) -> list[torch.Tensor]:
    return child.call("params", task, {"sizes": _sizes(sizes), "seed": int(seed)})[1]


def reference_outputs(child: Child, task: Task, inputs: Sequence[torch.Tensor], sizes: Any, seed: int,
                      params: Sequence[torch.Tensor] | None) -> list[torch.Tensor]:
    args = {"sizes": _sizes(sizes), "seed": int(seed), "n_inputs": len(inputs),
            "with_params": params is not None}
    return child.call("reference", task, args, [*inputs, *(params or [])])[1]


def declared_precision_outputs(child: Child, task: Task, inputs: Sequence[torch.Tensor], sizes: Any,
                               seed: int) -> list[torch.Tensor] | None:
    header, out = child.call("declared", task, {"sizes": _sizes(sizes), "seed": int(seed)}, list(inputs))
    return None if header.get("none") else out


def init_arguments(child: Child, task: Task, sizes: Any) -> list[Any]:
    header, out = child.call("init", task, {"sizes": _sizes(sizes)})
    return [_revive(v, out) for v in header.get("values", [])]


def init_parameters(child: Child, task: Task) -> list[str]:
    return [str(p) for p in child.call("signature", task, {})[0].get("params", [])]


def device_outputs(child: Child, task: Task, inputs: Sequence[torch.Tensor], sizes: Any, seed: int,
                   params: Sequence[torch.Tensor] | None, device: str) -> list[torch.Tensor]:
    args = {"sizes": _sizes(sizes), "seed": int(seed), "n_inputs": len(inputs),
            "with_params": params is not None, "device": str(device)}
    return child.call("device", task, args, [*inputs, *(params or [])])[1]


def module_ints(child: Child, task: Task) -> dict[str, int]:
    ints = child.call("ints", task, {})[0].get("ints", {})
    return {str(k): int(v) for k, v in ints.items() if type(v) is int}


def trial_tensors(child: Child, task: Task, sizes: Any, seed: int, distribution: str, param_seed: int
                  ) -> TrialTensors:
    header, out = child.call("trial", task, {"sizes": _sizes(sizes), "seed": int(seed),
                                             "distribution": distribution, "param_seed": int(param_seed)})
    counts = [int(n) for n in header["counts"]]
    if len(counts) != 4 or sum(counts) != len(out):
        raise TaskChildFailure(f"{task.source_path}: the task child sent a malformed trial")
    a, b, c = counts[0], counts[0] + counts[1], counts[0] + counts[1] + counts[2]
    return out[:a], out[a:b], out[b:c], None if header.get("none") else out[c:]


def input_sets(child: Child, task: Task, sizes: Any, seeds: Sequence[int],
               param_seeds: Sequence[int]) -> list[list[torch.Tensor]]:
    header, out = child.call("sets", task, {"sizes": _sizes(sizes), "seeds": [int(s) for s in seeds],
                                            "param_seeds": [int(s) for s in param_seeds]})
    per = int(header["per_set"])
    if per * len(seeds) != len(out):
        raise TaskChildFailure(f"{task.source_path}: the task child sent malformed input sets")
    return [out[i * per:(i + 1) * per] for i in range(len(seeds))]


def checked_outputs(child: Child, task: Task, inputs: Sequence[torch.Tensor], sizes: Any,
                    seed: int) -> tuple[list[torch.Tensor], list[torch.Tensor] | None]:
    header, out = child.call("checked", task, {"sizes": _sizes(sizes), "seed": int(seed)}, list(inputs))
    n = int(header["n_expected"])
    if not 0 <= n <= len(out):
        raise TaskChildFailure(f"{task.source_path}: the task child sent malformed references")
    return out[:n], None if header.get("none") else out[n:]


def reference_work(child: Child, task: Task, sizes: Any) -> tuple[int, int]:
    moved, flops = child.call("work", task, {"sizes": _sizes(sizes)})[0]["work"]
    return int(moved), int(flops)


def case_check(child: Child, task: Task, inputs: Sequence[torch.Tensor], outputs: Sequence[torch.Tensor],
               expected: Sequence[torch.Tensor], sizes: Any,
               seed: int) -> tuple[bool, str, float, float, str]:
    """`npukb_rule.case_check`'s fields, the task's own rule run in the child."""
    args = {"sizes": _sizes(sizes), "seed": int(seed), "n_inputs": len(inputs), "n_outputs": len(outputs)}
    passed, rule, abs_err, rel_err, error = child.call("case_check", task, args,
                                                       [*inputs, *outputs, *expected])[0]["check"]
    return bool(passed), str(rule), float(abs_err), float(rel_err), str(error)


__all__ = ["Child", "Opaque", "TaskChildFailure", "child_for", "register", "standing_in", "standing_task"]
