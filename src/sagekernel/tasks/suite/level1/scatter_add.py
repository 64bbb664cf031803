"""ScatterAdd: accumulate src into a copy of x at per-row indices (torch.scatter_add along dim 1)."""

import torch
import torch.nn as nn

B = 64
D = 1000
K = 500

SAGE_TASK = {
    "name": "scatter_add", "level": 1, "category": "index",
    "description": "out = x.clone(); out[b, index[b, k]] += src[b, k] for every (b, k) "
                   "(torch.scatter_add along dim 1). Indices are int64 in [0, D) and may repeat.",
    "inputs": {"x": ["B", "D"], "index": ["B", "K"], "src": ["B", "K"]},
    "outputs": {"out": ["B", "D"]},
    "sizes": {"B": 64, "D": 1000, "K": 500},
    "variants": [{"B": 7, "D": 1531, "K": 2000}, {"B": 33, "D": 33, "K": 7}],
    "special_values": {"x": ["nan", "inf"], "src": ["nan", "inf"]},
    "dtype": "float32", "atol": 1e-5, "rtol": 1e-5,
}


class Model(nn.Module):
    def forward(self, x: torch.Tensor, index: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
        return torch.scatter_add(x, 1, index, src)


def get_inputs():
    return [torch.randn(B, D), torch.randint(0, D, (B, K), dtype=torch.int64), torch.randn(B, K)]


def get_init_inputs():
    return []
