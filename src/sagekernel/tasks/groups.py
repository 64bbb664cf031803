"""Tasks whose inputs come from ``get_input_groups()`` (NPUKernelBench style).

Such a file returns several input sets, often read from a JSON file of cases next to it, possibly
of different shapes and dtypes, with non-tensor forward arguments (a normalized shape as a list,
an epsilon, ``None`` for an absent optional tensor). Each group may be a list of arguments or a
dict ``{"name": ..., "inputs": [...]}``.

The inferred task has one `InputGroup` per group. Its sizes are named by position so that every
group's contract has the same parameter names: input i's dim j is ``IN<i>_D<j>``; an output dim
that equals the same input dim in every group reuses that symbol, else it is ``OUT<i>_D<j>``.
Model parameters are shared by all groups, their dims are constants ``C<n>``. Group 0 is also the
task's own inputs/outputs/sizes (what a single-group harness sees); `Task.group_tasks()` gives one
task per group, which the harness checks and times one by one.

Shapes come from the cases, so the size policy cannot scale them: a group over the CPU budget is
left out and the task's `size_note` lists it (the file is rejected when every group is over it).
Its tensors are never allocated: ``get_input_groups()`` runs under `budget.oversized_on_meta`.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import torch

from sagekernel.errors import TaskError
from sagekernel.tasks.budget import budget_text, max_bytes
from sagekernel.tasks.infer import (
    DEFAULT_TOLERANCE,
    checked_dtype,
    forward_param_names,
    forward_specs,
    infer_attrs,
    task_docstring,
)
from sagekernel.tasks.inputs import (
    call_forward,
    call_init_inputs,
    call_input_groups,
    flat_tensors,
    instantiate,
)
from sagekernel.tasks.params import model_tensors, param_specs
from sagekernel.tasks.task import InputGroup, Task, TensorSpec


def _copy_arg(a: object) -> object:
    """A forward argument the reference may modify in place, copied (tensors and tensor lists)."""
    if isinstance(a, torch.Tensor):
        return a.clone()
    if isinstance(a, (list, tuple)) and a and all(isinstance(x, torch.Tensor) for x in a):
        return [x.clone() for x in a]
    return a


def infer_group_task(path: Path, module: ModuleType, name: str, level: int, category: str,
                     layout_note: str) -> Task:
    # An over-budget group is built without storage (budget.oversized_on_meta) and left out
    # below by its size, so one huge case no longer costs the file its other cases.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        raw_groups = call_input_groups(module, path)
        init = call_init_inputs(module, path)
        model = instantiate(module, path)
        runs = []
        dropped = []
        for index, (gname, args) in enumerate(raw_groups):
            tensors = flat_tensors(args)
            nbytes = sum(t.numel() * t.element_size() for t in tensors)
            if nbytes > max_bytes():
                dropped.append(f"{gname} ({nbytes / 2**20:.1f} MiB)")
                continue
            outs = call_forward(model, [_copy_arg(a) for a in args], path)
            runs.append((index, gname, args, tensors, outs))
    if not runs:
        raise TaskError(f"{path}: every input group is over the CPU budget ({budget_text()}): "
                        f"{', '.join(dropped)}; add smaller cases")

    param_names = forward_param_names(module)
    attrs = infer_attrs(module, init, set(), set())
    pshapes = {n: tuple(t.shape) for n, t in model_tensors(model)}
    const_sizes: dict[str, int] = {}
    pdims = {}
    for dotted, shape in pshapes.items():
        pdims[dotted] = tuple(f"C{n}" for n in shape)
        const_sizes.update({f"C{n}": n for n in shape})

    # Output dims that equal one input dim in every group share its symbol.
    # Groups may differ in how many tensors they take and return (a Foreach list of 2 in one case,
    # of 3 in another); output dims are linked to input dims only when every group returns as many.
    n_out = len(runs[0][4])
    same_count = all(len(r[4]) == n_out for r in runs)
    out_links: dict[tuple[int, int], str] = {}
    for i in range(n_out if same_count else 0):
        for j in range(runs[0][4][i].dim()):
            for si, t in enumerate(runs[0][3]):
                found = None
                for dj in range(t.dim()):
                    if all(si < len(r[3]) and dj < r[3][si].dim() and j < r[4][i].dim()
                           and r[4][i].shape[j] == r[3][si].shape[dj] for r in runs):
                        found = f"IN{si}_D{dj}"
                        break
                if found:
                    out_links[(i, j)] = found
                    break

    groups: list[InputGroup] = []
    for index, gname, args, tensors, outs in runs:
        sizes: dict[str, int] = {}
        inputs = []
        for i, t in enumerate(tensors):
            dims = []
            for j, n in enumerate(t.shape):
                sizes[f"IN{i}_D{j}"] = int(n)
                dims.append(f"IN{i}_D{j}")
            inputs.append(TensorSpec(f"in{i}", tuple(dims), checked_dtype(path, t, f"{gname} input in{i}")))
        outputs = []
        for i, o in enumerate(outs):
            dims = []
            for j, n in enumerate(o.shape):
                sym = out_links.get((i, j), f"OUT{i}_D{j}")
                sizes.setdefault(sym, int(n))
                dims.append(sym)
            dtype = checked_dtype(path, o, f"{gname} output out{i}")
            outputs.append(TensorSpec(f"out{i}", tuple(dims), dtype))
        sizes.update(const_sizes)
        taken = {s.name for s in inputs + outputs} | set(sizes) | set(attrs)
        fargs, arg_attrs = forward_specs(list(args), param_names, taken)
        groups.append(InputGroup(gname, inputs, outputs, sizes, {**attrs, **arg_attrs}, fargs, index))

    g0 = groups[0]
    taken = {s.name for s in g0.inputs + g0.outputs} | set(g0.sizes) | set(g0.attrs)
    params = param_specs(model, pdims, taken, lambda t, what: checked_dtype(path, t, what))
    dtypes = [s.dtype for s in g0.inputs + g0.outputs]
    main = next((d for d in dtypes if d in ("float32", "float64", "float16", "bfloat16")), dtypes[0])
    doc = task_docstring(module)
    note = f"{len(groups)} input group(s) at the sizes the file gives"
    if dropped:
        note += f"; left out as over the CPU budget ({budget_text()}): {', '.join(dropped)}"
    tol = DEFAULT_TOLERANCE  # fp16/bf16 outputs are compared after rounding the fp64 reference to them
    return Task(
        name=name, level=level, category=category,
        description=doc.strip().splitlines()[0] if doc.strip() else "", source_path=path,
        inputs=list(g0.inputs), outputs=list(g0.outputs), attrs=dict(g0.attrs), sizes=dict(g0.sizes),
        variants=[], dtype=main, atol=tol, rtol=tol, params=params,
        forward_args=list(g0.forward_args), groups=groups, group_index=None,
        size_note=note, layout_note=layout_note,
    )
