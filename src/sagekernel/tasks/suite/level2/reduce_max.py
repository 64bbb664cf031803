"""ReduceMax over the last dimension."""

import torch
import torch.nn as nn

B = 128
D = 500

SAGE_TASK = {
    "name": "reduce_max", "level": 2, "category": "reduction",
    "description": "out[b] = max over d of x[b, d] (torch.amax over the last dimension).",
    "inputs": {"x": ["B", "D"]},
    "outputs": {"out": ["B"]},
    "sizes": {"B": 128, "D": 500},
    "variants": [{"B": 7, "D": 1531}, {"B": 1000, "D": 7}],
    "special_values": True, "ties": True,
    "dtype": "float32", "atol": 0.0, "rtol": 0.0,
}


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.amax(x, dim=-1)


def get_inputs():
    return [torch.randn(B, D)]


def get_init_inputs():
    return []
