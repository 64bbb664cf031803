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
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from sagekernel.errors import TaskError
from sagekernel.tasks.groups import infer_group_task
from sagekernel.tasks.infer import infer_task, layout_fields, name_from_stem
from sagekernel.tasks.inputs import DISTRIBUTIONS, build_inputs
from sagekernel.tasks.metadata import METADATA_NOTE, OPTIONAL_KEYS, REQUIRED_KEYS, task_from_metadata
from sagekernel.tasks.modules import device_calls_note, device_needed, import_task_module, track_opens
from sagekernel.tasks.npukernelbench import benchmark_root, is_operator_module, load_operator, operator_files
from sagekernel.tasks.record import LoadProblem
from sagekernel.tasks.reference import make_model, reference_outputs
from sagekernel.tasks.task import Task, TaskNeedsDevice

__all__ = [
    "DISTRIBUTIONS",
    "OPTIONAL_KEYS",
    "REQUIRED_KEYS",
    "LoadProblem",
    "LoadReport",
    "build_inputs",
    "load_dir",
    "load_task",
    "make_model",
    "reference_outputs",
]

#: Hand-written kernels next to a task file: `<stem>.<target>.<ext>`.
REFERENCE_KERNEL_SUFFIXES = {"cpu": ".cpu.c", "triton": ".triton.py", "cuda": ".cuda.cu"}

_TASK_CACHE: dict[tuple[Path, Path | None], tuple[int, Task]] = {}



@dataclass
class LoadReport:
    """The result of loading a directory: the good tasks and one problem per bad file."""

    root: Path
    tasks: list[Task] = field(default_factory=list)
    problems: list[LoadProblem] = field(default_factory=list)
    sandbox: str = ""  #: the sandbox layer the files were loaded in ("": in this process)

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
            if is_operator_module(path):  # NPUKernelBench as published (tasks/npukernelbench.py)
                task = load_operator(path, root)
                task.companion_files = sorted(opened)
                return task
            module = import_task_module(path)
            if not hasattr(module, "Model"):
                raise TaskError(f"{path}: defines no Model class (KernelBench convention: "
                                "Model, get_inputs, get_init_inputs)")
            if not hasattr(module, "get_inputs") and not hasattr(module, "get_input_groups"):
                raise TaskError(f"{path}: defines no get_inputs function (or get_input_groups) "
                                "(KernelBench convention: Model, get_inputs, get_init_inputs)")
            meta = getattr(module, "SAGE_TASK", None)
            task = (_observed_task(path, module, root) if meta is None
                    else task_from_metadata(path, module, meta))
        except TaskNeedsDevice:
            raise
        except TaskError as exc:
            device = device_needed(exc)
            if device is None:
                raise
            raise TaskNeedsDevice(f"{exc} -- this task needs the {device} device{device_calls_note(path)}",
                                  device=device) from exc
        except MemoryError as exc:
            raise TaskError(f"{path}: ran out of memory while running the reference; lower the "
                            "module-level sizes in the file") from exc
    task.companion_files = sorted(opened)
    return task


def load_dir(path: Path, *, isolate: bool = False, sandbox: str = "auto") -> LoadReport:
    """Load every task file under `path` (recursively, sorted). Never raises for a bad task file.

    With `isolate`, every file is imported and run in a child process with time and memory limits,
    confined by the sandbox layer `sandbox` (the harness setting; `sagekernel.tasks.isolate`): what
    `sage` does with directories a user brings.
    """
    root = Path(path).resolve()
    if not root.is_dir():
        raise TaskError(f"{root}: not a directory")
    root = benchmark_root(root) or root  # an NPUKernelBench repository loads from its tasks/
    report = LoadReport(root=root)
    if isolate:
        from sagekernel.tasks.isolate import load_files_isolated, loader_sandbox

        report.sandbox = loader_sandbox(sandbox)
        results: list[Task | LoadProblem] = load_files_isolated(task_files(root), root,
                                                                sandbox_kind=report.sandbox)
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
    """Candidate task files: `*.py` not starting with `_` or `.`, outside hidden/underscore folders,
    and not a hand-written kernel (`<stem>.triton.py`)."""
    if benchmark_root(root) is not None:  # one task per operator folder, not per .py file
        return operator_files(benchmark_root(root) or root)
    kernel_suffixes = tuple(REFERENCE_KERNEL_SUFFIXES.values())
    files = []
    for file in sorted(root.rglob("*.py")):
        rel = file.relative_to(root)
        if any(part.startswith((".", "_")) for part in rel.parts) or file.name.endswith(kernel_suffixes):
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


def _observed_task(path: Path, module: ModuleType, root: Path | None) -> Task:
    """A task without SAGE_TASK metadata, inferred by observation: a group task when the file
    publishes `get_input_groups` (tasks/groups.py), a plain one otherwise (tasks/infer.py)."""
    if callable(getattr(module, "get_input_groups", None)):
        name = name_from_stem(path.stem)
        return infer_group_task(path, module, name, *layout_fields(path, name, root))
    return infer_task(path, module, root)
