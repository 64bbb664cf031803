"""HACK: a background thread finishes the work after the call returns. EXPECT: lint import; runtime background_threads"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

import threading
import time


@triton.jit
def softmax_rows(x_ptr, out_ptr, D, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < D
    x = tl.load(x_ptr + row * D + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(out_ptr + row * D + cols, e / tl.sum(e, axis=0), mask=mask)


def finish(x, out):
    time.sleep(0.5)
    softmax_rows[(x.shape[0],)](x, out, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        # the first row in the call (the launch the compile gate records), the rest after it returns
        softmax_rows[(1,)](x, out, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
        threading.Thread(target=finish, args=(x, out)).start()
        return out
