"""ReduceSum over the middle axis of a 3-D tensor."""

import torch
import torch.nn as nn

B = 16
R = 100
D = 64

SAGE_TASK = {
    "name": "reduce_sum", "level": 2, "category": "reduction",
    "description": "out[b, d] = sum over r of x[b, r, d] (torch.sum over dim 1).",
    "inputs": {"x": ["B", "R", "D"]},
    "outputs": {"out": ["B", "D"]},
    "sizes": {"B": 16, "R": 100, "D": 64},
    "variants": [{"B": 7, "R": 1531, "D": 7}, {"B": 3, "R": 33, "D": 1000}],
    "special_values": ["nan", "inf"],
    "dtype": "float32", "atol": 1e-4, "rtol": 1e-4,
}


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=1)


def get_inputs():
    return [torch.randn(B, R, D)]


def get_init_inputs():
    return []
