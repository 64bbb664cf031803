"""eye(n, m) in float32: a 2-D grid of tiles, 1.0 on the diagonal (no inputs: see arange)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def eye_kernel(out_ptr, N, M, BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.program_id(1) * BN + tl.arange(0, BN)
    r = rows[:, None]
    c = cols[None, :]
    value = tl.where(r == c, 1.0, 0.0)
    tl.store(out_ptr + r * M + c, value, mask=(r < N) & (c < M))


class ModelNew(nn.Module):
    anchor: torch.Tensor  # an empty buffer: it follows the module to its device

    def __init__(self, n: int, m: int):
        super().__init__()
        self.n = n
        self.m = m
        self.register_buffer("anchor", torch.empty(0))

    def forward(self) -> torch.Tensor:
        out = torch.empty((self.n, self.m), dtype=torch.float32, device=self.anchor.device)
        grid = (triton.cdiv(self.n, 32), triton.cdiv(self.m, 32))
        eye_kernel[grid](out, self.n, self.m, BM=32, BN=32)
        return out
