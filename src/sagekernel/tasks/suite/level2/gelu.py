"""GELU (exact, erf form): out = 0.5 * x * (1 + erf(x / sqrt(2)))."""

import math

import torch
import torch.nn as nn

B = 64
D = 1000

SAGE_TASK = {
    "name": "gelu", "level": 2, "category": "activation",
    "description": "GELU (exact, erf form): out = 0.5 * x * (1 + erf(x / sqrt(2))).",
    "inputs": {"x": ["B", "D"]},
    "outputs": {"out": ["B", "D"]},
    "sizes": {"B": 64, "D": 1000},
    "variants": [{"B": 7, "D": 1531}, {"B": 33, "D": 33}],
    "special_values": ["nan", "signed_zero", "subnormal"],
    "dtype": "float32", "atol": 1e-5, "rtol": 1e-5,
}


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def get_inputs():
    return [torch.randn(B, D) * 2]


def get_init_inputs():
    return []
