"""The host-code guard of a device runtime: around a candidate's `forward`, every aten op other
than allocation, views and metadata is refused, outside kernel launches.

Imports torch only (it runs inside the sandbox, beside loop.py). A static lint of host code can
always be dodged by spelling (a builtin applied to a tensor, a name laundered through a container,
a lambda in a decorator's arguments); every such spelling still reaches torch's dispatcher as an
aten op, where a `TorchDispatchMode` sees it whatever the Python looked like. The few tensor
methods that reach data without an aten op (`numpy`, `tolist`, storages: CPU tensors on the
interpreter) are wrapped to refuse likewise while the guard is active. Kernel launches are
the one place aten ops may run (the interpreter and the JIT move argument data with them): the
runtime wraps the launch entry points (`suspended()`) before the candidate is loaded.

Every refusal is recorded (`refused`) as well as raised, so a candidate that catches the error and
carries on is still reported; the loop sends the record and the harness rejects on it.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

#: aten ops (overload packets) host code may run: allocation, views, metadata, and same-dtype
#: layout copies (`.contiguous()`, `.clone()`); everything that computes a value is refused.
ALLOWED_OPS = frozenset(
    {
        # allocation (contents undefined or a constant fill of a fresh tensor)
        "empty",
        "empty_like",
        "empty_strided",
        "new_empty",
        "new_empty_strided",
        "zeros",
        "zeros_like",
        "new_zeros",
        "zero_",
        "lift_fresh",
        # views and metadata
        "view",
        "_unsafe_view",
        "_reshape_alias",
        "reshape",
        "as_strided",
        "alias",
        "detach",
        "t",
        "transpose",
        "permute",
        "unsqueeze",
        "squeeze",
        "expand",
        "slice",
        "select",
        "split",
        "unbind",
        "chunk",
        "narrow",
        "flatten",
        "unflatten",
        "view_as",
        "expand_as",
        "is_contiguous",
        "is_same_size",
        "sym_size",
        "sym_stride",
        "sym_numel",
        "sym_storage_offset",
        "dim",
        "size",
        "stride",
        "numel",
        "_has_compatible_shallow_copy_type",
        # layout copies: judged below (the dtype must not change)
        "clone",
        "contiguous",
        "copy_",
        "_to_copy",
    }
)
#: Copies allowed only when they keep the dtype (a changed dtype is a precision change) and the
#: device (a copy to the host is a readback: on a GPU the only way host code can compute).
LAYOUT_COPIES = frozenset({"copy_", "_to_copy"})
#: Tensor methods that reach a tensor's data without an aten op (CPU tensors on the interpreter):
#: refused in host code too, like the ops above.
READBACK_METHODS = ("numpy", "tolist", "__array__", "__dlpack__", "untyped_storage", "storage")
#: Ways to take a dispatch mode off the stack or switch Python dispatch off (module, name): refused
#: while the guard is active, so host code cannot step around it and put it back.
ESCAPE_HATCHES = (
    ("torch._C", "_pop_torch_dispatch_stack"),
    ("torch._C", "_unset_dispatch_mode"),
    ("torch._C", "_DisableTorchDispatch"),
    ("torch._C", "_DisablePythonDispatcher"),
    ("torch._C", "_ExcludeDispatchKeyGuard"),
    ("torch._C", "ExcludeDispatchKeyGuard"),
    ("torch._C", "_SetExcludeDispatchKeyGuard"),
    ("torch.utils._python_dispatch", "_pop_torch_dispatch_stack"),
    ("torch.utils._python_dispatch", "_pop_mode"),
    ("torch.utils._python_dispatch", "_pop_mode_temporarily"),
    ("torch.utils._python_dispatch", "_disable_current_modes"),
)
MAX_RECORDED = 20


def _name(func: Any) -> str:
    packet = getattr(func, "overloadpacket", None)
    return str(getattr(packet, "__name__", None) or getattr(func, "__name__", func)).split(".")[-1]


def _changes_dtype_or_device(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    if name == "_to_copy":
        src = args[0] if args else None
        if not isinstance(src, torch.Tensor):
            return False
        dtype, device = kwargs.get("dtype"), kwargs.get("device")
        return (dtype is not None and dtype != src.dtype) or (
            device is not None and torch.device(device) != src.device
        )
    if name == "copy_" and len(args) >= 2:
        dst, src = args[0], args[1]
        return (
            isinstance(dst, torch.Tensor)
            and isinstance(src, torch.Tensor)
            and (dst.dtype != src.dtype or dst.device != src.device)
        )
    return False


class HostGuard(TorchDispatchMode):
    """Refuses computing aten ops while active and not suspended; records every refusal."""

    def __init__(self) -> None:
        super().__init__()
        self.depth = 0  # > 0 inside a kernel launch
        self.active = False  # between __enter__ and __exit__
        self.refused: list[str] = []
        for method in READBACK_METHODS:
            self._guard_method(torch.Tensor, method, f"Tensor.{method}")
        for module, name in ESCAPE_HATCHES:
            self._guard_method(importlib.import_module(module), name, f"{module}.{name}")

    def __enter__(self) -> HostGuard:
        super().__enter__()
        self.active = True
        return self

    def __exit__(self, *exc: Any) -> None:
        self.active = False
        super().__exit__(*exc)

    def refuse(self, what: str) -> None:
        if len(self.refused) < MAX_RECORDED:
            self.refused.append(what)
        raise RuntimeError(
            f"host code ran {what} outside a kernel launch: ModelNew.forward may only allocate, take "
            "views and launch @triton.jit kernels"
        )

    def _guard_method(self, owner: Any, name: str, what: str) -> None:
        original = getattr(owner, name, None)
        if original is None:
            return
        guard = self

        def guarded(*args: Any, **kwargs: Any) -> Any:
            if guard.active and guard.depth == 0:
                guard.refuse(what)
            return original(*args, **kwargs)

        setattr(owner, name, guarded)

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        kwargs = kwargs or {}
        if self.depth == 0:
            name = _name(func)
            if name not in ALLOWED_OPS or (
                name in LAYOUT_COPIES and _changes_dtype_or_device(name, args, kwargs)
            ):
                self.refuse(f"the torch op {func}")
        return func(*args, **kwargs)

    @contextlib.contextmanager
    def suspended(self) -> Iterator[None]:
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1

    def take(self) -> list[str]:
        """The refusals since the last call (each call reports its own)."""
        out, self.refused = self.refused, []
        return out


def warm(guard: HostGuard) -> None:
    """Run the guard once on an allowed and a refused op, so that everything it imports lazily is
    imported before the runtime stops opening files."""
    with guard:
        t = torch.empty(4)
        t.view(2, 2).contiguous()
        with contextlib.suppress(RuntimeError):
            t.add(1)
        with contextlib.suppress(RuntimeError):
            t.tolist()
        still_installed(guard)
    guard.take()


def wrap_launch(owner: type, attr: str, guard: HostGuard) -> None:
    """Make `owner.attr` (a launch entry point) run with the guard suspended."""
    original = getattr(owner, attr)

    def launch(*args: Any, **kwargs: Any) -> Any:
        with guard.suspended():
            return original(*args, **kwargs)

    setattr(owner, attr, launch)


def still_installed(guard: HostGuard) -> bool:
    """Whether `guard` is still on torch's dispatch-mode stack (a candidate could pop it)."""
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    return any(mode is guard for mode in _get_current_dispatch_mode_stack())
