"""Row max (amax over the last dimension): one program per row."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_max(x_ptr, out_ptr, D, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.full((BLOCK,), -float("inf"), tl.float32)
    nans = tl.zeros((BLOCK,), tl.int32)
    for start in range(0, D, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * D + cols, mask=cols < D, other=-float("inf"))
        acc = tl.maximum(acc, x)
        nans = nans | (x != x).to(tl.int32)  # torch.amax propagates NaN; tl.maximum may drop it
    best = tl.max(acc, axis=0)
    tl.store(out_ptr + row, tl.where(tl.max(nans, axis=0) > 0, float("nan"), best))


class ModelNew(nn.Module):

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, d = x.shape
        out = torch.empty((b,), dtype=x.dtype, device=x.device)
        row_max[(b,)](x, out, d, BLOCK=256)
        return out
