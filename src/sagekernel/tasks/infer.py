"""Metadata inference for plain KernelBench files (no ``SAGE_TASK``).

- name: the file stem without KernelBench's numeric prefix, lower-cased (``19_ReLU.py`` -> ``relu``);
- level: from the parent folder (``level1`` .. ``level3`` or ``1`` .. ``3``);
- category: a keyword heuristic on the name (`guess_category`);
- inputs ``in0..``, outputs ``out0..``; dtypes observed from one seeded run;
- size symbols: the module-level ints that input shapes actually depend on, found by perturbing each
  int and re-running ``get_inputs()``. A dimension that depends on no symbol gets a constant symbol
  ``C<value>``; one that depends on symbols without equalling one gets a synthetic ``IN<i>_D<j>`` /
  ``OUT<i>_D<j>`` symbol. Synthetic symbols are passed to kernels but cannot be rebound, so an
  inferred task has no variants;
- attrs: scalars returned by ``get_init_inputs()`` that do not follow a size symbol, named after
  ``Model.__init__``'s parameters;
- tolerance: atol = rtol = 1e-2 (KernelBench's historical default).
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from types import ModuleType

import torch

from sagekernel.errors import TaskError
from sagekernel.tasks.inputs import call_forward, call_get_inputs, call_init_inputs, dtype_name, instantiate
from sagekernel.tasks.modules import bound_sizes, module_ints
from sagekernel.tasks.task import SUPPORTED_DTYPES, Task, TensorSpec

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


def level_from_folder(path: Path) -> int:
    folder = path.parent.name.lower()
    m = re.fullmatch(r"(?:level[_\-]?)?([123])", folder)
    if m is None:
        raise TaskError(f"{path}: no SAGE_TASK metadata and the level cannot be inferred from the folder "
                        f"{path.parent.name!r}: put the file in level1/, level2/ or level3/, "
                        "or add SAGE_TASK")
    return int(m.group(1))


def _shapes(tensors: list[torch.Tensor]) -> list[tuple[int, ...]]:
    return [tuple(t.shape) for t in tensors]


def _perturbations(value: int) -> list[int]:
    return [value + 1, value * 2] if value > 0 else [value + 1, value + 2]


def infer_task(path: Path, module: ModuleType) -> Task:
    """Build a `Task` for a plain KernelBench file by observation (see module docstring)."""
    name = name_from_stem(path.stem)
    level = level_from_folder(path)
    ints = module_ints(module)
    with bound_sizes(module, ints), torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        base_inputs = call_get_inputs(module, path)
        base_init = call_init_inputs(module, path)
        model = instantiate(module, path)
        base_outputs = call_forward(model, [t.clone() for t in base_inputs], path)
    base_in = _shapes(base_inputs)
    base_out = _shapes(base_outputs)

    # Which module ints do the input shapes, the init inputs and the output shapes depend on?
    in_deps: dict[str, set[tuple[int, int]]] = {}
    init_changes: dict[str, set[int]] = {}
    perturbed_value: dict[str, int] = {}
    for sym, value in ints.items():
        for trial in _perturbations(value):
            try:
                with bound_sizes(module, {sym: trial}), torch.random.fork_rng(devices=[]):
                    torch.manual_seed(0)
                    shapes = _shapes(call_get_inputs(module, path))
                    init = call_init_inputs(module, path)
            except TaskError:
                continue
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

    # An int that only reaches Model.__init__ (e.g. out_features) is a size when it changes the outputs.
    out_deps: dict[str, list[tuple[int, ...]]] = {}
    for sym in init_changes:
        if sym not in in_deps:
            shapes_out = _output_shapes(path, module, sym, perturbed_value[sym])
            if shapes_out is not None and shapes_out != base_out:
                out_deps[sym] = shapes_out
    size_syms = [s for s in ints if s in in_deps or s in out_deps]
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
                        shapes_out = _output_shapes(path, module, sym, perturbed_value[sym])
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

    attrs = _infer_attrs(module, base_init, init_follow, {n for n, _ in in_specs + out_specs} | set(sizes))
    in_dtypes = [_checked_dtype(path, t, f"input in{i}") for i, t in enumerate(base_inputs)]
    out_dtypes = [_checked_dtype(path, t, f"output out{i}") for i, t in enumerate(base_outputs)]
    main = next((d for d in in_dtypes + out_dtypes if d in ("float32", "float64", "float16", "bfloat16")),
                (in_dtypes + out_dtypes)[0])
    doc = inspect.getdoc(getattr(module, "Model", None)) or inspect.getdoc(module) or ""
    return Task(
        name=name, level=level, category=guess_category(name),
        description=doc.strip().splitlines()[0] if doc.strip() else "",
        source_path=path,
        inputs=[TensorSpec(n, d, t) for (n, d), t in zip(in_specs, in_dtypes, strict=True)],
        outputs=[TensorSpec(n, d, t) for (n, d), t in zip(out_specs, out_dtypes, strict=True)],
        attrs=attrs, sizes=sizes, variants=[], dtype=main,
        atol=DEFAULT_TOLERANCE, rtol=DEFAULT_TOLERANCE,
    )


def _constant_symbol(sizes: dict[str, int], n: int) -> str:
    sym = f"C{n}"
    sizes.setdefault(sym, n)
    return sym


def _output_shapes(path: Path, module: ModuleType, sym: str, trial: int) -> list[tuple[int, ...]] | None:
    """Output shapes with one module int perturbed (None if the file cannot run that way)."""
    try:
        with bound_sizes(module, {sym: trial}), torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            inputs = call_get_inputs(module, path)
            return _shapes(call_forward(instantiate(module, path), inputs, path))
    except TaskError:
        return None


def _out_dim_changed(shapes: list[tuple[int, ...]], base: list[tuple[int, ...]], i: int, j: int) -> bool:
    if i >= len(shapes) or len(shapes[i]) != len(base[i]):
        return True
    return shapes[i][j] != base[i][j]


def _infer_attrs(module: ModuleType, init: list[object], follow_sizes: set[int],
                 taken: set[str]) -> dict[str, float | int]:
    cls = getattr(module, "Model", None)
    if cls is None:
        return {}
    try:
        params = [p.name for p in inspect.signature(cls).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    attrs: dict[str, float | int] = {}
    for k, value in enumerate(init):
        if k in follow_sizes or not isinstance(value, (int, float)):
            continue
        name = params[k] if k < len(params) else f"arg{k}"
        if name in taken or name in attrs:
            name = f"attr_{name}"
        attrs[name] = int(value) if isinstance(value, bool) else value
    return attrs


def _checked_dtype(path: Path, t: torch.Tensor, what: str) -> str:
    dt = dtype_name(t.dtype)
    if dt not in SUPPORTED_DTYPES:
        raise TaskError(f"{path}: {what} has unsupported dtype {dt} "
                        f"(supported: {', '.join(SUPPORTED_DTYPES)})")
    return dt
