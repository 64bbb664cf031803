"""Importing task files in isolation and rebinding their size symbols.

A task file is plain Python in the KernelBench convention. Each import gets a unique module name
so two files with the same stem (``level1/relu.py`` and ``level2/relu.py``) never share state.
Imported modules are cached by resolved path and file modification time, so the loader, the input
builder and the reference runner all see one module object per file.

Size symbols are module-level ints that ``get_inputs()`` (and sometimes ``get_init_inputs()`` or
``forward``) read at call time; `bound_sizes` rebinds them for the duration of a block. A single
re-entrant lock serialises every rebinding, because the symbols are process-global state.
"""

from __future__ import annotations

import hashlib
import importlib.util
import itertools
import re
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

from sagekernel.errors import TaskError
from sagekernel.tasks.task import Task, TaskNeedsDevice

#: Packages that exist only where their device does: importing one that is absent means the task
#: needs that device, not that the file is broken.
DEVICE_PACKAGES = {
    "torch_npu": "npu (Ascend, torch_npu)", "acl": "npu (Ascend, acl)", "torch_mlu": "mlu (torch_mlu)",
    "triton": "gpu (triton)", "cupy": "cuda (cupy)", "pycuda": "cuda (pycuda)", "apex": "cuda (apex)",
    "tilelang": "gpu (tilelang)", "torch_xla": "xla (torch_xla)", "intel_extension_for_pytorch": "xpu",
}
#: Messages torch raises when a file asks for a device this machine lacks.
_DEVICE_MESSAGES = (
    ("torch not compiled with cuda", "cuda"), ("no nvidia driver", "cuda"), ("found no nvidia", "cuda"),
    ("cuda driver", "cuda"), ("no cuda gpus are available", "cuda"), ("has no attribute 'npu'", "npu"),
    ("torch.npu", "npu"), ("invalid device string: 'npu", "npu"), ("expected one of cpu, cuda", "the "
     "device the file names"),
)


def device_only_calls(source: str) -> list[str]:
    """The device packages' functions a task's source calls (``torch_npu.npu_lightning_indexer``),
    in order of first use: ops with no CPU PyTorch counterpart, named in the load reason."""
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, DEVICE_PACKAGES)) + r")\.([A-Za-z_]\w*)\s*\(")
    return list(dict.fromkeys(f"{m.group(1)}.{m.group(2)}" for m in pattern.finditer(source)))


