"""arange(n) * step + start in float32 (no inputs: a buffer registered in __init__ names the device)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def arange_kernel(out_ptr, n, start, step, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, offs.to(tl.float32) * step + start, mask=offs < n)


class ModelNew(nn.Module):
    anchor: torch.Tensor  # an empty buffer: it follows the module to its device

    def __init__(self, n: int, start: float, step: float):
        super().__init__()
        self.n = n
        self.start = start
        self.step = step
        self.register_buffer("anchor", torch.empty(0))

    def forward(self) -> torch.Tensor:
        out = torch.empty((self.n,), dtype=torch.float32, device=self.anchor.device)
        arange_kernel[(triton.cdiv(self.n, 1024),)](out, self.n, self.start, self.step, BLOCK=1024)
        return out
