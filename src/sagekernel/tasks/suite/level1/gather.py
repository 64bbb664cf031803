"""Gather: pick elements of each row by index (torch.gather along dim 1)."""

import torch
import torch.nn as nn

B = 64
D = 1000
K = 300

SAGE_TASK = {
    "name": "gather", "level": 1, "category": "index",
    "description": "out[b, k] = x[b, index[b, k]] (torch.gather along dim 1); indices are int64 in [0, D).",
    "inputs": {"x": ["B", "D"], "index": ["B", "K"]},
    "outputs": {"out": ["B", "K"]},
    "sizes": {"B": 64, "D": 1000, "K": 300},
    "variants": [{"B": 7, "D": 1531, "K": 1000}, {"B": 33, "D": 33, "K": 77}],
    "special_values": {"x": ["nan", "inf", "signed_zero", "subnormal"]},
    "dtype": "float32", "atol": 0.0, "rtol": 0.0,
}


class Model(nn.Module):
    def forward(self, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        return torch.gather(x, 1, index)


def get_inputs():
    return [torch.randn(B, D), torch.randint(0, D, (B, K), dtype=torch.int64)]


def get_init_inputs():
    return []
