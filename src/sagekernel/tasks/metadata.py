"""``SAGE_TASK`` metadata: validating it against one run of the file, and the Task it describes.

The format is in `sagekernel.tasks.task`'s docstring. Every problem is a `TaskError` whose message
starts with the file path. A model with parameters must have each parameter dim equal to exactly
one declared size (`_declared_params`), so the kernel contract can name it.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from sagekernel.errors import TaskError
from sagekernel.tasks.coverage import COVERAGE_KEYS, Coverage, parse_coverage
from sagekernel.tasks.inputs import call_forward, call_get_inputs, check_tensors, dtype_name, instantiate
from sagekernel.tasks.modules import bound_sizes, module_ints
from sagekernel.tasks.task import SUPPORTED_DTYPES, Task, TensorSpec

REQUIRED_KEYS = ("name", "level", "category", "inputs", "outputs", "sizes")
OPTIONAL_KEYS = ("description", "attrs", "variants", "dtype", "atol", "rtol", "fp64_reference",
                 "structured_inputs", *COVERAGE_KEYS)

#: C keywords and names a kernel parameter must not take.
_C_RESERVED = frozenset((
    # C99 keywords and common macros/typedefs
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum",
    "extern", "float", "for", "goto", "if", "inline", "int", "long", "register", "restrict", "return",
    "short", "signed", "sizeof", "static", "struct", "switch", "typedef", "union", "unsigned", "void",
    "volatile", "while", "_Bool", "_Complex", "bool", "true", "false", "NULL", "INFINITY", "NAN",
    "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t", "size_t",
    "sage_kernel", "main",
    # <math.h> functions a kernel may need: a parameter must not shadow them
    "sin", "cos", "tan", "exp", "exp2", "expm1", "log", "log2", "log1p", "log10", "sqrt", "pow", "fabs",
    "floor", "ceil", "round", "rint", "erf", "erfc", "tanh", "fmax", "fmin", "fma",
    "sinf", "cosf", "expf", "logf", "sqrtf", "powf", "fabsf", "erff", "tanhf", "fmaxf", "fminf",
))
METADATA_NOTE = "level and category from SAGE_TASK"
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_TASK_NAME = re.compile(r"^[a-z0-9][a-z0-9_]*$")


def _fail(path: Path, message: str) -> TaskError:
    return TaskError(f"{path}: {message}")


def safe_identifier(wanted: str, taken: set[str], fallback: str) -> str:
    """`wanted` if it is a usable C parameter name not in `taken`, else a prefixed/fallback name."""
    name = wanted if _IDENT.match(wanted) and wanted not in _C_RESERVED and not keyword.iskeyword(wanted) \
        else fallback
    if name in taken or name in _C_RESERVED:
        name = f"attr_{name}"
    while name in taken:
        name += "_"
    return name


def _check_identifier(path: Path, name: object, what: str) -> str:
    if not isinstance(name, str) or not _IDENT.match(name):
        raise _fail(path, f"{what} {name!r} is not a valid C identifier")
    if name in _C_RESERVED or keyword.iskeyword(name):
        raise _fail(path, f"{what} {name!r} is a reserved word in C or Python")
    return name


def _specs(path: Path, raw: object, key: str, sizes: Mapping[str, int]) -> list[tuple[str, tuple[str, ...]]]:
    if not isinstance(raw, dict) or (key == "outputs" and not raw):
        raise _fail(path, f"SAGE_TASK[{key!r}] must be a dict of name -> list of size symbols"
                    + (" with at least one output" if key == "outputs" else ""))
    specs = []
    for name, dims in raw.items():
        _check_identifier(path, name, f"{key[:-1]} name")
        if not isinstance(dims, (list, tuple)) or not all(isinstance(d, str) for d in dims):
            raise _fail(path, f"SAGE_TASK[{key!r}][{name!r}] must be a list of size symbols, got {dims!r}")
        for d in dims:
            if d not in sizes:
                raise _fail(path, f"{key[:-1]} {name!r} uses size symbol {d!r}, which is not declared "
                            f"in SAGE_TASK['sizes'] ({', '.join(sizes) or 'none declared'})")
        specs.append((name, tuple(dims)))
    return specs


def _number(path: Path, meta: Mapping[str, Any], key: str, default: float) -> float:
    value = meta.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or value != value:
        raise _fail(path, f"SAGE_TASK[{key!r}] must be a non-negative number, got {value!r}")
    return float(value)


def _validate_meta(path: Path, module: ModuleType, meta: object) -> dict[str, Any]:
    """Static checks of SAGE_TASK; returns a normalised copy."""
    if not isinstance(meta, dict):
        raise _fail(path, f"SAGE_TASK must be a dict, got {type(meta).__name__}")
    unknown = sorted(set(meta) - set(REQUIRED_KEYS) - set(OPTIONAL_KEYS))
    if unknown:
        raise _fail(path, f"SAGE_TASK has unknown keys {unknown} (allowed: "
                    f"{', '.join(REQUIRED_KEYS + OPTIONAL_KEYS)})")
    missing = [k for k in REQUIRED_KEYS if k not in meta]
    if missing:
        raise _fail(path, f"SAGE_TASK is missing required keys {missing}")

    name = meta["name"]
    if not isinstance(name, str) or not _TASK_NAME.match(name):
        raise _fail(path, f"SAGE_TASK['name'] must be lowercase letters, digits and '_', got {name!r}")
    level = meta["level"]
    if isinstance(level, bool) or not isinstance(level, int) or not 1 <= level <= 3:
        raise _fail(path, f"SAGE_TASK['level'] must be 1, 2 or 3, got {level!r}")
    category = meta["category"]
    if not isinstance(category, str) or not category.strip():
        raise _fail(path, f"SAGE_TASK['category'] must be a non-empty string, got {category!r}")
    description = meta.get("description", "")
    if not isinstance(description, str):
        raise _fail(path, "SAGE_TASK['description'] must be a string")

    sizes = meta["sizes"]
    if not isinstance(sizes, dict):
        raise _fail(path, "SAGE_TASK['sizes'] must be a dict of symbol -> default int")
    ints = module_ints(module)
    for sym, value in sizes.items():
        _check_identifier(path, sym, "size symbol")
        if type(value) is not int or value <= 0:
            raise _fail(path, f"size {sym} must default to a positive int, got {value!r}")
        if sym not in ints:
            raise _fail(path, f"size symbol {sym!r} has no module-level int {sym} = {value} "
                        "(get_inputs() must read the symbol so the harness can rebind it)")
        if ints[sym] != value:
            raise _fail(path, f"size {sym} defaults to {value} in SAGE_TASK['sizes'] but the module "
                        f"sets {sym} = {ints[sym]}")

    inputs = _specs(path, meta["inputs"], "inputs", sizes)
    outputs = _specs(path, meta["outputs"], "outputs", sizes)

    attrs = meta.get("attrs", {})
    if not isinstance(attrs, dict):
        raise _fail(path, "SAGE_TASK['attrs'] must be a dict of name -> scalar")
    for key, value in attrs.items():
        _check_identifier(path, key, "attr name")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _fail(path, f"attr {key!r} must be an int or float scalar, got {value!r}")

    names = [n for n, _ in inputs] + [n for n, _ in outputs] + list(sizes) + list(attrs)
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise _fail(path, f"names used twice among inputs, outputs, sizes and attrs: {dupes}")

    variants = meta.get("variants", [])
    if not isinstance(variants, list):
        raise _fail(path, "SAGE_TASK['variants'] must be a list of dicts")
    for i, variant in enumerate(variants):
        if not isinstance(variant, dict) or not variant:
            raise _fail(path, f"variant {i} must be a non-empty dict of symbol -> int, got {variant!r}")
        for sym, value in variant.items():
            if sym not in sizes:
                raise _fail(path, f"variant {i} overrides unknown size symbol {sym!r} "
                            f"(known: {', '.join(sizes)})")
            if type(value) is not int or value <= 0:
                raise _fail(path, f"variant {i}: {sym} must be a positive int, got {value!r}")

    dtype = meta.get("dtype")
    if dtype is not None and dtype not in SUPPORTED_DTYPES:
        raise _fail(path, f"SAGE_TASK['dtype'] {dtype!r} is not supported (supported: "
                    f"{', '.join(SUPPORTED_DTYPES)})")
    structured = meta.get("structured_inputs", [])
    if not isinstance(structured, list) or any(n not in dict(inputs) for n in structured):
        raise _fail(path, f"SAGE_TASK['structured_inputs'] must list input names "
                    f"({', '.join(n for n, _ in inputs)}), got {structured!r}")
    fp64 = meta.get("fp64_reference", True)
    if not isinstance(fp64, bool):
        raise _fail(path, "SAGE_TASK['fp64_reference'] must be True or False")
    coverage = parse_coverage(path, meta, sizes, attrs, [n for n, _ in inputs], list(structured))
    return {
        "name": name, "level": level, "category": category.strip(), "description": description,
        "sizes": dict(sizes), "inputs": inputs, "outputs": outputs, "attrs": dict(attrs),
        "variants": [dict(v) for v in variants], "dtype": dtype, "coverage": coverage,
        "atol": _number(path, meta, "atol", 1e-2), "rtol": _number(path, meta, "rtol", 1e-2),
    }


def _observed_dtypes(path: Path, tensors: list[torch.Tensor], names: list[str], what: str) -> list[str]:
    dtypes = []
    for name, t in zip(names, tensors, strict=True):
        dt = dtype_name(t.dtype)
        if dt not in SUPPORTED_DTYPES:
            raise _fail(path, f"{what} {name!r} has unsupported dtype {dt} "
                        f"(supported: {', '.join(SUPPORTED_DTYPES)})")
        dtypes.append(dt)
    return dtypes


def task_from_metadata(path: Path, module: ModuleType, raw_meta: object) -> Task:
    meta = _validate_meta(path, module, raw_meta)
    in_names = [n for n, _ in meta["inputs"]]
    out_names = [n for n, _ in meta["outputs"]]
    with bound_sizes(module, meta["sizes"]), torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        inputs = call_get_inputs(module, path)
        if len(inputs) != len(in_names):
            raise _fail(path, f"get_inputs() returns {len(inputs)} tensors but SAGE_TASK['inputs'] declares "
                        f"{len(in_names)} ({', '.join(in_names) or 'none'})")
        in_dtypes = _observed_dtypes(path, inputs, in_names, "input")
        model = instantiate(module, path)
        outputs = call_forward(model, [t.clone() for t in inputs], path)
        if len(outputs) != len(out_names):
            raise _fail(path, f"forward() returns {len(outputs)} tensors but SAGE_TASK['outputs'] declares "
                        f"{len(out_names)} ({', '.join(out_names)})")
        out_dtypes = _observed_dtypes(path, outputs, out_names, "output")

    task = Task(
        name=meta["name"], level=meta["level"], category=meta["category"],
        description=meta["description"], source_path=path,
        inputs=[TensorSpec(n, d, t) for (n, d), t in zip(meta["inputs"], in_dtypes, strict=True)],
        outputs=[TensorSpec(n, d, t) for (n, d), t in zip(meta["outputs"], out_dtypes, strict=True)],
        attrs=meta["attrs"], sizes=meta["sizes"], variants=meta["variants"],
        dtype=meta["dtype"] or _main_dtype(in_dtypes, out_dtypes),
        atol=meta["atol"], rtol=meta["rtol"], layout_note=METADATA_NOTE, coverage=meta["coverage"],
    )
    task.params = _declared_params(task, model)
    check_tensors(task, task.inputs, inputs, task.sizes, "get_inputs() at the default sizes")
    check_tensors(task, task.outputs, outputs, task.sizes, "forward() at the default sizes")
    for i, shape in enumerate(task.all_shapes()[1:]):
        _check_variant(task, module, shape, f"variant {i} {task.variants[i]}")
    _check_coverage(task, module, meta["coverage"])
    return task


def _check_coverage(task: Task, module: ModuleType, coverage: Coverage) -> None:
    """The dynamic part of the coverage declarations: every attribute domain binds a module
    variable holding the attr's value, and `make_inputs` accepts every named edge case."""
    path = task.source_path
    for name, dom in coverage.attr_domains.items():
        current = getattr(module, dom.bind, None)
        if isinstance(current, bool) or not isinstance(current, (int, float)) or current != task.attrs[name]:
            raise _fail(path, f"attr_domains[{name!r}] binds module variable {dom.bind!r}, which must be a "
                        f"module-level number equal to the attr ({task.attrs[name]}) that get_init_inputs() "
                        f"reads; found {current!r}")
    if coverage.edge_cases:
        make = getattr(module, "make_inputs", None)
        if not callable(make):
            raise _fail(path, "SAGE_TASK['edge_cases'] needs make_inputs(sizes, gen, name) to build them")
        for edge in coverage.edge_cases:
            try:
                with bound_sizes(module, task.sizes):
                    make(dict(task.sizes), torch.Generator().manual_seed(0), edge)
            except Exception as exc:
                raise _fail(path, f"make_inputs() cannot build edge case {edge!r}: "
                            f"{type(exc).__name__}: {exc}") from exc


