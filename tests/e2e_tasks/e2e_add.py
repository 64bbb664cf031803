"""E2E fixture: out = a + b (elementwise, two inputs)."""

import torch
import torch.nn as nn

N = 4096

SAGE_TASK = {
    "name": "e2e_add", "level": 2, "category": "elementwise",
    "description": "Elementwise sum out = a + b of two float32 vectors.",
    "inputs": {"a": ["N"], "b": ["N"]},
    "outputs": {"out": ["N"]},
    "sizes": {"N": 4096},
    "variants": [{"N": 1531}],
    "dtype": "float32", "atol": 0.0, "rtol": 0.0,
}


class Model(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a + b


def get_inputs():
    return [torch.randn(N), torch.randn(N)]


def get_init_inputs():
    return []
