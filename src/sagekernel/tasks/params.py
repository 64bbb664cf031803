"""A task's model parameters and buffers as kernel arguments.

KernelBench's level 2 and every convolution of level 1 keep weights inside ``Model`` (``nn.Linear``,
``nn.Conv2d``, affine norms). A kernel can only match such a reference if it receives the same
weights, so the task records them as `Task.params` (TensorSpecs named after the dotted module path,
``conv.weight`` -> ``conv_weight``, with `TensorSpec.origin` keeping the dotted name) and passes
them after the inputs. The values are those of ``Model(*get_init_inputs())`` built under the
harness's seed, exactly as KernelBench seeds ``Model`` and ``ModelNew`` alike:

    params = reference.param_tensors(task, sizes, seed)               # list[Tensor], task.params order
    refs = reference.reference_outputs(task, inputs, sizes, seed=seed)  # uses exactly those parameters

``num_batches_tracked`` buffers (BatchNorm's step counter, unused by an eval-mode forward) are left
out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import torch

from sagekernel.errors import TaskError
from sagekernel.tasks.task import Task, TensorSpec

_SKIPPED_BUFFERS = ("num_batches_tracked",)


def model_tensors(model: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
    """(dotted name, tensor) for every parameter then every buffer, in registration order."""
    found: list[tuple[str, torch.Tensor]] = list(model.named_parameters())
    found += [(n, b) for n, b in model.named_buffers()
              if b is not None and n.rsplit(".", 1)[-1] not in _SKIPPED_BUFFERS]
    return found


def param_name(dotted: str, taken: set[str]) -> str:
    """``layers.0.weight`` -> ``layers_0_weight``; prefixed ``p_`` when it collides with `taken`."""
    name = re.sub(r"\W", "_", dotted).strip("_") or "param"
    if name[0].isdigit() or name in taken:
        name = "p_" + name
    while name in taken:
        name += "_"
    return name


def load_params(task: Task, model: torch.nn.Module, params: Sequence[torch.Tensor]) -> None:
    """Copy `params` (task.params order) into `model`'s parameters and buffers."""
    if len(params) != len(task.params):
        raise TaskError(f"task {task.name}: got {len(params)} parameter tensors, expected {len(task.params)}")
    by_name = dict(model_tensors(model))
    with torch.no_grad():
        for spec, value in zip(task.params, params, strict=True):
            target = by_name.get(spec.origin)
            if target is None or tuple(target.shape) != tuple(value.shape):
                raise TaskError(f"task {task.name}: parameter {spec.origin} does not match the model")
            target.copy_(value)


def param_dims(base: Mapping[str, tuple[int, ...]], perturbed: Mapping[str, Mapping[str, tuple[int, ...]]],
               sizes: dict[str, int], prefix_index: Mapping[str, int]) -> dict[str, tuple[str, ...]]:
    """Symbolic dims for every parameter.

    `base` is each parameter's shape at `sizes`; `perturbed[sym]` its shapes with one size symbol
    changed. A dim that changes with exactly one symbol and equals it takes that symbol; one that
    changes with none is a constant ``C<n>``; anything else a synthetic ``P<k>_D<j>`` (added to
    `sizes`, like the loader's ``IN<i>_D<j>``).
    """
    dims: dict[str, tuple[str, ...]] = {}
    for dotted, shape in base.items():
        names = []
        for j, n in enumerate(shape):
            deps = [s for s, shapes in perturbed.items()
                    if dotted not in shapes or len(shapes[dotted]) != len(shape) or shapes[dotted][j] != n]
            matches = [s for s in deps if sizes.get(s) == n]
            if not deps:
                sym = f"C{n}"
                sizes.setdefault(sym, n)
            elif len(matches) == 1:
                sym = matches[0]
            else:
                sym = f"P{prefix_index[dotted]}_D{j}"
                sizes[sym] = n
            names.append(sym)
        dims[dotted] = tuple(names)
    return dims


def param_specs(model: torch.nn.Module, dims: Mapping[str, tuple[str, ...]], taken: set[str],
                dtype_of: object) -> list[TensorSpec]:
    """TensorSpecs for the model's tensors; `dtype_of(tensor, what)` checks and names the dtype."""
    specs = []
    used = set(taken)
    for dotted, t in model_tensors(model):
        name = param_name(dotted, used)
        used.add(name)
        dtype = dtype_of(t, f"model parameter {dotted}")  # type: ignore[operator]
        specs.append(TensorSpec(name, dims[dotted], dtype, origin=dotted))
    return specs
