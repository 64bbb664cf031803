"""A bfloat16 task for the interpreter's bf16 gap: out = 2 x + 1 in bf16."""

import torch
import torch.nn as nn

N = 300

SAGE_TASK = {
    "name": "scale_bf16", "level": 1, "category": "elementwise",
    "description": "out = 2 x + 1 in bfloat16.",
    "inputs": {"x": ["N"]},
    "outputs": {"out": ["N"]},
    "sizes": {"N": 300},
    "dtype": "bfloat16", "atol": 1e-2, "rtol": 1e-2,
}


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2 + 1


def get_inputs():
    return [torch.randn(N).to(torch.bfloat16)]


def get_init_inputs():
    return []
