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
from sagekernel.tasks.task import Task

#: Serialises every use of a task module's globals (rebinding sizes, seeding the global RNG).
MODULE_LOCK = threading.RLock()

_CACHE: dict[Path, tuple[int, ModuleType]] = {}
_COUNTER = itertools.count()


def _module_name(path: Path) -> str:
    stem = re.sub(r"\W", "_", path.stem)
    digest = hashlib.sha1(str(path).encode("utf-8")).hexdigest()[:10]
    return f"sagekernel_task_{stem}_{digest}_{next(_COUNTER)}"


def import_task_module(path: Path) -> ModuleType:
    """Execute the file at `path` as a fresh module (never the cached one) and cache the result.

    Any exception raised while the file runs (including `SystemExit`) becomes a `TaskError` naming
    the file.
    """
    path = Path(path).resolve()
    if not path.is_file():
        raise TaskError(f"{path}: no such task file")
    name = _module_name(path)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise TaskError(f"{path}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        with MODULE_LOCK:
            spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:
        sys.modules.pop(name, None)
        raise TaskError(f"{path}: import failed: {type(exc).__name__}: {exc}") from exc
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
def bound_sizes(module: ModuleType, sizes: Mapping[str, int]) -> Iterator[None]:
    """Rebind the module-level int of every symbol in `sizes` that the module defines; restore after.

    Symbols the module does not define as an int (e.g. synthetic symbols of an inferred task) are
    ignored. Holds `MODULE_LOCK` for the whole block.
    """
    with MODULE_LOCK:
        saved: dict[str, Any] = {}
        for key, value in sizes.items():
            current = getattr(module, key, None)
            if type(current) is int:
                saved[key] = current
                setattr(module, key, int(value))
        try:
            yield
        finally:
            for key, value in saved.items():
                setattr(module, key, value)
