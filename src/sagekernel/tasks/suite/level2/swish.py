"""Swish: out = x * sigmoid(beta * x) with a scalar beta."""

import torch
import torch.nn as nn

B = 64
D = 1000
BETA = 1.5

SAGE_TASK = {
    "name": "swish", "level": 2, "category": "activation",
    "description": "Swish: out = x * sigmoid(beta * x) with a scalar beta.",
    "inputs": {"x": ["B", "D"]},
    "outputs": {"out": ["B", "D"]},
    "attrs": {"beta": 1.5},
    "sizes": {"B": 64, "D": 1000},
    "variants": [{"B": 7, "D": 1531}, {"B": 33, "D": 33}],
    "special_values": ["nan", "signed_zero", "subnormal"],
    "attr_domains": {"beta": {"range": [0.25, 3.0]}},
    "dtype": "float32", "atol": 1e-5, "rtol": 1e-5,
}


class Model(nn.Module):
    def __init__(self, beta: float):
        super().__init__()
        self.beta = beta

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(self.beta * x)


def get_inputs():
    return [torch.randn(B, D) * 2]


def get_init_inputs():
    return [BETA]
