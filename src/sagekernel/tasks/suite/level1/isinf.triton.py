"""Elementwise isinf(x) into a bool tensor."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    out = (x == float('inf')) | (x == float('-inf'))
    tl.store(out_ptr + offs, out, mask=mask)


class ModelNew(nn.Module):

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x, dtype=torch.bool)
        n = x.numel()
        kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
        return out
