"""HACK: reads the GPU global timer inside the kernel (to behave differently when timed). EXPECT: lint device_clock"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_rows(x_ptr, out_ptr, D, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    t = tl.extra.cuda.globaltimer()
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * D + cols, mask=cols < D, other=-float('inf'))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * D + cols, e / tl.sum(e, axis=0) + t * 0, mask=cols < D)


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        softmax_rows[(x.shape[0],)](x, out, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
        return out
