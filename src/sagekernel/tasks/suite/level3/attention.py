"""Causal scaled dot-product attention for small heads."""

import torch
import torch.nn as nn

B = 2
H = 4
S = 64
D = 32
SCALE = 0.125

SAGE_TASK = {
    "name": "attention", "level": 3, "category": "fused",
    "description": "Causal attention per (batch, head): scores[i, j] = scale * dot(q[i], k[j]) for j <= i "
                   "(j > i is masked out), p = softmax over j, out[i] = sum_j p[i, j] * v[j]. "
                   "q, k, v and out are [B, H, S, D].",
    "inputs": {"q": ["B", "H", "S", "D"], "k": ["B", "H", "S", "D"], "v": ["B", "H", "S", "D"]},
    "outputs": {"out": ["B", "H", "S", "D"]},
    "attrs": {"scale": 0.125},
    "sizes": {"B": 2, "H": 4, "S": 64, "D": 32},
    "variants": [{"B": 1, "H": 3, "S": 33, "D": 16}, {"B": 1, "H": 2, "S": 100, "D": 24}],
    "attr_domains": {"scale": {"range": [0.05, 0.5]}},
    "dtype": "float32", "atol": 1e-4, "rtol": 1e-4,
}


class Model(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        s = q.shape[-2]
        scores = torch.matmul(q, k.transpose(-1, -2)) * self.scale
        mask = torch.triu(torch.ones(s, s, dtype=torch.bool), diagonal=1)
        scores = scores.masked_fill(mask, float("-inf"))
        return torch.matmul(torch.softmax(scores, dim=-1), v)


def get_inputs():
    return [torch.randn(B, H, S, D) * 2, torch.randn(B, H, S, D) * 2, torch.randn(B, H, S, D)]


def get_init_inputs():
    return [SCALE]
