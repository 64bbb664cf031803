"""Fused residual add + LayerNorm (returns both the sum and the normalised sum)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

B = 64
D = 1000
EPS = 1e-5

SAGE_TASK = {
    "name": "add_layer_norm", "level": 3, "category": "fused",
    "description": "s = x + residual; y = LayerNorm(s) over the last dimension with weight, bias and eps "
                   "(biased variance). Outputs y and s.",
    "inputs": {"x": ["B", "D"], "residual": ["B", "D"], "weight": ["D"], "bias": ["D"]},
    "outputs": {"y": ["B", "D"], "s": ["B", "D"]},
    "attrs": {"eps": 1e-5},
    "sizes": {"B": 64, "D": 1000},
    "variants": [{"B": 7, "D": 1531}, {"B": 33, "D": 33}],
    "structured_inputs": ["weight", "bias"],
    "special_values": ["nan", "inf", "subnormal"], "structured_domains": {"weight": "real", "bias": "real"},
    "attr_domains": {"eps": {"range": [1e-6, 0.1]}},
    "dtype": "float32", "atol": 1e-4, "rtol": 1e-4,
}


class Model(nn.Module):
    def __init__(self, eps: float):
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                bias: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        s = x + residual
        return F.layer_norm(s, (s.shape[-1],), weight, bias, self.eps), s


def get_inputs():
    return [torch.randn(B, D), torch.randn(B, D) * 2 + 1, 1 + 0.2 * torch.randn(D), 0.2 * torch.randn(D)]


def get_init_inputs():
    return [EPS]
