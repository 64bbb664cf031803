"""Example task for the MCP transcript: y = 2x (elementwise)."""

import torch
import torch.nn as nn

N = 1 << 20

SAGE_TASK = {
    "name": "scale2", "level": 1, "category": "elementwise",
    "description": "Elementwise doubling y = 2 * x of a float32 vector.",
    "inputs": {"x": ["N"]},
    "outputs": {"out": ["N"]},
    "sizes": {"N": 1 << 20},
    "variants": [{"N": 100003}],
    "dtype": "float32", "atol": 0.0, "rtol": 0.0,
}


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2.0


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return []
