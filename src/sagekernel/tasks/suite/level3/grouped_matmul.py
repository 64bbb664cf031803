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
    "edge_cases": ["empty_last_group", "empty_first_group", "single_group"],
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


def _draw(shape, gen, distribution):
    if distribution == "uniform":
        return torch.rand(shape, generator=gen) * 2 - 1
    if distribution == "large_magnitude":
        return torch.randn(shape, generator=gen) * 1000
    if distribution == "large_offset":
        return torch.randn(shape, generator=gen) + 100 + 900 * torch.rand((), generator=gen)
    return torch.randn(shape, generator=gen)


def _group_sizes(m, g, gen, edge):
    """Random consecutive groups summing to m; the edge cases force an empty first or last group,
    or every row in one group."""
    if edge == "single_group" or g == 1:
        sizes = torch.zeros(g, dtype=torch.int64)
        sizes[int(torch.randint(0, g, (1,), generator=gen))] = m
        return sizes
    cuts = torch.sort(torch.randint(0, m + 1, (g - 1,), generator=gen)).values
    bounds = torch.cat((torch.zeros(1, dtype=torch.int64), cuts, torch.full((1,), m, dtype=torch.int64)))
    if edge == "empty_last_group":
        bounds[-2] = m
    elif edge == "empty_first_group":
        bounds[1] = 0
    return torch.diff(torch.sort(bounds).values)


def make_inputs(sizes, gen, distribution):
    m, k, n, g = sizes["M"], sizes["K"], sizes["N"], sizes["G"]
    # the weights are re-drawn for every distribution: a kernel may assume nothing about them
    x = _draw((m, k), gen, distribution)
    w = _draw((g, k, n), gen, "normal") / k ** 0.5
    return [x, w, _group_sizes(m, g, gen, distribution)]


def get_inputs():
    return make_inputs({"M": M, "K": K, "N": N, "G": G}, None, "default")


def get_init_inputs():
    return []
