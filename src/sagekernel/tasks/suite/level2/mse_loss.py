"""MSELoss with mean reduction."""

import torch
import torch.nn as nn
import torch.nn.functional as F

B = 32
D = 1000

SAGE_TASK = {
    "name": "mse_loss", "level": 2, "category": "loss",
    "description": "Mean squared error over all elements: out = sum((pred - target)^2) / (B * D), "
                   "a single float32 value.",
    "inputs": {"pred": ["B", "D"], "target": ["B", "D"]},
    "outputs": {"out": []},
    "sizes": {"B": 32, "D": 1000},
    "variants": [{"B": 7, "D": 1531}, {"B": 33, "D": 33}],
    "special_values": ["nan", "inf"],
    "dtype": "float32", "atol": 1e-5, "rtol": 1e-4,
}


class Model(nn.Module):
    def forward(self, pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.mse_loss(pred, target, reduction="mean")


def get_inputs():
    return [torch.randn(B, D), torch.randn(B, D)]


def get_init_inputs():
    return []
