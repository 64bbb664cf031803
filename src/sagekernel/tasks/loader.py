"""Loading task files (format: `sagekernel.tasks.task` docstring) into validated `Task` records.

`load_task(path)` imports one file in isolation, runs its reference once on the default sizes
(seeded) and on every shape variant, and checks the ``SAGE_TASK`` metadata against what the file
actually produces. Files without ``SAGE_TASK`` (plain KernelBench problems) have their metadata
inferred (`sagekernel.tasks.infer`). Every problem becomes a `TaskError` whose message starts with
the file path.

`load_dir(path)` loads every ``*.py`` under a directory (levels as folders: ``level1/``, ``level2/``
...). A broken file is reported in `LoadReport.problems` and never stops the other files loading.

The harness-side helpers (`build_inputs`, `make_model`, `reference_outputs`) live in
`sagekernel.tasks.inputs` and are re-exported here.
"""

from __future__ import annotations

import copy
import keyword
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from sagekernel.errors import TaskError
from sagekernel.tasks.infer import infer_task
from sagekernel.tasks.inputs import (
    DISTRIBUTIONS,
    build_inputs,
    call_forward,
    call_get_inputs,
    check_tensors,
    dtype_name,
    instantiate,
    make_model,
    reference_outputs,
)
from sagekernel.tasks.modules import bound_sizes, device_needed, import_task_module, module_ints, track_opens
from sagekernel.tasks.task import SUPPORTED_DTYPES, Task, TaskNeedsDevice, TensorSpec

__all__ = [
    "DISTRIBUTIONS",
    "LoadProblem",
    "LoadReport",
    "build_inputs",
    "load_dir",
    "load_task",
    "make_model",
    "reference_outputs",
]

#: Hand-written kernels next to a task file: `<stem>.<target>.<ext>`.
REFERENCE_KERNEL_SUFFIXES = {"cpu": ".cpu.c"}

REQUIRED_KEYS = ("name", "level", "category", "inputs", "outputs", "sizes")
OPTIONAL_KEYS = ("description", "attrs", "variants", "dtype", "atol", "rtol", "fp64_reference",
                 "structured_inputs")

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
_TASK_CACHE: dict[tuple[Path, Path | None], tuple[int, Task]] = {}

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_TASK_NAME = re.compile(r"^[a-z0-9][a-z0-9_]*$")


@dataclass(frozen=True)
class LoadProblem:
    """One file that could not be loaded, and why.

    `kind`: "rejected" (the file is wrong, or over budget: the message says how to make it load),
    "needs_device" (it imports or asks for a device this machine lacks), "timeout", "memory" or
    "crashed" (its reference hung, ran out of its memory limit, or killed the loading child).
    """

    path: Path
    message: str
    kind: str = "rejected"
    device: str = ""


