"""GroupNorm: normalise each (sample, group) block, then a per-channel affine."""

import torch
import torch.nn as nn
import torch.nn.functional as F

N = 4
G = 8
CG = 4
L = 256
EPS = 1e-5

SAGE_TASK = {
    "name": "group_norm", "level": 2, "category": "normalization",
    "description": "GroupNorm of x with C = G * CG channels of length L, viewed as [N, G, CG, L]: each "
                   "(n, g) block of CG * L values is normalised by its mean and biased variance, then "
                   "channel (g, c) is scaled by weight[g, c] and shifted by bias[g, c] "
                   "(torch.nn.functional.group_norm with G groups).",
    "inputs": {"x": ["N", "G", "CG", "L"], "weight": ["G", "CG"], "bias": ["G", "CG"]},
    "outputs": {"out": ["N", "G", "CG", "L"]},
    "attrs": {"eps": 1e-5},
    "sizes": {"N": 4, "G": 8, "CG": 4, "L": 256},
    "variants": [{"N": 3, "G": 5, "CG": 3, "L": 33}, {"N": 2, "G": 1, "CG": 7, "L": 1000}],
    "structured_inputs": ["weight", "bias"],
    "special_values": ["nan", "inf", "subnormal"], "structured_domains": {"weight": "real", "bias": "real"},
    "attr_domains": {"eps": {"range": [1e-6, 0.1]}},
    "dtype": "float32", "atol": 1e-4, "rtol": 1e-4,
}


class Model(nn.Module):
    def __init__(self, eps: float):
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        n, g, cg, length = x.shape
        y = F.group_norm(x.reshape(n, g * cg, length), g, weight.reshape(-1), bias.reshape(-1), self.eps)
        return y.reshape(n, g, cg, length)


def get_inputs():
    return [torch.randn(N, G, CG, L) * 3 - 1, 1 + 0.2 * torch.randn(G, CG), 0.2 * torch.randn(G, CG)]


def get_init_inputs():
    return [EPS]
