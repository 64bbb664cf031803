"""The per-task budget of the size policy (sizepolicy.py), and building over-budget tensors
without storage. A module of its own, below both the size policy and the input builders
(inputs.py), which each need it: the budget is read from the environment (SAGE_TASK_MAX_BYTES,
SAGE_TASK_MAX_FLOPS; part of a run's identity, runner/environment.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import torch

DEFAULT_MAX_BYTES = 32 * 2**20
DEFAULT_MAX_FLOPS = 5e8


def max_bytes() -> int:
    return int(float(os.environ.get("SAGE_TASK_MAX_BYTES", DEFAULT_MAX_BYTES)))


def max_flops() -> float:
    return float(os.environ.get("SAGE_TASK_MAX_FLOPS", DEFAULT_MAX_FLOPS))


def budget_text() -> str:
    return f"{max_bytes() / 2**20:.0f} MiB, {max_flops() / 1e6:.0f} MFLOP"


#: Constructors whose size comes from their arguments (torch.utils._device's list, less those
#: that copy data the caller already holds: tensor, as_tensor, asarray).
SHAPED_CONSTRUCTORS = ("empty", "empty_strided", "empty_permuted", "full", "ones", "zeros", "rand",
                       "randn", "randint", "randperm", "arange", "range", "eye", "linspace", "logspace")


@contextmanager
def oversized_on_meta(limit: int | None = None) -> Iterator[None]:
    """Inside the block, a tensor constructor asked for more than `limit` bytes (default: the
    per-group budget, `max_bytes`) on the CPU returns a meta tensor of that shape and dtype
    instead of allocating it. An input builder that draws every case at once (MultiKernelBench's
    ``get_input_groups()``: 50 cases, one of 3.6 GB) then yields its over-budget cases without
    storage, and the loader leaves them out by size (groups.py) instead of dying of memory. Small
    tensors are built as usual, from the same random draws. Decided the same way in every process."""
    from torch.overrides import TorchFunctionMode

    bound = max_bytes() if limit is None else limit
    shaped = {getattr(torch, name) for name in SHAPED_CONSTRUCTORS if hasattr(torch, name)}

    class _Mode(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func in shaped and "out" not in kwargs and str(kwargs.get("device") or "cpu") == "cpu":
                probe = func(*args, **{**kwargs, "device": "meta"})
                if isinstance(probe, torch.Tensor) and probe.numel() * probe.element_size() > bound:
                    return probe
            return func(*args, **kwargs)

    with _Mode():
        yield
