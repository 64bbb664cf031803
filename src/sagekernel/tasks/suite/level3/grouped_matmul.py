"""Grouped matmul (GMM): consecutive row groups of x each multiply their own weight matrix."""

import torch
import torch.nn as nn

M = 256
K = 64
N = 96
G = 4

SAGE_TASK = {
    "name": "grouped_matmul", "level": 3, "category": "fused",
    "description": "x's rows are split into G consecutive groups of group_sizes[g] rows (int64, sum = M, "
                   "a group may be empty); out[rows of g] = x[rows of g] @ w[g], w[g] is [K, N].",
    "inputs": {"x": ["M", "K"], "w": ["G", "K", "N"], "group_sizes": ["G"]},
    "outputs": {"out": ["M", "N"]},
    "sizes": {"M": 256, "K": 64, "N": 96, "G": 4},
    "variants": [{"M": 100, "K": 33, "N": 7, "G": 3}, {"M": 1000, "K": 16, "N": 33, "G": 7}],
    "structured_inputs": ["w"],
    "dtype": "float32", "atol": 1e-4, "rtol": 1e-4,
}


class Model(nn.Module):
    def forward(self, x: torch.Tensor, w: torch.Tensor, group_sizes: torch.Tensor) -> torch.Tensor:
        if int(group_sizes.sum()) != x.shape[0] or bool((group_sizes < 0).any()):
            raise ValueError("group_sizes must be non-negative and sum to M")
        out = x.new_empty(x.shape[0], w.shape[-1])
        start = 0
        for g, rows in enumerate(group_sizes.tolist()):
            out[start:start + rows] = x[start:start + rows] @ w[g]
            start += rows
        return out


def get_inputs():
    cuts = torch.sort(torch.randint(0, M + 1, (G - 1,))).values
    bounds = torch.cat((torch.zeros(1, dtype=torch.int64), cuts, torch.full((1,), M, dtype=torch.int64)))
    return [torch.randn(M, K), torch.randn(G, K, N) / K ** 0.5, torch.diff(bounds)]


def get_init_inputs():
    return []