def device_calls_note(path: Path) -> str:
    """The load reason's naming of a needs-device file's device-only calls ("" when none)."""
    try:
        calls = device_only_calls(Path(path).read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return ""
    return (f"; the reference calls {', '.join(calls)}, which only that device's package provides "
            "(no CPU PyTorch counterpart)") if calls else ""


def device_needed(exc: BaseException) -> str | None:
    """The device an exception (or its causes) says is missing, else None."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, ModuleNotFoundError) and cur.name:
            top = cur.name.split(".")[0]
            if top in DEVICE_PACKAGES:
                return DEVICE_PACKAGES[top]
        text = str(cur).lower()
        for needle, device in _DEVICE_MESSAGES:
            if needle in text:
                return device
        cur = cur.__cause__ or cur.__context__
    return None


# ----------------------------------------------------------------------------- companion files

_TRACKERS: list[tuple[Path, Path, set[Path]]] = []
_HOOKED = False


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event != "open" or not _TRACKERS or not args or not isinstance(args[0], (str, bytes, Path)):
        return
    try:
        raw = args[0].decode() if isinstance(args[0], bytes) else str(args[0])
        opened = Path(raw).resolve()
    except (OSError, ValueError, RuntimeError):
        return
    for folder, own, found in _TRACKERS:
        if opened != own and opened.is_relative_to(folder) and "__pycache__" not in opened.parts:
            found.add(opened)


@contextmanager
def track_opens(task_file: Path) -> Iterator[set[Path]]:
    """Collect the files under `task_file`'s folder that are opened inside the block (JSON cases,
    sibling modules): what a sandboxed child needs next to the task file. Uses one audit hook."""
    global _HOOKED
    task_file = Path(task_file).resolve()
    found: set[Path] = set()
    entry = (task_file.parent, task_file, found)
    with MODULE_LOCK:
        if not _HOOKED:
            sys.addaudithook(_audit)
            _HOOKED = True
        _TRACKERS.append(entry)
    try:
        yield found
    finally:
        with MODULE_LOCK:
            _TRACKERS.remove(entry)

#: Serialises every use of a task module's globals (rebinding sizes, seeding the global RNG).
MODULE_LOCK = threading.RLock()

_CACHE: dict[Path, tuple[int, ModuleType]] = {}
_COUNTER = itertools.count()


def _module_name(path: Path) -> str:
    stem = re.sub(r"\W", "_", path.stem)
    digest = hashlib.sha1(str(path).encode("utf-8")).hexdigest()[:10]
    return f"sagekernel_task_{stem}_{digest}_{next(_COUNTER)}"


#: `import torch_npu` (or `from torch_npu ...`) at any indentation.
_IMPORTS_TORCH_NPU = re.compile(r"^\s*(?:import|from)\s+torch_npu\b", re.MULTILINE)


@contextmanager
def _stand_ins_if_only_imported(source: str) -> Iterator[None]:
    """A KernelBench-style file that imports torch_npu but calls none of its functions (MultiKernelBench's
    dequant_swiglu_quant keeps the import "for device registration parity") runs on CPU PyTorch
    with the benchmark stand-ins of tasks/npukb_shim.py, as NPUKernelBench's own files do; one
    that calls a torch_npu op still needs the device (`device_only_calls` names the calls)."""
    from sagekernel.tasks.npukb_shim import benchmark_imports, torch_npu_installed

    wanted = (_IMPORTS_TORCH_NPU.search(source) is not None and not torch_npu_installed()
              and not any(c.startswith("torch_npu.") for c in device_only_calls(source)))
    if not wanted:
        yield
        return
    with benchmark_imports():
        yield


def import_task_module(path: Path) -> ModuleType:
    """Execute the file at `path` as a fresh module (never the cached one) and cache the result.

    Any exception raised while the file runs (including `SystemExit`) becomes a `TaskError` naming
    the file.
    """
    path = Path(path).resolve()
    if not path.is_file():
        raise TaskError(f"{path}: no such task file")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise TaskError(f"{path}: cannot read the task file: {exc}") from exc
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TaskError(f"{path}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start}); "
                        "save the file as UTF-8") from None
    name = _module_name(path)
    from sagekernel.tasks.npukernelbench import import_operator, is_operator_module

    operator = is_operator_module(path)  # NPUKernelBench's validation/module.py: a composite module
    spec = None if operator else importlib.util.spec_from_file_location(name, path)
    if not operator and (spec is None or spec.loader is None):
        raise TaskError(f"{path}: cannot be imported as a Python module")
    try:
        with MODULE_LOCK:
            if operator:
                module = import_operator(path, name)
            else:
                assert spec is not None and spec.loader is not None
                module = importlib.util.module_from_spec(spec)
                sys.modules[name] = module
                with _stand_ins_if_only_imported(raw.decode("utf-8")):
                    spec.loader.exec_module(module)
    except TaskError:
        sys.modules.pop(name, None)
        raise
    except (Exception, SystemExit) as exc:
        sys.modules.pop(name, None)
        device = device_needed(exc)
        if device is not None:
            raise TaskNeedsDevice(f"{path}: needs the {device} device: {type(exc).__name__}: {exc} "
                                  f"(run it where that device and its package are installed)"
                                  f"{device_calls_note(path)}", device=device) from exc
        raise TaskError(f"{path}: import failed: {type(exc).__name__}: {exc}") from exc
    if not operator:  # KernelBench-style argument kinds (tasks/forward_call.py, tasks/npukb_shim.py)
        from sagekernel.tasks.forward_call import accept_positional_keywords
        from sagekernel.tasks.npukb_shim import use_device_torch

        accept_positional_keywords(module)
        use_device_torch(module)
    with MODULE_LOCK:
        old = _CACHE.get(path)
        if old is not None:
            sys.modules.pop(old[1].__name__, None)
        _CACHE[path] = (path.stat().st_mtime_ns, module)
    return module


def task_module(task: Task) -> ModuleType:
    """The imported module of `task`'s source file, re-imported if the file changed on disk."""
    path = Path(task.source_path).resolve()
    with MODULE_LOCK:
        cached = _CACHE.get(path)
        try:
            mtime = path.stat().st_mtime_ns
        except OSError as exc:
            raise TaskError(f"{path}: task file is gone: {exc}") from exc
        if cached is not None and cached[0] == mtime:
            return cached[1]
    return import_task_module(path)


def module_ints(module: ModuleType) -> dict[str, int]:
    """Public module-level ints (bools excluded): the candidate size symbols of a task file."""
    return {
        k: v for k, v in vars(module).items()
        if type(v) is int and not k.startswith("_")
    }


@contextmanager
def bound_sizes(module: ModuleType, sizes: Mapping[str, int | float | tuple[int, ...]]) -> Iterator[None]:
    """Rebind the module-level int of every symbol in `sizes` that the module defines (and a
    module-level tuple of ints, given a tuple: the size policy's `Task.size_tuples`); restore after.

    A module-level float is rebound to a number (attribute values, `Task.attr_binding`).
    Symbols the module does not define as an int (e.g. synthetic symbols of an inferred task) are
    ignored. Holds `MODULE_LOCK` for the whole block.
    """
    with MODULE_LOCK:
        saved: dict[str, Any] = {}
        for key, value in sizes.items():
            current = getattr(module, key, None)
            if type(current) is int and not isinstance(value, tuple):
                saved[key] = current
                setattr(module, key, int(value))
            elif type(current) is tuple and isinstance(value, tuple):
                saved[key] = current
                setattr(module, key, tuple(int(x) for x in value))
            elif type(current) is float and isinstance(value, (int, float)):
                saved[key] = current  # an attribute drawn by the attributes trial (Task.with_attrs)
                setattr(module, key, float(value))
        try:
            yield
        finally:
            for key, value in saved.items():
                setattr(module, key, value)
