"""LayerNorm over the last dimension with a learned weight and bias."""

import torch
import torch.nn as nn
import torch.nn.functional as F

B = 64
D = 1000
EPS = 1e-5

SAGE_TASK = {
    "name": "layer_norm", "level": 2, "category": "normalization",
    "description": "LayerNorm over the last dimension: out = (x - mean) / sqrt(var + eps) * weight + bias, "
                   "with the biased variance of each row.",
    "inputs": {"x": ["B", "D"], "weight": ["D"], "bias": ["D"]},
    "outputs": {"out": ["B", "D"]},
    "attrs": {"eps": 1e-5},
    "sizes": {"B": 64, "D": 1000},
    "variants": [{"B": 7, "D": 1531}, {"B": 33, "D": 33}],
    "structured_inputs": ["weight", "bias"],
    "special_values": ["nan", "inf", "subnormal"], "ties": True,
    "structured_domains": {"weight": "real", "bias": "real"},
    "attr_domains": {"eps": {"range": [1e-6, 0.1]}},
    "dtype": "float32", "atol": 1e-4, "rtol": 1e-4,
}


class Model(nn.Module):
    def __init__(self, eps: float):
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, (x.shape[-1],), weight, bias, self.eps)


def get_inputs():
    return [torch.randn(B, D) * 2 + 0.5, 1 + 0.2 * torch.randn(D), 0.2 * torch.randn(D)]


def get_init_inputs():
    return [EPS]
