"""LayerNorm over the last dimension (biased variance): one program per row, two-pass in registers."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def layer_norm_rows(x_ptr, w_ptr, b_ptr, out_ptr, D, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < D
    x = tl.load(x_ptr + row * D + cols, mask=mask, other=0.0)
    mean = tl.sum(x, axis=0) / D
    xc = tl.where(mask, x - mean, 0.0)
    var = tl.sum(xc * xc, axis=0) / D
    y = xc / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    bias = tl.load(b_ptr + cols, mask=mask, other=0.0)
    tl.store(out_ptr + row * D + cols, y * w + bias, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, eps: float):
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        b, d = x.shape
        out = torch.empty_like(x)
        layer_norm_rows[(b,)](x, weight, bias, out, d, self.eps, BLOCK=triton.next_power_of_2(d))
        return out
