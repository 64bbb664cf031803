"""LogSoftmax over the last dimension (rows of length D), numerically stable."""

import torch
import torch.nn as nn

B = 128
D = 500

SAGE_TASK = {
    "name": "log_softmax", "level": 2, "category": "activation",
    "description": "LogSoftmax over the last dimension (rows of length D), numerically stable.",
    "inputs": {"x": ["B", "D"]},
    "outputs": {"out": ["B", "D"]},
    "sizes": {"B": 128, "D": 500},
    "variants": [{"B": 7, "D": 1531}, {"B": 33, "D": 33}],
    "special_values": ["nan", "inf"], "ties": True,
    "dtype": "float32", "atol": 1e-5, "rtol": 1e-5,
}


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(B, D) * 3]


def get_init_inputs():
    return []
