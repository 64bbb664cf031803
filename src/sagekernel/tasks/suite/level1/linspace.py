"""Linspace: N evenly spaced values from start to end inclusive."""

import torch
import torch.nn as nn

N = 20000
START = -2.0
END = 5.0

SAGE_TASK = {
    "name": "linspace", "level": 1, "category": "tensor_creation",
    "description": "out[i] = start + i * (end - start) / (N - 1) for i in [0, N), so out[0] = start and "
                   "out[N-1] = end (torch.linspace), float32; N >= 2.",
    "inputs": {},
    "outputs": {"out": ["N"]},
    "attrs": {"start": -2.0, "end": 5.0},
    "sizes": {"N": 20000},
    "variants": [{"N": 1531}, {"N": 7}, {"N": 100003}],
    "attr_domains": {"start": {"range": [-10.0, 0.0]}, "end": {"range": [0.5, 10.0]}},
    "size_rules": {"N": {"min": 2}},
    "dtype": "float32", "atol": 1e-5, "rtol": 1e-5,
}


class Model(nn.Module):
    def __init__(self, n: int, start: float, end: float):
        super().__init__()
        self.n = n
        self.start = start
        self.end = end

    def forward(self) -> torch.Tensor:
        return torch.linspace(self.start, self.end, self.n, dtype=torch.float64).to(torch.float32)


def get_inputs():
    return []


def get_init_inputs():
    return [N, START, END]
