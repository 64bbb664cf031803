"""SmoothL1 (Huber-style) loss without reduction, with a beta threshold."""

import torch
import torch.nn as nn
import torch.nn.functional as F

B = 64
D = 1000
BETA = 0.5

SAGE_TASK = {
    "name": "smooth_l1_loss", "level": 2, "category": "loss",
    "description": "SmoothL1 (Huber-style) loss without reduction: d = pred - target; out = 0.5 * d^2 / beta"
                   " if |d| < beta else |d| - 0.5 * beta.",
    "inputs": {"pred": ["B", "D"], "target": ["B", "D"]},
    "outputs": {"out": ["B", "D"]},
    "attrs": {"beta": 0.5},
    "sizes": {"B": 64, "D": 1000},
    "variants": [{"B": 7, "D": 1531}, {"B": 33, "D": 33}],
    "special_values": ["nan", "inf"], "ties": True,
    "attr_domains": {"beta": {"range": [0.1, 2.0]}},
    "dtype": "float32", "atol": 1e-5, "rtol": 1e-5,
}


class Model(nn.Module):
    def __init__(self, beta: float):
        super().__init__()
        self.beta = beta

    def forward(self, pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.smooth_l1_loss(pred, target, reduction="none", beta=self.beta)


def get_inputs():
    return [torch.randn(B, D), torch.randn(B, D)]


def get_init_inputs():
    return [BETA]
