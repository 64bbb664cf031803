"""Abs: elementwise absolute value."""

import torch
import torch.nn as nn

B = 64
D = 1000

SAGE_TASK = {
    "name": "abs", "level": 1, "category": "math",
    "description": "Elementwise absolute value |x| of a float32 matrix.",
    "inputs": {"x": ["B", "D"]},
    "outputs": {"out": ["B", "D"]},
    "sizes": {"B": 64, "D": 1000},
    "variants": [{"B": 7, "D": 1531}, {"B": 33, "D": 33}],
    "special_values": True, "ties": True,
    "dtype": "float32", "atol": 0.0, "rtol": 0.0,
}


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.abs(x)


def get_inputs():
    return [torch.randn(B, D)]


def get_init_inputs():
    return []
