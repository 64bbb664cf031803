"""CumSum along the last dimension."""

import torch
import torch.nn as nn

B = 64
D = 1000

SAGE_TASK = {
    "name": "cumsum", "level": 2, "category": "reduction",
    "description": "Inclusive prefix sum along the last dimension: out[b, d] = sum over j <= d of x[b, j].",
    "inputs": {"x": ["B", "D"]},
    "outputs": {"out": ["B", "D"]},
    "sizes": {"B": 64, "D": 1000},
    "variants": [{"B": 7, "D": 1531}, {"B": 33, "D": 33}],
    "special_values": ["nan", "inf"],
    "dtype": "float32", "atol": 1e-4, "rtol": 1e-4,
}


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x, dim=-1)


def get_inputs():
    return [torch.randn(B, D)]


def get_init_inputs():
    return []
