"""Metadata inference for plain KernelBench files (no ``SAGE_TASK``).

- name: the file stem without KernelBench's numeric prefix, lower-cased (``19_ReLU.py`` -> ``relu``);
- level and category: from the directory layout (tasks/layout.py); without a category folder, a
  keyword heuristic on the name (`guess_category`); without a level folder, level 1 (noted);
- sizes: the module-level ints, scaled down by the size policy when the published shapes do not
  fit a CPU machine (tasks/sizepolicy.py);
- inputs ``in0..`` (the tensors of ``get_inputs()``), outputs ``out0..``; dtypes observed from one
  seeded run. Python numbers, lists of numbers and ``None`` among ``get_inputs()`` become
  `ForwardArg`s: numbers and list elements are passed to kernels as attrs named after ``forward``'s
  parameters, ``None`` is passed as nothing;
- params: the Model's parameters and buffers (tasks/params.py), dims found like the inputs';
- files with ``get_input_groups()`` are inferred per group (tasks/groups.py);
- size symbols: the module-level ints that input shapes actually depend on, found by perturbing each
  int and re-running ``get_inputs()``. A dimension that depends on no symbol gets a constant symbol
  ``C<value>``; one that depends on symbols without equalling one gets a synthetic ``IN<i>_D<j>`` /
  ``OUT<i>_D<j>`` symbol. Synthetic symbols are passed to kernels but cannot be rebound, so an
  inferred task has no variants;
- attrs: scalars returned by ``get_init_inputs()`` that do not follow a size symbol, named after
  ``Model.__init__``'s parameters (a tuple of numbers gives ``name_0``, ``name_1``...), then the
  non-tensor forward arguments;
- tolerance: atol = rtol = 1e-2 (KernelBench's historical default).
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from types import ModuleType

import torch

from sagekernel.errors import TaskError
from sagekernel.tasks.inputs import (
    call_forward,
    call_get_args,
    call_init_inputs,
    dtype_name,
    flat_tensors,
    instantiate,
    is_tensor_list,
)
from sagekernel.tasks.layout import category_of, level_of
from sagekernel.tasks.modules import bound_sizes, module_ints
from sagekernel.tasks.params import model_tensors, param_dims, param_specs
from sagekernel.tasks.sizepolicy import SHAPE_MODES, choose_sizes, shapes_only
from sagekernel.tasks.task import SUPPORTED_DTYPES, ForwardArg, Task, TensorSpec

DEFAULT_TOLERANCE = 1e-2

#: (keywords, category), first match wins; matched against the `_`-separated words of the name.
_CATEGORY_RULES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("loss", "entropy", "kldiv", "kl", "hinge", "huber", "nll", "triplet"), "loss"),
    (("quant", "dequant", "quantize", "dequantize", "int8", "fp8"), "quantization"),
    (("attention", "attn", "rope", "rotary"), "fused"),
    (("norm", "layernorm", "rmsnorm", "groupnorm", "batchnorm", "instancenorm"), "normalization"),
    (("softmax", "logsoftmax", "gelu", "relu", "sigmoid", "tanh", "swish", "silu", "glu", "swiglu", "geglu",
      "elu", "selu", "softplus", "softsign", "hardtanh", "hardsigmoid", "mish", "leaky"), "activation"),
    (("sum", "max", "min", "mean", "argmax", "argmin", "cumsum", "cumprod", "prod", "reduce", "reduction",
      "var", "std", "scan"), "reduction"),
    (("matmul", "gemm", "bmm", "mm", "linear", "multiplication", "matrix"), "matmul"),
    (("conv", "convolution", "conv1d", "conv2d", "conv3d", "transposed"), "convolution"),
    (("pool", "pooling", "maxpool", "avgpool"), "pooling"),
    (("equal", "less", "greater", "compare", "comparison", "eq", "ne", "lt", "gt", "le", "ge"), "comparison"),
    (("isinf", "isfinite", "isnan", "where", "select", "condition"), "condition"),
    (("gather", "scatter", "index", "embedding", "onehot", "take"), "index"),
    (("arange", "eye", "fill", "zeros", "ones", "linspace", "full", "empty"), "tensor_creation"),
)



def task_docstring(module: ModuleType) -> str:
    """The task file's own description: its `Model` class's docstring, else the module's. Only a
    docstring the file wrote counts: `inspect.getdoc` would hand a class without one the
    docstring of `nn.Module` ("Base class for all neural network modules."), and the model would
    be told that is the operator."""
    model = getattr(module, "Model", None)
    own = vars(model).get("__doc__") if isinstance(model, type) else None
    return inspect.cleandoc(own) if isinstance(own, str) else (inspect.getdoc(module) or "")

def guess_category(name: str) -> str:
    """Whole-word keyword match first, then a substring match on keywords of 4+ letters."""
    lowered = name.lower()
    words = set(re.split(r"[_\W]+", lowered))
    for keys, category in _CATEGORY_RULES:
        if words & set(keys):
            return category
    for keys, category in _CATEGORY_RULES:
        if any(len(k) >= 4 and k in lowered for k in keys):
            return category
    return "math"


def name_from_stem(stem: str) -> str:
    """``19_ReLU`` -> ``relu``; ``94_MSELoss`` -> ``mse_loss``; ``23_Conv3d_GELU`` -> ``conv3d_gelu``."""
    name = re.sub(r"^\d+[_\-\s]*", "", stem)
    name = re.sub(r"(?<=[a-z])(?=[A-Z][a-z])", "_", name)  # HingeLoss -> Hinge_Loss, LeakyReLU -> Leaky_ReLU
    name = re.sub(r"(?<=[A-Z])(?=[A-Z][a-z])", "_", name)  # MSELoss -> MSE_Loss, RMSNorm -> RMS_Norm
    name = re.sub(r"[^0-9A-Za-z]+", "_", name).strip("_").lower()
    return name or ("task_" + re.sub(r"[^0-9a-z]+", "_", stem.lower()).strip("_"))


def layout_fields(path: Path, name: str, root: Path | None) -> tuple[int, str, str]:
    """(level, category, note) from the directory layout, falling back as the module docstring says."""
    level = level_of(path, root)
    category = category_of(path, root)
    notes = []
    if level is None:
        level = 1
        notes.append("no level folder (level1/ .. level3/): level 1 assumed")
    else:
        notes.append("level from the folder")
    if category is None:
        category = guess_category(name)
        notes.append("category guessed from the name")
    else:
        notes.append("category from the folder")
    return level, category, "; ".join(notes)


def _shapes(tensors: list[torch.Tensor]) -> list[tuple[int, ...]]:
    return [tuple(t.shape) for t in tensors]


def _tensors(args: list[object]) -> list[torch.Tensor]:
    return flat_tensors(args)


def forward_param_names(module: ModuleType) -> list[str]:
    """Names of ``Model.forward``'s positional parameters after ``self``."""
    cls = getattr(module, "Model", None)
    try:
        sig = inspect.signature(cls.forward)  # type: ignore[union-attr]
    except (TypeError, ValueError, AttributeError):
        return []
    names = [p.name for p in sig.parameters.values()
             if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return names[1:]


def forward_specs(args: list[object], param_names: list[str], taken: set[str]) -> tuple[
        list[ForwardArg], dict[str, float | int]]:
    """`ForwardArg`s for one argument list, and the attrs its numbers and lists become."""
    from sagekernel.tasks.metadata import safe_identifier

    specs: list[ForwardArg] = []
    attrs: dict[str, float | int] = {}
    k = 0
    for pos, a in enumerate(args):
        if isinstance(a, torch.Tensor):
            specs.append(ForwardArg("tensor", f"in{k}"))
            k += 1
            continue
        wanted = param_names[pos] if pos < len(param_names) else f"arg{pos}"
        name = safe_identifier(wanted, taken | set(attrs), f"arg{pos}")
        if is_tensor_list(a):  # inputs in{k} .. in{k+n-1}, regrouped into one list for forward()
            specs.append(ForwardArg("tensors", name, len(a)))  # type: ignore[arg-type]
            k += len(a)  # type: ignore[arg-type]
        elif isinstance(a, str):
            specs.append(ForwardArg("string", name, a))
        elif a is None:
            specs.append(ForwardArg("none", name))
        elif isinstance(a, (list, tuple)):
            specs.append(ForwardArg("list", name, tuple(a)))
            for j, x in enumerate(a):
                attrs[f"{name}_{j}"] = int(x) if isinstance(x, bool) else x
        else:
            specs.append(ForwardArg("scalar", name, a))  # type: ignore[arg-type]
            attrs[name] = int(a) if isinstance(a, bool) else a  # type: ignore[assignment]
    if all(s.kind == "tensor" for s in specs):
        return [], {}
    return specs, attrs


def _perturbations(value: int) -> list[int]:
    return [value + 1, value * 2] if value > 0 else [value + 1, value + 2]


def infer_task(path: Path, module: ModuleType, root: Path | None = None) -> Task:
    """Build a `Task` for a plain KernelBench file by observation (see module docstring); a file
    with `get_input_groups` is a group task (tasks/groups.py, chosen by the loader)."""
    name = name_from_stem(path.stem)
    level, category, layout_note = layout_fields(path, name, root)
    published = module_ints(module)
    ints, tuples, size_note = choose_sizes(path, module, published)
    binding: dict[str, int | tuple[int, ...]] = {**tuples, **ints}
    with bound_sizes(module, binding), torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        base_args = call_get_args(module, path)
        base_inputs = _tensors(base_args)
        base_init = call_init_inputs(module, path)
        model = instantiate(module, path)
        base_outputs = call_forward(model, [a.clone() if isinstance(a, torch.Tensor) else a
                                            for a in base_args], path)
        base_params = {n: tuple(t.shape) for n, t in model_tensors(model)}
    base_in = _shapes(base_inputs)
    base_out = _shapes(base_outputs)

    # Which module ints do the input shapes, the init inputs and the output shapes depend on?
    in_deps: dict[str, set[tuple[int, int]]] = {}
    init_changes: dict[str, set[int]] = {}
    perturbed_value: dict[str, int] = {}
    for sym, value in ints.items():
        for trial in _perturbations(value):
            probe = _probe_inputs(path, module, {**binding, sym: trial})
            if probe is None:
                continue
            shapes, init = probe
            perturbed_value[sym] = trial
            changed = {(i, j) for i, (a, b) in enumerate(zip(base_in, shapes, strict=False))
                       for j in range(min(len(a), len(b))) if a[j] != b[j]}
            ranks_differ = any(len(a) != len(b) for a, b in zip(base_in, shapes, strict=False))
            if len(shapes) != len(base_in) or ranks_differ:
                changed.add((-1, -1))  # rank/count change: still a size symbol, just not a plain dim
            if changed:
                in_deps[sym] = changed
            init_changed = {k for k, (a, b) in enumerate(zip(base_init, init, strict=False)) if a != b}
            if init_changed:
                init_changes[sym] = init_changed
            break

    # An int that only reaches Model.__init__ (e.g. out_features) is a size when it changes the outputs
    # or the parameters' shapes.
    out_deps: dict[str, list[tuple[int, ...]]] = {}
    param_deps: dict[str, dict[str, tuple[int, ...]]] = {}
    for sym in init_changes:
        shapes_out, shapes_params = _perturbed_run(path, module, binding, sym, perturbed_value[sym])
        if shapes_params is not None and shapes_params != base_params:
            param_deps[sym] = shapes_params
        if sym not in in_deps and shapes_out is not None and shapes_out != base_out:
            out_deps[sym] = shapes_out
    size_syms = [s for s in ints if s in in_deps or s in out_deps or s in param_deps]
    init_follow = set().union(*(init_changes.get(s, set()) for s in size_syms))

    sizes: dict[str, int] = {s: ints[s] for s in size_syms}
    in_specs: list[tuple[str, tuple[str, ...]]] = []
    for i, shape in enumerate(base_in):
        dims = []
        for j, n in enumerate(shape):
            deps = [s for s, ch in in_deps.items() if (i, j) in ch]
            if len(deps) == 1 and sizes[deps[0]] == n:
                dims.append(deps[0])
            elif not deps:
                dims.append(_constant_symbol(sizes, n))
            else:
                sym = f"IN{i}_D{j}"
                sizes[sym] = n
                dims.append(sym)
        in_specs.append((f"in{i}", tuple(dims)))

    out_specs: list[tuple[str, tuple[str, ...]]] = []
    for i, shape in enumerate(base_out):
        dims = []
        for j, n in enumerate(shape):
            matches = [s for s in size_syms if ints[s] == n]
            if len(matches) != 1:
                for sym in size_syms:  # resolve by perturbing the forward pass (once per symbol)
                    if sym not in out_deps:
                        shapes_out, _ = _perturbed_run(path, module, binding, sym, perturbed_value[sym])
                        out_deps[sym] = shapes_out if shapes_out is not None else base_out
                deps = [s for s in size_syms if _out_dim_changed(out_deps[s], base_out, i, j)]
                matches = [s for s in deps if ints[s] == n]
                if not deps:
                    dims.append(_constant_symbol(sizes, n))
                    continue
            if len(matches) == 1:
                dims.append(matches[0])
            else:
                sym = f"OUT{i}_D{j}"
                sizes[sym] = n
                dims.append(sym)
        out_specs.append((f"out{i}", tuple(dims)))

    for sym in size_syms:  # every size symbol's effect on the parameters, for their dims
        if sym not in param_deps:
            trial = perturbed_value.get(sym, ints[sym] + 1)
            _, shapes_params = _perturbed_run(path, module, binding, sym, trial)
            param_deps[sym] = shapes_params if shapes_params is not None else base_params
    pdims = param_dims(base_params, {s: param_deps[s] for s in size_syms}, sizes,
                       {n: k for k, n in enumerate(base_params)})
    taken = {n for n, _ in in_specs + out_specs} | set(sizes)
    attrs = infer_attrs(module, base_init, init_follow, taken)
    forward_args, arg_attrs = forward_specs(base_args, forward_param_names(module), taken | set(attrs))
    attrs.update(arg_attrs)
    in_dtypes = [checked_dtype(path, t, f"input in{i}") for i, t in enumerate(base_inputs)]
    out_dtypes = [checked_dtype(path, t, f"output out{i}") for i, t in enumerate(base_outputs)]
    params = param_specs(model, pdims, taken | set(attrs),
                         lambda t, what: checked_dtype(path, t, what))
    main = next((d for d in in_dtypes + out_dtypes if d in ("float32", "float64", "float16", "bfloat16")),
                (in_dtypes + out_dtypes)[0])
    doc = task_docstring(module)
    scaled = [k for k in published if ints[k] != published[k]] or list(tuples)
    return Task(
        name=name, level=level, category=category,
        description=doc.strip().splitlines()[0] if doc.strip() else "",
        source_path=path,
        inputs=[TensorSpec(n, d, t) for (n, d), t in zip(in_specs, in_dtypes, strict=True)],
        outputs=[TensorSpec(n, d, t) for (n, d), t in zip(out_specs, out_dtypes, strict=True)],
        attrs=attrs, sizes=sizes, variants=[], dtype=main,
        atol=DEFAULT_TOLERANCE, rtol=DEFAULT_TOLERANCE,
        params=params, forward_args=forward_args,
        published_sizes={k: v for k, v in published.items() if k in sizes} if scaled else {},
        size_note=size_note, layout_note=layout_note, size_tuples=tuples,
        scaled_ints={k: v for k, v in ints.items()
                     if k not in sizes and k in published and v != published[k]},
    )


def _constant_symbol(sizes: dict[str, int], n: int) -> str:
    sym = f"C{n}"
    sizes.setdefault(sym, n)
    return sym


def _probe_inputs(path: Path, module: ModuleType, sizes: dict[str, int | tuple[int, ...]]) -> tuple[
        list[tuple[int, ...]], list[object]] | None:
    """Input shapes and init inputs at `sizes`: on the meta device, else for real (None: fails)."""
    for mode in (*SHAPE_MODES, "cpu"):
        try:
            with bound_sizes(module, sizes), torch.random.fork_rng(devices=[]), shapes_only(mode):
                torch.manual_seed(0)
                return _shapes(_tensors(call_get_args(module, path))), call_init_inputs(module, path)
        except TaskError:
            continue
    return None


def _perturbed_run(path: Path, module: ModuleType, ints: dict[str, int | tuple[int, ...]], sym: str,
                   trial: int) -> tuple[
        list[tuple[int, ...]] | None, dict[str, tuple[int, ...]] | None]:
    """Output shapes and parameter shapes with one module int perturbed, on the meta device, else for
    real (None where the file cannot run that way)."""
    params = None
    for mode in (*SHAPE_MODES, "cpu"):
        try:
            with bound_sizes(module, {**ints, sym: trial}), torch.random.fork_rng(devices=[]), \
                    shapes_only(mode):
                torch.manual_seed(0)
                args = call_get_args(module, path)
                model = instantiate(module, path)
                params = {n: tuple(t.shape) for n, t in model_tensors(model)}
                return _shapes(call_forward(model, args, path)), params
        except TaskError:
            continue
    return None, params


def _out_dim_changed(shapes: list[tuple[int, ...]], base: list[tuple[int, ...]], i: int, j: int) -> bool:
    if i >= len(shapes) or len(shapes[i]) != len(base[i]):
        return True
    return shapes[i][j] != base[i][j]


def infer_attrs(module: ModuleType, init: list[object], follow_sizes: set[int],
                 taken: set[str]) -> dict[str, float | int]:
    cls = getattr(module, "Model", None)
    if cls is None:
        return {}
    try:
        params = [p.name for p in inspect.signature(cls).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    from sagekernel.tasks.metadata import safe_identifier

    attrs: dict[str, float | int] = {}
    for k, value in enumerate(init):
        if k in follow_sizes:
            continue
        wanted = params[k] if k < len(params) else f"arg{k}"
        if isinstance(value, (list, tuple)) and value and all(isinstance(x, (int, float)) for x in value):
            name = safe_identifier(wanted, taken | set(attrs), f"arg{k}")
            for j, x in enumerate(value):
                attrs[f"{name}_{j}"] = int(x) if isinstance(x, bool) else x
            continue
        if not isinstance(value, (int, float)):
            continue  # strings, None, modules ...: the reference uses them, the kernel need not
        name = safe_identifier(wanted, taken | set(attrs), f"arg{k}")
        attrs[name] = int(value) if isinstance(value, bool) else value
    return attrs


def checked_dtype(path: Path, t: torch.Tensor, what: str) -> str:
    dt = dtype_name(t.dtype)
    if dt not in SUPPORTED_DTYPES:
        raise TaskError(f"{path}: {what} has unsupported dtype {dt} "
                        f"(supported: {', '.join(SUPPORTED_DTYPES)})")
    return dt