@dataclass
class LoadReport:
    """The result of loading a directory: the good tasks and one problem per bad file."""

    root: Path
    tasks: list[Task] = field(default_factory=list)
    problems: list[LoadProblem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


# ----------------------------------------------------------------------------- public API

def load_task(path: Path, root: Path | None = None) -> Task:
    """Load and validate one task file. Raises `TaskError` (message starts with the path);
    `TaskNeedsDevice` when the file needs a device this machine lacks.

    `root` is the directory being loaded: folders between it and the file give level and category
    (tasks/layout.py). This runs the file's code in this process; `sagekernel.tasks.isolate` loads
    untrusted files in a limited child instead.

    Results are cached per file and modification time (each call returns its own copy), so
    loading a suite twice in one process runs the references only once.
    """
    path = Path(path).resolve()
    if path.suffix != ".py":
        raise TaskError(f"{path}: a task file must be a .py file")
    try:
        mtime = path.stat().st_mtime_ns
    except OSError as exc:
        raise TaskError(f"{path}: no such task file") from exc
    key = (path, Path(root).resolve() if root is not None else None)
    cached = _TASK_CACHE.get(key)
    if cached is not None and cached[0] == mtime:
        task = copy.deepcopy(cached[1])
    else:
        task = _load_uncached(path, key[1])
        _TASK_CACHE[key] = (mtime, copy.deepcopy(task))
    task.reference_kernels = find_reference_kernels(path)
    return task


def _load_uncached(path: Path, root: Path | None) -> Task:
    with track_opens(path) as opened:
        try:
            module = import_task_module(path)
            if not hasattr(module, "Model"):
                raise TaskError(f"{path}: defines no Model class (KernelBench convention: "
                                "Model, get_inputs, get_init_inputs)")
            if not hasattr(module, "get_inputs") and not hasattr(module, "get_input_groups"):
                raise TaskError(f"{path}: defines no get_inputs function (or get_input_groups) "
                                "(KernelBench convention: Model, get_inputs, get_init_inputs)")
            meta = getattr(module, "SAGE_TASK", None)
            task = infer_task(path, module, root) if meta is None else _task_from_metadata(path, module, meta)
        except TaskNeedsDevice:
            raise
        except TaskError as exc:
            device = device_needed(exc)
            if device is None:
                raise
            raise TaskNeedsDevice(f"{exc} -- this task needs the {device} device", device=device) from exc
        except MemoryError as exc:
            raise TaskError(f"{path}: ran out of memory while running the reference; lower the "
                            "module-level sizes in the file") from exc
    task.companion_files = sorted(opened)
    return task


def load_dir(path: Path, *, isolate: bool = False) -> LoadReport:
    """Load every task file under `path` (recursively, sorted). Never raises for a bad task file.

    With `isolate`, every file is imported and run in a child process with time and memory limits
    (`sagekernel.tasks.isolate`): what `sage` does with directories a user brings.
    """
    root = Path(path).resolve()
    if not root.is_dir():
        raise TaskError(f"{root}: not a directory")
    report = LoadReport(root=root)
    if isolate:
        from sagekernel.tasks.isolate import load_files_isolated

        results: list[Task | LoadProblem] = load_files_isolated(task_files(root), root)
    else:
        results = [load_one(file, root) for file in task_files(root)]
    seen: dict[str, Path] = {}
    for result in results:
        if isinstance(result, LoadProblem):
            report.problems.append(result)
            continue
        add_unique(report, result, seen)
    return report


def load_one(file: Path, root: Path | None) -> Task | LoadProblem:
    """`load_task`, with every failure turned into a `LoadProblem`."""
    try:
        return load_task(file, root)
    except TaskNeedsDevice as exc:
        return LoadProblem(file, str(exc), "needs_device", exc.device)
    except TaskError as exc:
        return LoadProblem(file, str(exc))
    except RecursionError as exc:
        return LoadProblem(file, f"{file}: the reference recursed without end: {exc}")
    except Exception as exc:  # a bug in a task file that escaped the checks: still only this file
        return LoadProblem(file, f"{file}: unexpected {type(exc).__name__}: {exc}")


def add_unique(report: LoadReport, task: Task, seen: dict[str, Path]) -> None:
    """Add `task`; a name already taken (``level1/relu.py`` and ``level2/relu.py``) gets its level
    appended (``relu_l2``), then the file's number, and the record notes the rename."""
    file = task.source_path
    declared = task.layout_note == METADATA_NOTE  # a name SAGE_TASK states is never changed
    if task.name in seen and not declared:
        number = re.match(r"^(\d+)", file.stem)
        for alt in (f"{task.name}_l{task.level}",
                    f"{task.name}_{number.group(1)}" if number else f"{task.name}_2"):
            if alt not in seen:
                task.layout_note = (task.layout_note + "; " if task.layout_note else "") + (
                    f"renamed from {task.name!r} (already used by {seen[task.name]})")
                task.name = alt
                break
        else:
            report.problems.append(LoadProblem(
                file, f"{file}: task name {task.name!r} is already used by {seen[task.name]}; "
                "rename the file"))
            return
    elif task.name in seen:
        report.problems.append(LoadProblem(
            file, f"{file}: task name {task.name!r} is already used by {seen[task.name]}; "
            "change SAGE_TASK['name']"))
        return
    seen[task.name] = file
    report.tasks.append(task)


def task_files(root: Path) -> list[Path]:
    """Candidate task files: `*.py` not starting with `_` or `.`, outside hidden/underscore folders."""
    files = []
    for file in sorted(root.rglob("*.py")):
        rel = file.relative_to(root)
        if any(part.startswith((".", "_")) for part in rel.parts):
            continue
        files.append(file)
    return files


def find_reference_kernels(path: Path) -> dict[str, Path]:
    kernels = {}
    for target, suffix in REFERENCE_KERNEL_SUFFIXES.items():
        candidate = path.with_name(path.stem + suffix)
        if candidate.is_file():
            kernels[target] = candidate
    return kernels


# ----------------------------------------------------------------------------- SAGE_TASK metadata

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
    return {
        "name": name, "level": level, "category": category.strip(), "description": description,
        "sizes": dict(sizes), "inputs": inputs, "outputs": outputs, "attrs": dict(attrs),
        "variants": [dict(v) for v in variants], "dtype": dtype,
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


def _task_from_metadata(path: Path, module: ModuleType, raw_meta: object) -> Task:
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
        atol=meta["atol"], rtol=meta["rtol"], layout_note=METADATA_NOTE,
    )
    task.params = _declared_params(task, model)
    check_tensors(task, task.inputs, inputs, task.sizes, "get_inputs() at the default sizes")
    check_tensors(task, task.outputs, outputs, task.sizes, "forward() at the default sizes")
    for i, shape in enumerate(task.all_shapes()[1:]):
        _check_variant(task, module, shape, f"variant {i} {task.variants[i]}")
    return task


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
