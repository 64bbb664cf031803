"""Stand-ins for the modules NPUKernelBench's validation files import, for machines without them.

Every ``validation/module.py`` imports ``torch_npu`` and ``torch_npu.contrib.transfer_to_npu``
(which, on an Ascend machine, redirects ``cuda`` device requests to the NPU); 29
``prepare_inputs.py`` import ``framework.utils.check_precision`` from the repository root (whose
real package parses the benchmark's command line and config on import); ``ModelNew`` imports
``kernel_gen_ops`` (the compiled candidate). None of the references calls anything of torch_npu
beyond the import, so on a machine without torch_npu the references run on CPU PyTorch.

`benchmark_imports()` puts the stand-ins into ``sys.modules`` only while a task's two files are
executed (the loader's and the reference runners' children: the only processes that import task
files) and takes them out again afterwards, so nothing else in the process ever sees a fake
``torch_npu``. Where torch_npu is installed the real one is imported (and the NPU reference used);
``framework`` is always the stand-in. ``kernel_gen_ops`` raises on use: a reference never calls it.

The benchmark's input builders also draw integer tensors with float samplers
(``torch.randn(shape, dtype=torch.int8)``), which the NPU accepts and CPU PyTorch refuses.
`device_torch()` is the ``torch`` the task files see as their module global: the real module,
except that ``randn``/``rand``/``randn_like``/``rand_like``/``normal`` asked for an integer or bool
dtype draw in float32 and cast (truncating toward zero), as the device does. It replaces only the
global of the benchmark's own two files, never ``torch`` itself.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

SHIM_MARK = "__sagekernel_shim__"


def torch_npu_installed() -> bool:
    existing = sys.modules.get("torch_npu")
    if existing is not None:
        return not getattr(existing, SHIM_MARK, False)
    try:
        return importlib.util.find_spec("torch_npu") is not None
    except (ImportError, ValueError):
        return False


def _module(name: str, doc: str, **attrs: Any) -> ModuleType:
    module = ModuleType(name, doc)
    setattr(module, SHIM_MARK, True)
    for key, value in attrs.items():
        setattr(module, key, value)
    return module


class _NpuNamespace:
    """``torch_npu.npu``: the calls a reference might make around its computation, as no-ops."""

    @staticmethod
    def synchronize(*_args: Any, **_kwargs: Any) -> None:
        return None

    @staticmethod
    def is_available() -> bool:
        return False

    @staticmethod
    def set_device(*_args: Any, **_kwargs: Any) -> None:
        return None


class _MissingKernel(ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise RuntimeError(f"kernel_gen_ops.{name} is the candidate kernel; the reference (Model) never "
                           "calls it, and SAGE judges candidates through its own targets")


def _torch_npu_modules() -> dict[str, ModuleType]:
    transfer = _module("torch_npu.contrib.transfer_to_npu",
                       "SAGE stand-in: no device redirection (the reference runs on CPU PyTorch)")
    contrib = _module("torch_npu.contrib", "SAGE stand-in", transfer_to_npu=transfer)
    npu = _module("torch_npu", "SAGE stand-in for torch_npu on a machine without it",
                  contrib=contrib, npu=_NpuNamespace())
    return {"torch_npu": npu, "torch_npu.contrib": contrib, "torch_npu.contrib.transfer_to_npu": transfer}


def _framework_modules() -> dict[str, ModuleType]:
    from sagekernel.tasks.npukb_rule import check_precision

    utils = _module("framework.utils", "SAGE stand-in: the benchmark's default correctness rule",
                    check_precision=check_precision)
    return {"framework": _module("framework", "SAGE stand-in", utils=utils), "framework.utils": utils}


def shim_modules() -> dict[str, ModuleType]:
    """The stand-ins this machine needs, by module name."""
    modules = _framework_modules()
    if not torch_npu_installed():
        modules.update(_torch_npu_modules())
    kernels = _MissingKernel("kernel_gen_ops", "SAGE stand-in: the candidate's binding is not loaded")
    setattr(kernels, SHIM_MARK, True)
    modules["kernel_gen_ops"] = kernels
    return modules


@contextmanager
def benchmark_imports() -> Iterator[None]:
    """Serve the stand-ins to imports inside the block; restore ``sys.modules`` after it."""
    modules = shim_modules()
    saved = {name: sys.modules.get(name) for name in modules}
    sys.modules.update(modules)
    try:
        yield
    finally:
        for name, old in saved.items():
            if old is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = old


_FLOAT_SAMPLERS = ("randn", "rand", "randn_like", "rand_like", "normal")


def _integer(dtype: Any) -> bool:
    import torch

    return isinstance(dtype, torch.dtype) and not (dtype.is_floating_point or dtype.is_complex)


def _sampler(fn: Any) -> Any:
    import torch

    def draw(*args: Any, **kwargs: Any) -> Any:
        dtype = kwargs.get("dtype")
        if not _integer(dtype):
            return fn(*args, **kwargs)
        return fn(*args, **{**kwargs, "dtype": torch.float32}).to(dtype)

    draw.__name__ = getattr(fn, "__name__", "sampler")
    draw.__doc__ = fn.__doc__
    return draw


class _DeviceTorch(ModuleType):
    """``torch`` with integer-tolerant float samplers (module docstring)."""

    def __getattr__(self, name: str) -> Any:
        import torch

        value = getattr(torch, name)
        return _sampler(value) if name in _FLOAT_SAMPLERS else value


def device_torch() -> ModuleType:
    """The ``torch`` global for a benchmark task file (module docstring)."""
    module = _DeviceTorch("torch", "SAGE: torch as the benchmark's device sees it")
    setattr(module, SHIM_MARK, True)
    return module


def use_device_torch(module: ModuleType) -> None:
    """Rebind `module`'s global ``torch`` (when it is the real one) to `device_torch()`."""
    import torch

    if getattr(module, "torch", None) is torch:
        module.torch = device_torch()  # type: ignore[attr-defined]
