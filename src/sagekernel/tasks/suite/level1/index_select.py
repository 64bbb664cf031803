"""IndexSelect: pick whole rows of a matrix by index (torch.index_select along dim 0)."""

import torch
import torch.nn as nn

N = 500
D = 128
K = 300

SAGE_TASK = {
    "name": "index_select", "level": 1, "category": "index",
    "description": "out[k, :] = x[index[k], :] (torch.index_select along dim 0); indices are int64 in "
                   "[0, N) and may repeat.",
    "inputs": {"x": ["N", "D"], "index": ["K"]},
    "outputs": {"out": ["K", "D"]},
    "sizes": {"N": 500, "D": 128, "K": 300},
    "variants": [{"N": 7, "D": 1531, "K": 20}, {"N": 1000, "D": 33, "K": 1531}],
    "special_values": {"x": ["nan", "inf", "signed_zero", "subnormal"]},
    "dtype": "float32", "atol": 0.0, "rtol": 0.0,
}


class Model(nn.Module):
    def forward(self, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        return torch.index_select(x, 0, index)


def get_inputs():
    return [torch.randn(N, D), torch.randint(0, N, (K,), dtype=torch.int64)]


def get_init_inputs():
    return []
