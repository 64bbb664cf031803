"""RMSNorm over the last dimension with a learned weight."""

import torch
import torch.nn as nn

B = 64
D = 1000
EPS = 1e-6

SAGE_TASK = {
    "name": "rms_norm", "level": 2, "category": "normalization",
    "description": "RMSNorm over the last dimension with a learned weight: "
                   "out = x / sqrt(mean(x^2) + eps) * weight.",
    "inputs": {"x": ["B", "D"], "weight": ["D"]},
    "outputs": {"out": ["B", "D"]},
    "attrs": {"eps": 1e-6},
    "sizes": {"B": 64, "D": 1000},
    "variants": [{"B": 7, "D": 1531}, {"B": 33, "D": 64}],
    "structured_inputs": ["weight"],
    "special_values": ["nan", "inf", "subnormal"], "structured_domains": {"weight": "real"},
    "attr_domains": {"eps": {"range": [1e-6, 0.1]}},
    "dtype": "float32", "atol": 1e-4, "rtol": 1e-4,
}


class Model(nn.Module):
    def __init__(self, eps: float):
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * weight


def get_inputs():
    return [torch.randn(B, D), 1 + 0.2 * torch.randn(D)]


def get_init_inputs():
    return [EPS]
