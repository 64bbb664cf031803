"""Fused matmul + bias + exact GELU (a transformer MLP up-projection)."""

import math

import torch
import torch.nn as nn

M = 128
K = 256
N = 192

SAGE_TASK = {
    "name": "matmul_bias_gelu", "level": 3, "category": "fused",
    "description": "out = gelu(x @ w + bias) with x [M, K], w [K, N], bias [N] and the exact erf GELU "
                   "gelu(z) = 0.5 * z * (1 + erf(z / sqrt(2))).",
    "inputs": {"x": ["M", "K"], "w": ["K", "N"], "bias": ["N"]},
    "outputs": {"out": ["M", "N"]},
    "sizes": {"M": 128, "K": 256, "N": 192},
    "variants": [{"M": 7, "K": 33, "N": 1531}, {"M": 100, "K": 1000, "N": 33}],
    "structured_inputs": ["w", "bias"],
    "structured_domains": {"w": "real", "bias": "real"},
    "dtype": "float32", "atol": 1e-4, "rtol": 1e-4,
}


class Model(nn.Module):
    def forward(self, x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        z = torch.matmul(x, w) + bias
        return 0.5 * z * (1.0 + torch.erf(z / math.sqrt(2.0)))


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N) / K ** 0.5, torch.randn(N) * 0.5]


def get_init_inputs():
    return []
