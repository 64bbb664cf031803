"""A task's reference: its model, its parameters and its outputs, as the harness asks for them.

Every function goes through the task file's cached module (`modules.task_module`), rebinds its size
symbols for the call, and never disturbs the caller's global RNG state (`torch.random.fork_rng`).
The inputs they run on come from tasks/inputs.py; the model's parameters as kernel arguments are
named and loaded by tasks/params.py. Inside `task_child.confined` (the harness judging), each of
them runs in the sandboxed task child instead of this process (tasks/confine.py, the seam).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import torch

from sagekernel.errors import TaskError
from sagekernel.tasks import confine
from sagekernel.tasks.inputs import (
    assemble_call,
    call_forward,
    call_init_inputs,
    check_tensors,
    full_sizes,
    instantiate,
    seed_cpu,
    torch_dtype,
)
from sagekernel.tasks.modules import bound_sizes, task_module
from sagekernel.tasks.params import load_params, model_tensors
from sagekernel.tasks.task import Task

#: A trial's (inputs, parameters, references, declared-precision outputs or None).
TrialTensors = tuple[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor], list[torch.Tensor] | None]


def _confined(task: Task) -> confine.Child | None:
    """The sandboxed child that runs `task`'s code while the harness judges (tasks/task_child.py)."""
    return confine.child_for(task)


@contextmanager
def attrs_bound(task: Task) -> Iterator[None]:
    """`task`'s attribute values bound for the calls of the block that name its file (a target's
    `artifact_for` builds init arguments under the trial's drawn attributes)."""
    if _confined(task) is not None:
        with confine.standing_in(task):
            yield
        return
    with bound_sizes(task_module(task), task.attr_binding):
        yield


def make_model(task: Task, sizes: Mapping[str, int] | None = None, seed: int = 0) -> torch.nn.Module:
    """`Model(*get_init_inputs())` with the size symbols bound to `sizes`, seeded, in eval mode."""
    full = full_sizes(task, sizes)
    module = task_module(task)
    with bound_sizes(module, task.binding(full)):
        return instantiate(module, task.source_path, seed)


def init_parameters(task: Task) -> list[str]:
    """The names of `Model.__init__`'s parameters after self ([] when unreadable): the Triton contract's."""
    if (child := _confined(task)) is not None:
        return confine.init_parameters(child, task)
    import inspect

    try:
        return list(inspect.signature(task_module(task).Model.__init__).parameters)[1:]
    except (TypeError, ValueError, AttributeError):
        return []


def device_outputs(task: Task, inputs: Sequence[torch.Tensor], sizes: Mapping[str, int], seed: int,
                   params: Sequence[torch.Tensor] | None, device: str) -> list[torch.Tensor]:
    """The task's Model on `device` in its declared dtypes under `seed`, back on the CPU (the
    Ascend C calibration's device reference, targets/ascendc/calibrate.py)."""
    if (child := _confined(task)) is not None:
        return confine.device_outputs(child, task, inputs, sizes, seed, params, device)
    if device.startswith("npu"):
        import torch_npu  # noqa: F401  (registers the npu device)
    module = task_module(task)
    with bound_sizes(module, task.binding(dict(sizes))), torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(seed)
        model = instantiate(module, task.source_path, seed)
        if params is not None:
            load_params(task, model, params)
        args = assemble_call(task, [t.detach().clone().to(device) for t in inputs])
        outputs = call_forward(model.to(device), args, task.source_path)
    return [o.detach().to("cpu").to(torch_dtype(spec.dtype)).contiguous()
            for spec, o in zip(task.outputs, outputs, strict=True)]


def sizes_from_inputs(task: Task, inputs: Sequence[torch.Tensor],
                      sizes: Mapping[str, int] | None = None) -> dict[str, int]:
    """Size symbols read off the input shapes, then `sizes`, then the task defaults for the rest."""
    if len(inputs) != len(task.inputs):
        raise TaskError(f"task {task.name}: got {len(inputs)} inputs, expected {len(task.inputs)}")
    found: dict[str, int] = {}
    for spec, t in zip(task.inputs, inputs, strict=True):
        if t.dim() != len(spec.dims):
            raise TaskError(f"task {task.name}: input {spec.name} has {t.dim()} dims, "
                            f"expected {len(spec.dims)}")
        for d, n in zip(spec.dims, t.shape, strict=True):
            if found.setdefault(d, int(n)) != int(n):
                raise TaskError(f"task {task.name}: size {d} is {found[d]} in one input "
                                f"and {int(n)} in another")
    if sizes:
        for k, v in sizes.items():
            if k in found and found[k] != v:
                raise TaskError(f"task {task.name}: size {k}={v} disagrees with the input shapes "
                                f"({found[k]})")
    return full_sizes(task, {**(sizes or {}), **found})


