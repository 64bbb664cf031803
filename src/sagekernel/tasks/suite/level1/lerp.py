"""Lerp: linear interpolation between two tensors with a per-element weight."""

import torch
import torch.nn as nn

B = 64
D = 1000

SAGE_TASK = {
    "name": "lerp", "level": 1, "category": "math",
    "description": "out = start + weight * (end - start) elementwise (torch.lerp with a tensor weight).",
    "inputs": {"start": ["B", "D"], "end": ["B", "D"], "weight": ["B", "D"]},
    "outputs": {"out": ["B", "D"]},
    "sizes": {"B": 64, "D": 1000},
    "variants": [{"B": 7, "D": 1531}, {"B": 33, "D": 33}],
    "structured_inputs": ["weight"],
    "structured_domains": {"weight": "unit_interval"},
    "dtype": "float32", "atol": 1e-5, "rtol": 1e-5,
}


class Model(nn.Module):
    def forward(self, start: torch.Tensor, end: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return torch.lerp(start, end, weight)


def get_inputs():
    return [torch.randn(B, D), torch.randn(B, D), torch.rand(B, D)]


def get_init_inputs():
    return []
