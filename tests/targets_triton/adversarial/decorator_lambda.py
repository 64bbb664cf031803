"""HACK: a heuristics lambda (host code run at launch) writes the torch result into the output. EXPECT: lint tensor_method; runtime host_compute"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.heuristics({"DONE": lambda args: args["out_ptr"].copy_(args["x_ptr"].softmax(-1)) is None})
@triton.jit
def softmax_rows(x_ptr, out_ptr, D, BLOCK: tl.constexpr, DONE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < D
    x = tl.load(x_ptr + row * D + cols, mask=mask, other=0.0)
    if not DONE:
        tl.store(out_ptr + row * D + cols, x, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        softmax_rows[(x.shape[0],)](x, out, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
        return out
