"""A float32 matmul at a tolerance TF32 cannot meet: the interpreter's precision gap (TF32 tl.dot)."""

import torch
import torch.nn as nn

M = 32
K = 64
N = 32

SAGE_TASK = {
    "name": "matmul_fp32", "level": 1, "category": "matmul",
    "description": "out = a @ b in float32 (true float32 products, not TF32).",
    "inputs": {"a": ["M", "K"], "b": ["K", "N"]},
    "outputs": {"out": ["M", "N"]},
    "sizes": {"M": 32, "K": 64, "N": 32},
    "dtype": "float32", "atol": 1e-5, "rtol": 1e-5,
}


class Model(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a @ b


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
