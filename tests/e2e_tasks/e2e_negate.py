"""E2E fixture: y = -x (elementwise)."""

import torch
import torch.nn as nn

N = 4096

SAGE_TASK = {
    "name": "e2e_negate", "level": 1, "category": "elementwise",
    "description": "Elementwise negation y = -x of a float32 vector.",
    "inputs": {"x": ["N"]},
    "outputs": {"out": ["N"]},
    "sizes": {"N": 4096},
    "variants": [{"N": 1531}],
    "dtype": "float32", "atol": 0.0, "rtol": 0.0,
}


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return -x


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return []