def _declared_params(task: Task, model: torch.nn.Module) -> list[TensorSpec]:
    """The model's parameters for a SAGE_TASK file: each dim must equal exactly one declared size."""
    from sagekernel.tasks.params import model_tensors, param_name

    specs = []
    taken = {s.name for s in task.inputs + task.outputs} | set(task.sizes) | set(task.attrs)
    for dotted, t in model_tensors(model):
        dims = []
        for j, n in enumerate(t.shape):
            matches = [s for s, v in task.sizes.items() if v == n]
            if len(matches) != 1:
                raise _fail(task.source_path, f"model parameter {dotted} dim {j} is {n}, which "
                            f"{'no' if not matches else 'more than one'} size in SAGE_TASK['sizes'] equals; "
                            "declare a size symbol for it (with a distinct default)")
            dims.append(matches[0])
        name = param_name(dotted, taken)
        taken.add(name)
        specs.append(TensorSpec(name, tuple(dims), dtype_name(t.dtype), origin=dotted))
    return specs


def _check_variant(task: Task, module: ModuleType, sizes: dict[str, int], what: str) -> None:
    """The file must honour a variant: rebinding the symbols changes the shapes as the dims say."""
    path = task.source_path
    with bound_sizes(module, sizes), torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        try:
            inputs = call_get_inputs(module, path)
            check_tensors(task, task.inputs, inputs, sizes, f"get_inputs() at {what}")
            model = instantiate(module, path)
            outputs = call_forward(model, inputs, path)
            check_tensors(task, task.outputs, outputs, sizes, f"forward() at {what}")
            if task.params:
                from sagekernel.tasks.params import model_tensors

                check_tensors(task, task.params, [t for _, t in model_tensors(model)], sizes,
                              f"model parameters at {what}")
        except TaskError as exc:
            raise TaskError(f"{exc} (does the file read every size symbol at call time?)") from exc


def _main_dtype(in_dtypes: list[str], out_dtypes: list[str]) -> str:
    for dt in in_dtypes + out_dtypes:
        if dt in ("float32", "float64", "float16", "bfloat16"):
            return dt
    return (in_dtypes + out_dtypes)[0]