def uses_fp64_reference(task: Task) -> bool:
    meta = getattr(task_module(task), "SAGE_TASK", None)
    return not (isinstance(meta, dict) and meta.get("fp64_reference") is False)


def reference_outputs(task: Task, inputs: Sequence[torch.Tensor],
                      sizes: Mapping[str, int] | None = None, *, seed: int = 0,
                      params: Sequence[torch.Tensor] | None = None) -> list[torch.Tensor]:
    """The reference outputs for `inputs`, computed in float64 where the op allows, cast back to each
    output's declared dtype, contiguous.

    Sizes are read off the input shapes; pass `sizes` for symbols that appear only in outputs
    (e.g. the length of an arange), otherwise their defaults are used. The inputs are not modified.
    A task opts out of float64 with ``SAGE_TASK["fp64_reference"] = False``; an op that raises in
    float64 falls back to the declared precision.

    The model is built under `seed` (so its parameters are `param_tensors(task, sizes, seed)`);
    pass `params` (in `task.params` order) to run with exactly those tensors instead.
    """
    if (child := _confined(task)) is not None:
        return confine.reference_outputs(child, task, inputs, sizes, seed, params)
    full = sizes_from_inputs(task, inputs, sizes)
    check_tensors(task, task.inputs, inputs, full, "reference_outputs() inputs")
    module = task_module(task)
    path = task.source_path
    with bound_sizes(module, task.binding(full)), torch.random.fork_rng(devices=[]):
        seed_cpu(seed)
        outputs: list[torch.Tensor] | None = None
        if uses_fp64_reference(task) and any(t.is_floating_point() for t in inputs):
            model = instantiate(module, path, seed)
            if params is not None:
                load_params(task, model, params)
            model = model.double()
            wide = [t.detach().to(torch.float64) if t.is_floating_point() else t.detach().clone()
                    for t in inputs]
            try:
                outputs = call_forward(model, assemble_call(task, wide), path)
            except TaskError:
                outputs = None  # the op does not support float64: fall back to the declared precision
        if outputs is None:
            model = instantiate(module, path, seed)
            if params is not None:
                load_params(task, model, params)
            outputs = call_forward(model, assemble_call(task, [t.detach().clone() for t in inputs]), path)
    if len(outputs) != len(task.outputs):
        raise TaskError(f"{path}: reference forward() returned {len(outputs)} tensors, "
                        f"the task declares {len(task.outputs)}")
    result = [o.detach().to(torch_dtype(spec.dtype)).contiguous()
              for spec, o in zip(task.outputs, outputs, strict=True)]
    check_tensors(task, task.outputs, result, full, "reference forward()")
    return result


def declared_precision_outputs(task: Task, inputs: Sequence[torch.Tensor],
                               sizes: Mapping[str, int] | None = None, *,
                               seed: int = 0) -> list[torch.Tensor] | None:
    """The reference computed the way PyTorch itself computes it in the task's declared dtypes
    (the same seeded parameters as `reference_outputs` under `seed`), or None when that run
    fails. The harness uses its distance from the float64 reference as the accuracy an honest
    kernel in the declared precision can be expected to reach."""
    if (child := _confined(task)) is not None:
        return confine.declared_precision_outputs(child, task, inputs, sizes, seed)
    full = sizes_from_inputs(task, inputs, sizes)
    module = task_module(task)
    try:
        with bound_sizes(module, task.binding(full)), torch.random.fork_rng(devices=[]), torch.no_grad():
            seed_cpu(seed)
            model = instantiate(module, task.source_path, seed)
            outputs = call_forward(model, assemble_call(task, [t.detach().clone() for t in inputs]),
                                   task.source_path)
    except TaskError:
        return None
    if len(outputs) != len(task.outputs):
        return None
    return [o.detach().to(torch_dtype(spec.dtype)).contiguous()
            for spec, o in zip(task.outputs, outputs, strict=True)]


