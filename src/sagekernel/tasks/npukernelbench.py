"""NPUKernelBench (AscendKernelGen, V2.0) as published: one operator per folder.

Layout (``weich97/NPUKernelBench``, a mirror of PCL-Benchmark)::

    base_config.yaml                       default tolerances (eval.max_abs_error / max_rel_error)
    tasks/level<N>/<Category>/<Op>/
        api_desc.md                        the specification the benchmark shows the model
        question/op_host/<op>.cpp ...      the skeleton the model completes (Ascend C)
        validation/module.py               Model (reference, for torch_npu) and ModelNew
        validation/prepare_inputs.py       get_inputs(param), get_init_inputs(param)
                                           [, custom_check_precision(param, outputs, outputs_new)]
        validation/test_cases.csv          ';'-separated cases: case_id, then named parameters
        answer/<k>/...                     expert implementations: never read (below)

An operator is loaded as one task whose source file is ``validation/module.py``; importing that
path (`import_operator`, called by `modules.import_task_module`) gives a composite module in the
KernelBench convention: ``get_input_groups()`` has one group per case (row) of ``test_cases.csv``,
and ``Model`` is the benchmark's Model built per call from that case's ``get_init_inputs(param)``.
A case's init arguments are passed as the leading forward arguments, so they reach the kernel the
way every forward argument does (numbers and lists as attrs, tensors as inputs, strings as string
attributes; a ``torch.dtype`` travels as the string ``"torch.<name>"``). Each case draws its
inputs from its own seed (the group's seed, then the case position), so a case's values do not
depend on the other cases. The task records each case's parameters (`BenchmarkSpec.cases`), the
root's tolerances, whether the task has its own ``custom_check_precision``, the Ascend C skeleton
under ``question/`` and the text of ``api_desc.md`` (`Task.specification`).

No expert leakage: the loader opens exactly ``validation/module.py``, ``validation/prepare_inputs.py``,
``validation/test_cases.csv``, ``api_desc.md``, ``base_config.yaml`` and lists ``question/``;
``answer/`` is never opened, listed or recorded, so no answer text can reach a Task record, and
with it a prompt, the memory, a workspace, a log or ``sage tasks show`` (tests/test_npukernelbench.py
proves it on a fixture whose answers carry a marker).
"""

from __future__ import annotations

import importlib.util
import inspect
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from sagekernel.errors import TaskError
from sagekernel.tasks.npukb_cases import CaseRow, read_cases, root_tolerances
from sagekernel.tasks.npukb_shim import benchmark_imports, use_device_torch
from sagekernel.tasks.task import NPUKERNELBENCH, BenchmarkSpec, Task

BENCHMARK = NPUKERNELBENCH
MODULE_FILE = "module.py"
INPUTS_FILE = "prepare_inputs.py"
CASES_FILE = "test_cases.csv"
SPEC_FILE = "api_desc.md"
SKELETON_DIR = "question"
#: Never opened, listed or recorded (the paper's anti-hacking rule).
ANSWER_DIR = "answer"
#: Prefix of a dtype passed as a string attribute (see the module docstring).
DTYPE_PREFIX = "torch."

_LEVEL_DIR = re.compile(r"^level[_-]?(\d+)$", re.IGNORECASE)
_KERNEL_CALL = re.compile(r"kernel_gen_ops\.(\w+)\s*\(")


# ----------------------------------------------------------------------------- layout

def is_operator_module(path: Path) -> bool:
    """``.../validation/module.py`` next to ``prepare_inputs.py`` and ``test_cases.csv`` (the
    folder name is not required: a sandbox copy keeps only the three files)."""
    path = Path(path)
    return (path.name == MODULE_FILE and (path.parent / INPUTS_FILE).is_file()
            and (path.parent / CASES_FILE).is_file())


def operator_files(root: Path) -> list[Path]:
    """Every operator's ``validation/module.py`` under `root`, sorted; nothing under ``answer/``."""
    found = []
    for file in sorted(Path(root).rglob(f"validation/{MODULE_FILE}")):
        rel = file.relative_to(root).parts
        if ANSWER_DIR in rel or any(p.startswith((".", "_")) for p in rel):
            continue
        if is_operator_module(file):
            found.append(file)
    return found


