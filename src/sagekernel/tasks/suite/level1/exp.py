"""Exp: elementwise natural exponential."""

import torch
import torch.nn as nn

B = 64
D = 1000

SAGE_TASK = {
    "name": "exp", "level": 1, "category": "math",
    "description": "Elementwise e^x of a float32 matrix (overflow gives +inf, as in IEEE float).",
    "inputs": {"x": ["B", "D"]},
    "outputs": {"out": ["B", "D"]},
    "sizes": {"B": 64, "D": 1000},
    "variants": [{"B": 7, "D": 1531}, {"B": 33, "D": 33}],
    "special_values": True,
    "dtype": "float32", "atol": 1e-5, "rtol": 1e-5,
}


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.exp(x)


def get_inputs():
    return [torch.randn(B, D) * 2]


def get_init_inputs():
    return []
