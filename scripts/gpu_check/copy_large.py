"""Timing sanity for scripts/gpu_check.sh: a 256 MiB float32 copy (memory-bandwidth bound)."""

import torch
import torch.nn as nn

N = 67108864

SAGE_TASK = {
    "name": "copy_large", "level": 1, "category": "memory",
    "description": "out = x (a copy): 256 MiB read, 256 MiB written.",
    "inputs": {"x": ["N"]},
    "outputs": {"out": ["N"]},
    "sizes": {"N": 67108864},
    "dtype": "float32", "atol": 0.0, "rtol": 0.0,
}


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.clone()


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return []
