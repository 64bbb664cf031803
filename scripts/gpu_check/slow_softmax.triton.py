"""A deliberately slow softmax: one program per row walking the row one element at a time."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def slow_softmax(x_ptr, out_ptr, D):
    row = tl.program_id(0).to(tl.int64)
    m = -float("inf")
    for c in range(0, D):
        m = tl.maximum(m, tl.load(x_ptr + row * D + c))
    s = 0.0
    for c in range(0, D):
        s += tl.exp(tl.load(x_ptr + row * D + c) - m)
    for c in range(0, D):
        tl.store(out_ptr + row * D + c, tl.exp(tl.load(x_ptr + row * D + c) - m) / s)


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, d = x.shape
        out = torch.empty_like(x)
        slow_softmax[(b,)](x, out, d, num_warps=1)
        return out
