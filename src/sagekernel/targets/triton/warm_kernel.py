"""A kernel of the runtime's own, launched once on the interpreter before the candidate is loaded
(interpreter_model._warm_interpreter): its first launches import modules lazily, and the runtime
stops opening files once the candidate is loaded. It touches the common paths: loads and stores
with masks, reductions, elementwise math, `tl.where`, casts, `tl.dot` and atomics."""

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl


@triton.jit
def _warm(x_ptr, a_ptr, out_ptr, dot_ptr, n, BLOCK: tl.constexpr, M: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    top = tl.max(x, axis=0)
    e = tl.exp(x - top)
    y = e / tl.sum(e, axis=0) + tl.sqrt(tl.abs(x)) + tl.log(tl.abs(x) + 1.0)
    y = tl.where(x > 0, y, tl.minimum(y, 0.5)) + tl.cumsum(x, axis=0) * 0.0
    tl.store(out_ptr + offs, y.to(tl.float16).to(tl.float32), mask=mask)
    tl.atomic_add(out_ptr + offs, tl.zeros_like(y), mask=mask)
    rows = tl.arange(0, M)
    a = tl.load(a_ptr + rows[:, None] * M + rows[None, :])
    tl.store(dot_ptr + rows[:, None] * M + rows[None, :], tl.dot(a, a) + tl.dot(a, a, input_precision="ieee"))


def warm_launch(x: Any, a: Any) -> None:
    import torch

    out = torch.empty_like(x)
    dot = torch.empty_like(a)
    _warm[(triton.cdiv(x.numel(), 32),)](x, a, out, dot, x.numel(), BLOCK=32, M=a.shape[0])