def benchmark_root(path: Path) -> Path | None:
    """The folder to load when `path` is an NPUKernelBench repository root (its ``tasks/``) or any
    folder holding operator folders (itself); None for other layouts."""
    path = Path(path)
    tasks = path / "tasks"
    if tasks.is_dir() and any(_LEVEL_DIR.match(p.name) for p in tasks.iterdir()) and operator_files(tasks):
        return tasks
    return path if operator_files(path) else None


def operator_dir(module_path: Path) -> Path:
    """The operator folder of a ``validation/module.py``."""
    parent = Path(module_path).parent
    return parent.parent if parent.name == "validation" else parent


def operator_layout(module_path: Path) -> tuple[str, int, str, str]:
    """(name, level, category, layout note) from ``level<N>/<Category>/<Op>/validation/module.py``."""
    op = operator_dir(module_path)
    level_dir = op.parent.parent
    m = _LEVEL_DIR.match(level_dir.name)
    if m is None:
        return op.name, 1, op.parent.name.lower(), "npukernelbench; no level folder: level 1"
    return op.name, int(m.group(1)), op.parent.name.lower(), "npukernelbench folder"


def repository_root(op: Path) -> Path | None:
    """The nearest ancestor holding ``base_config.yaml`` (the benchmark's root), within 5 levels."""
    for parent in list(Path(op).parents)[:5]:
        if (parent / "base_config.yaml").is_file():
            return parent
    return None


def skeleton_files(op: Path) -> dict[str, Path]:
    """``question/`` files by path relative to it (``op_host/equal.cpp`` ...): the starting project
    of the ``ascendc`` target. Only ``question/`` is listed."""
    question = Path(op) / SKELETON_DIR
    if not question.is_dir():
        return {}
    return {str(f.relative_to(question)): f for f in sorted(question.rglob("*")) if f.is_file()}


# ----------------------------------------------------------------------------- the composite module

