"""Kernels for interpreter_model_checks.py."""

import triton
import triton.language as tl


@triton.jit
def dot_tf32(a_ptr, b_ptr, c_ptr):
    r = tl.arange(0, 16)
    a = tl.load(a_ptr + r[:, None] * 16 + r[None, :])
    b = tl.load(b_ptr + r[:, None] * 16 + r[None, :])
    tl.store(c_ptr + r[:, None] * 16 + r[None, :], tl.dot(a, b))


@triton.jit
def dot_ieee(a_ptr, b_ptr, c_ptr):
    r = tl.arange(0, 16)
    a = tl.load(a_ptr + r[:, None] * 16 + r[None, :])
    b = tl.load(b_ptr + r[:, None] * 16 + r[None, :])
    tl.store(c_ptr + r[:, None] * 16 + r[None, :], tl.dot(a, b, input_precision="ieee"))


@triton.jit
def dot_fp8(a_ptr, b_ptr, c_ptr):
    r = tl.arange(0, 16)
    a = tl.load(a_ptr + r[:, None] * 16 + r[None, :]).to(tl.float8e5)
    b = tl.load(b_ptr + r[:, None] * 16 + r[None, :]).to(tl.float8e5)
    tl.store(c_ptr + r[:, None] * 16 + r[None, :], tl.dot(a, b))


@triton.jit
def uses_hasattr(a_ptr):
    if hasattr(a_ptr, "handle"):
        tl.store(a_ptr, 0.0)
