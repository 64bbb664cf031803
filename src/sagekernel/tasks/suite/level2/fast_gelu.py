"""FastGelu (Ascend): out = x / (1 + exp(-1.702 * |x|)) * exp(0.851 * (x - |x|))."""

import torch
import torch.nn as nn

B = 64
D = 1000

SAGE_TASK = {
    "name": "fast_gelu", "level": 2, "category": "activation",
    "description": "FastGelu (Ascend): out = x / (1 + exp(-1.702 * |x|)) * exp(0.851 * (x - |x|)), i.e. x * "
                   "sigmoid(1.702 * x).",
    "inputs": {"x": ["B", "D"]},
    "outputs": {"out": ["B", "D"]},
    "sizes": {"B": 64, "D": 1000},
    "variants": [{"B": 7, "D": 1531}, {"B": 33, "D": 33}],
    "special_values": ["nan", "signed_zero", "subnormal"],
    "dtype": "float32", "atol": 1e-5, "rtol": 1e-5,
}


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = torch.abs(x)
        return x / (1.0 + torch.exp(-1.702 * a)) * torch.exp(0.851 * (x - a))


def get_inputs():
    return [torch.randn(B, D) * 2]


def get_init_inputs():
    return []
