"""MulSigmoid: out = x * sigmoid(y), elementwise."""

import torch
import torch.nn as nn

B = 64
D = 1000

SAGE_TASK = {
    "name": "mul_sigmoid", "level": 2, "category": "activation",
    "description": "MulSigmoid: out = x * sigmoid(y), elementwise.",
    "inputs": {"x": ["B", "D"], "y": ["B", "D"]},
    "outputs": {"out": ["B", "D"]},
    "sizes": {"B": 64, "D": 1000},
    "variants": [{"B": 7, "D": 1531}, {"B": 33, "D": 33}],
    "special_values": ["nan", "signed_zero", "subnormal"],
    "dtype": "float32", "atol": 1e-5, "rtol": 1e-5,
}


class Model(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(y)


def get_inputs():
    return [torch.randn(B, D), torch.randn(B, D) * 2]


def get_init_inputs():
    return []
