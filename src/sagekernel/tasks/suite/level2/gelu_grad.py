"""GeluGrad: the gradient of exact (erf) GELU."""

import math

import torch
import torch.nn as nn

B = 64
D = 1000

SAGE_TASK = {
    "name": "gelu_grad", "level": 2, "category": "activation",
    "description": "GeluGrad: the gradient of exact (erf) GELU, out = dy * (Phi(x) + x * phi(x)) with "
                   "Phi/phi the standard normal CDF/PDF.",
    "inputs": {"dy": ["B", "D"], "x": ["B", "D"]},
    "outputs": {"out": ["B", "D"]},
    "sizes": {"B": 64, "D": 1000},
    "variants": [{"B": 7, "D": 1531}, {"B": 33, "D": 33}],
    "special_values": ["nan", "signed_zero", "subnormal"],
    "dtype": "float32", "atol": 1e-5, "rtol": 1e-5,
}


class Model(nn.Module):
    def forward(self, dy: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        cdf = 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))
        pdf = torch.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
        return dy * (cdf + x * pdf)


def get_inputs():
    return [torch.randn(B, D), torch.randn(B, D) * 2]


def get_init_inputs():
    return []
