"""Eye: an N x M matrix with ones on the main diagonal."""

import torch
import torch.nn as nn

N = 200
M = 300

SAGE_TASK = {
    "name": "eye", "level": 1, "category": "tensor_creation",
    "description": "out[i, j] = 1 if i == j else 0, float32, N rows and M columns (torch.eye(N, M)).",
    "inputs": {},
    "outputs": {"out": ["N", "M"]},
    "sizes": {"N": 200, "M": 300},
    "variants": [{"N": 7, "M": 1531}, {"N": 333, "M": 33}],
    "dtype": "float32", "atol": 0.0, "rtol": 0.0,
}


class Model(nn.Module):
    def __init__(self, n: int, m: int):
        super().__init__()
        self.n = n
        self.m = m

    def forward(self) -> torch.Tensor:
        return torch.eye(self.n, self.m, dtype=torch.float32)


def get_inputs():
    return []


def get_init_inputs():
    return [N, M]
