"""Asymmetric per-channel int8 dequantisation with scales and zero points."""

import torch
import torch.nn as nn

M = 128
N = 256

SAGE_TASK = {
    "name": "dequantize_per_channel", "level": 2, "category": "quantization",
    "description": "Per-channel (per column) dequantisation: "
                   "out[m, n] = (q[m, n] - zero_point[n]) * scale[n] "
                   "with int8 q, int32 zero points and float32 scales.",
    "inputs": {"q": ["M", "N"], "scale": ["N"], "zero_point": ["N"]},
    "outputs": {"out": ["M", "N"]},
    "sizes": {"M": 128, "N": 256},
    "variants": [{"M": 7, "N": 1531}, {"M": 1000, "N": 33}],
    "structured_inputs": ["scale"],
    "structured_domains": {"scale": "positive"},
    "dtype": "float32", "atol": 1e-6, "rtol": 1e-6,
}


class Model(nn.Module):
    def forward(self, q: torch.Tensor, scale: torch.Tensor, zero_point: torch.Tensor) -> torch.Tensor:
        return (q.to(torch.int32) - zero_point).to(scale.dtype) * scale


def get_inputs():
    return [
        torch.randint(-128, 128, (M, N), dtype=torch.int8),
        torch.rand(N) * 0.05 + 0.01,
        torch.randint(-8, 9, (N,), dtype=torch.int32),
    ]


def get_init_inputs():
    return []
