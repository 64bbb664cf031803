"""Arange: the sequence start, start + step, ..., start + (N - 1) * step."""

import torch
import torch.nn as nn

N = 20000
START = -3.5
STEP = 0.37

SAGE_TASK = {
    "name": "arange", "level": 1, "category": "tensor_creation",
    "description": "out[i] = start + i * step for i in [0, N) (torch.arange by count), float32.",
    "inputs": {},
    "outputs": {"out": ["N"]},
    "attrs": {"start": -3.5, "step": 0.37},
    "sizes": {"N": 20000},
    "variants": [{"N": 1531}, {"N": 7}, {"N": 100003}],
    "attr_domains": {"start": {"range": [-10.0, 10.0]}, "step": {"range": [0.05, 2.0]}},
    "dtype": "float32", "atol": 1e-5, "rtol": 1e-6,
}


class Model(nn.Module):
    def __init__(self, n: int, start: float, step: float):
        super().__init__()
        self.n = n
        self.start = start
        self.step = step

    def forward(self) -> torch.Tensor:
        return (torch.arange(self.n, dtype=torch.float64) * self.step + self.start).to(torch.float32)


def get_inputs():
    return []


def get_init_inputs():
    return [N, START, STEP]