def _exec_file(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise TaskError(f"{path}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def _signature_names(fn: Any, skip_self: bool = True) -> list[str]:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return []
    names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return names[1:] if skip_self and names and names[0] == "self" else names


def encode_init(value: Any) -> Any:
    """An init argument as a forward argument: a ``torch.dtype`` becomes ``"torch.<name>"``, a
    numpy scalar (``np.int64(n)``) the Python number it holds."""
    if isinstance(value, torch.dtype):
        return str(value)
    if type(value).__module__ == "numpy" and hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        return value.item()
    return value


def decode_init(value: Any) -> Any:
    if isinstance(value, str) and value.startswith(DTYPE_PREFIX):
        dtype = getattr(torch, value[len(DTYPE_PREFIX):], None)
        if isinstance(dtype, torch.dtype):
            return dtype
    return value


def _as_args(raw: Any) -> list[Any]:
    if isinstance(raw, (list, tuple)):
        return list(raw)
    return [raw]


def _case_model_class(reference: type, n_init: int, init_names: list[str],
                      forward_names: list[str], grad_positions: frozenset[int] = frozenset()) -> type:
    """`Model` of the composite: the benchmark's Model built from the leading `n_init` arguments,
    run on the rest. A float64 call (the harness's wide reference) widens the built model too.
    Arguments at `grad_positions` were built with ``requires_grad=True`` (gradient operators take
    ``torch.autograd.grad`` of them); inputs reach a kernel detached, so they are made leaves that
    require grad again here."""

    class Model(torch.nn.Module):
        __doc__ = reference.__doc__

        def forward(self, *args: Any) -> Any:
            args = tuple(a.detach().requires_grad_(True)
                         if k in grad_positions and isinstance(a, torch.Tensor) and a.is_floating_point()
                         else a for k, a in enumerate(args))
            init = [decode_init(a) for a in args[:n_init]]
            inner = reference(*init)
            if isinstance(inner, torch.nn.Module):
                wide = any(isinstance(a, torch.Tensor) and a.dtype == torch.float64 for a in args)
                inner = inner.double() if wide else inner
                inner.train(self.training)
            return inner(*args[n_init:])

    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    names = [init_names[k] if k < len(init_names) else f"init{k}" for k in range(n_init)] + forward_names
    seen: set[str] = set()
    for k, name in enumerate(names):
        name = name if name not in seen else f"{name}_{k}"
        seen.add(name)
        params.append(inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD))
    Model.forward.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    return Model


def import_operator(path: Path, name: str) -> ModuleType:
    """The composite module of an operator (module docstring), named `name`."""
    path = Path(path).resolve()
    folder = path.parent
    with benchmark_imports():
        reference = _exec_file(path, name + "_module")
        prepare = reference if hasattr(reference, "get_init_inputs") else \
            _exec_file(folder / INPUTS_FILE, name + "_prepare_inputs")
    use_device_torch(prepare)  # its builders run on CPU here, whatever device the machine has
    for needed in ("get_inputs", "get_init_inputs"):
        if not callable(getattr(prepare, needed, None)):
            raise TaskError(f"{folder / INPUTS_FILE}: defines no {needed}(param, device=None)")
    ref_model = getattr(reference, "Model", None)
    if not isinstance(ref_model, type):
        raise TaskError(f"{path}: defines no Model class (the benchmark's reference)")
    cases = read_cases(folder / CASES_FILE)
    if not cases:
        raise TaskError(f"{folder / CASES_FILE}: no cases (a header and at least one row are needed)")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        try:
            first_init = _as_args(prepare.get_init_inputs(cases[0], device=None))
        except Exception as exc:
            raise TaskError(f"{folder / INPUTS_FILE}: get_init_inputs(case {cases[0].case_id}) raised "
                            f"{type(exc).__name__}: {exc}") from exc
    n_init = len(first_init)

    def make_case(k: int, base: int, device: str | None = None) -> dict[str, Any]:
        row = cases[k]
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(base + k)
            init = _as_args(prepare.get_init_inputs(row, device=device))
            inputs = _as_args(prepare.get_inputs(row, device=device))
        if len(init) != n_init:
            raise TaskError(f"{folder / INPUTS_FILE}: get_init_inputs(case {row.case_id}) returns "
                            f"{len(init)} arguments, case {cases[0].case_id} returned {n_init}")
        return {"name": f"case{row.case_id}", "inputs": [encode_init(a) for a in init] + inputs}

    usable = CaseFilter(folder, cases, make_case)
    grad_positions = _grad_positions(make_case)

    def get_input_groups() -> list[dict[str, Any]]:
        base = int(torch.randint(0, 2**31 - 1, ()))  # from the caller's seed
        return [make_case(k, base) for k in usable.kept()]

    def get_input_group(index: int) -> dict[str, Any]:
        """Group `index` of get_input_groups() alone (the same values, one case built)."""
        base = int(torch.randint(0, 2**31 - 1, ()))
        return make_case(usable.kept()[index], base)

    composite = ModuleType(name, inspect.getdoc(reference) or "")
    composite.__file__ = str(path)
    members: dict[str, Any] = {
        "Model": _case_model_class(ref_model, n_init, _signature_names(vars(ref_model).get("__init__")),
                                   _signature_names(getattr(ref_model, "forward", None)), grad_positions),
        "get_input_groups": get_input_groups, "get_input_group": get_input_group,
        "get_init_inputs": lambda: [], "NPUKB_LEFT_OUT": usable.left_out, "NPUKB_CASES": cases,
        "NPUKB_CUSTOM_CHECK": getattr(prepare, "custom_check_precision", None), "NPUKB_REFERENCE": reference,
    }
    vars(composite).update(members)
    return composite


def _grad_positions(make_case: Any) -> frozenset[int]:
    """Forward-argument positions whose tensors the first case builds with ``requires_grad``
    (read on the meta device when its builder honours ``device``, else from one real build)."""
    for device in ("meta", None):
        try:
            with torch.random.fork_rng(devices=[]):
                args = make_case(0, 0, device)["inputs"]
        except Exception:
            continue
        return frozenset(k for k, a in enumerate(args) if isinstance(a, torch.Tensor) and a.requires_grad)
    return frozenset()


def _tensors_of(args: list[Any]) -> list[torch.Tensor]:
    found: list[torch.Tensor] = []
    for a in args:
        if isinstance(a, torch.Tensor):
            found.append(a)
        elif isinstance(a, (list, tuple)):
            found += [x for x in a if isinstance(x, torch.Tensor)]
    return found


class CaseFilter:
    """Which cases this machine can run: a case whose tensors exceed the size budget
    (`budget.max_bytes`), use a dtype no kernel contract carries (complex64 ...) or are not
    dense (a sparse COO tensor) is left out,
    with the reason, and counts as not passed in the benchmark's score. Sizes and dtypes are read on
    PyTorch's ``meta`` device when the case's builder honours ``device`` (no memory), else from one
    real build, one case at a time. Decided once per process, the same way in every process."""

    def __init__(self, folder: Path, cases: list[CaseRow], make_case: Any) -> None:
        self.folder, self.cases, self.make_case = folder, cases, make_case
        self._kept: list[int] | None = None
        self.left_out: list[str] = []

    def _measure(self, k: int) -> tuple[int, set[str]]:
        """(input bytes of dense tensors, {"dtype <name>", "<layout> layout"}) of case `k`."""
        for device in ("meta", None):
            try:
                with torch.random.fork_rng(devices=[]):
                    tensors = _tensors_of(self.make_case(k, 0, device)["inputs"])
            except TaskError:
                raise
            except Exception:
                if device is None:
                    raise
                continue
            kinds = {"dtype " + str(t.dtype).removeprefix("torch.") for t in tensors}
            kinds |= {str(t.layout).removeprefix("torch.") + " layout" for t in tensors
                      if t.layout != torch.strided}
            return sum(t.numel() * t.element_size() for t in tensors if t.layout == torch.strided), kinds
        raise AssertionError("unreachable")

    def kept(self) -> list[int]:
        if self._kept is not None:
            return self._kept
        from sagekernel.tasks.budget import budget_text, max_bytes
        from sagekernel.tasks.task import SUPPORTED_DTYPES

        kept, left = [], []
        for k, row in enumerate(self.cases):
            nbytes, kinds = self._measure(k)
            odd = sorted(x for x in kinds if x.endswith(" layout")
                         or x.removeprefix("dtype ") not in SUPPORTED_DTYPES)
            if odd:
                left.append(f"case{row.case_id} ({', '.join(odd)}: no kernel contract carries it)")
            elif nbytes > max_bytes():
                left.append(f"case{row.case_id} ({nbytes / 2**20:.1f} MiB of inputs, over the CPU budget "
                            f"{budget_text()}; SAGE_TASK_MAX_BYTES raises it)")
            else:
                kept.append(k)
        self.left_out[:] = left  # in place: the composite module exposes this list
        if not kept:
            raise TaskError(f"{self.folder / CASES_FILE}: no case can run here: {'; '.join(left)}")
        self._kept = kept
        return kept


# ----------------------------------------------------------------------------- the task

def kernel_op_name(module_source: str) -> str:
    """The ``kernel_gen_ops.<op>`` name ModelNew calls ("" when it calls none)."""
    m = _KERNEL_CALL.search(module_source)
    return m.group(1) if m else ""


def load_operator(path: Path, root: Path | None = None) -> Task:
    """One operator folder as a Task (module docstring). Raises `TaskError` naming what is wrong."""
    from sagekernel.tasks.groups import infer_group_task
    from sagekernel.tasks.modules import import_task_module

    path = Path(path).resolve()
    name, level, category, note = operator_layout(path)
    module = import_task_module(path)
    task = infer_group_task(path, module, name, level, category, note)
    op = operator_dir(path)
    spec_file = op / SPEC_FILE
    task.specification = (spec_file.read_text(encoding="utf-8", errors="replace")
                          if spec_file.is_file() else "")
    if task.specification.strip():
        first = next((ln.strip("# ").strip() for ln in task.specification.splitlines() if ln.strip()), "")
        task.description = task.description or first
    tolerances = root_tolerances(repository_root(op))
    rows: list[CaseRow] = module.NPUKB_CASES
    task.benchmark = BenchmarkSpec(
        format=BENCHMARK,
        cases={f"case{r.case_id}": dict(r) for r in rows},
        case_count=len(rows),
        max_abs_error=tolerances.max_abs_error, max_rel_error=tolerances.max_rel_error,
        custom_check=module.NPUKB_CUSTOM_CHECK is not None,
        kernel_op=kernel_op_name(path.read_text(encoding="utf-8", errors="replace")),
        skeleton={rel: str(p) for rel, p in skeleton_files(op).items()},
        left_out=list(module.NPUKB_LEFT_OUT),
    )
    return task


def skeleton_sources(task: Task) -> dict[str, str]:
    """The ``question/`` project of an NPUKernelBench task as text, by path relative to
    ``question/`` (``op_host/<op>.cpp``, ``op_kernel/<op>.cpp``): the ``ascendc`` target's starting
    project. Empty for other tasks. Only files inside a ``question`` folder are ever read."""
    if task.benchmark is None:
        return {}
    found = {}
    for rel, where in sorted(task.benchmark.skeleton.items()):
        path = Path(where)
        if SKELETON_DIR not in path.parts or ANSWER_DIR in path.parts or not path.is_file():
            continue
        found[rel] = path.read_text(encoding="utf-8", errors="replace")
    return found
