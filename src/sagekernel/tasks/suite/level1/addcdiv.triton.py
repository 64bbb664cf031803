"""Elementwise x + value * t1 / t2."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def kernel(x_ptr, t1_ptr, t2_ptr, out_ptr, n, value, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    t1 = tl.load(t1_ptr + offs, mask=mask)
    t2 = tl.load(t2_ptr + offs, mask=mask)
    out = x + value * (t1 / t2)
    tl.store(out_ptr + offs, out, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, value: float):
        super().__init__()
        self.value = value

    def forward(self, x: torch.Tensor, t1: torch.Tensor, t2: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        n = x.numel()
        kernel[(triton.cdiv(n, 1024),)](x, t1, t2, out, n, self.value, BLOCK=1024)
        return out