def init_arguments(task: Task, sizes: Mapping[str, int] | None = None) -> list[Any]:
    """`get_init_inputs()` with the size symbols bound to `sizes`: the arguments `Model` and a
    KernelBench-style `ModelNew` are constructed with."""
    if (child := _confined(task)) is not None:
        return confine.init_arguments(child, task, sizes)
    module = task_module(task)
    with bound_sizes(module, task.binding(full_sizes(task, sizes))):
        return call_init_inputs(module, task.source_path)


def param_tensors(task: Task, sizes: Mapping[str, int] | None = None, seed: int = 0) -> list[torch.Tensor]:
    """The model's parameters and buffers at `sizes` under `seed`, contiguous, in `task.params` order."""
    if not task.params:
        return []
    if (child := _confined(task)) is not None:
        return confine.param_tensors(child, task, sizes, seed)
    full = full_sizes(task, sizes)
    model = make_model(task, full, seed)
    by_name = dict(model_tensors(model))
    out = []
    for spec in task.params:
        t = by_name.get(spec.origin)
        if t is None:
            raise TaskError(f"{task.source_path}: the model has no parameter or buffer {spec.origin!r} now")
        out.append(t.detach().clone().contiguous())
    check_tensors(task, task.params, out, full, "model parameters")
    return out


def reference_work(task: Task, sizes: Mapping[str, int]) -> tuple[int, int]:
    """(bytes moved, FLOPs) of one call at `sizes`: the real inputs and parameters are built (seed
    0) and the reference runs once under FlopCounterMode, in the process that runs the task's code
    (a FLOP counter here would see nothing of a forward run in the task sandbox)."""
    if (child := _confined(task)) is not None:
        return confine.reference_work(child, task, sizes)
    from torch.utils.flop_counter import FlopCounterMode

    from sagekernel.tasks.inputs import build_inputs

    inputs = build_inputs(task, sizes, 0, "default")
    params = param_tensors(task, sizes, 0) if task.params else []
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        outputs = reference_outputs(task, inputs, sizes)
    moved = sum(t.numel() * t.element_size() for t in [*inputs, *params])
    # outputs in their declared element type (the float64 reference is cast back already)
    moved += sum(t.numel() * t.element_size() for t in outputs)
    return int(moved), int(counter.get_total_flops())


def trial_tensors(task: Task, sizes: Mapping[str, int], seed: int, distribution: str, param_seed: int
                  ) -> TrialTensors:
    """One correctness trial's (inputs, parameters, float64-derived references, declared-precision
    outputs): `build_inputs` under `seed`, the rest under `param_seed`; in the task sandbox one
    request instead of four."""
    if (child := _confined(task)) is not None:
        return confine.trial_tensors(child, task, sizes, seed, distribution, param_seed)
    from sagekernel.tasks.inputs import build_inputs

    inputs = build_inputs(task, sizes, seed, distribution)
    params = param_tensors(task, sizes, param_seed) if task.params else []
    expected = reference_outputs(task, inputs, sizes, seed=param_seed)
    return inputs, params, expected, declared_precision_outputs(task, inputs, sizes, seed=param_seed)


def input_sets(task: Task, sizes: Mapping[str, int], seeds: Sequence[int],
               param_seeds: Sequence[int]) -> list[list[torch.Tensor]]:
    """Per seed, the default-distribution inputs under it and the parameters under its param seed
    (the timed calls' input sets); in the task sandbox one request for all of them."""
    if (child := _confined(task)) is not None:
        return confine.input_sets(child, task, sizes, seeds, param_seeds)
    from sagekernel.tasks.inputs import build_inputs

    return [[*build_inputs(task, sizes, seed, "default"), *param_tensors(task, sizes, p)]
            for seed, p in zip(seeds, param_seeds, strict=True)]


def checked_outputs(task: Task, inputs: Sequence[torch.Tensor], sizes: Mapping[str, int],
                    seed: int) -> tuple[list[torch.Tensor], list[torch.Tensor] | None]:
    """`reference_outputs` and `declared_precision_outputs` of `inputs` under `seed` (a timed
    call's recheck); in the task sandbox one request for both."""
    if (child := _confined(task)) is not None:
        return confine.checked_outputs(child, task, inputs, sizes, seed)
    expected = reference_outputs(task, inputs, sizes, seed=seed)
    return expected, declared_precision_outputs(task, inputs, sizes, seed=seed)
