"""RMSNorm over the last dimension: one program per row, the row in one block."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rms_norm_rows(x_ptr, w_ptr, out_ptr, D, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < D
    x = tl.load(x_ptr + row * D + cols, mask=mask, other=0.0)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    inv = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / D + eps)
    tl.store(out_ptr + row * D + cols, x * inv * w, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, eps: float):
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        b, d = x.shape
        out = torch.empty_like(x)
        rms_norm_rows[(b,)](x, weight, out, d, self.eps, BLOCK=triton.next_power_of_2(d))
        return out
