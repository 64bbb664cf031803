"""SwiGlu: out = silu(gate) * up, silu(g) = g * sigmoid(g)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

B = 64
H = 1000

SAGE_TASK = {
    "name": "swiglu", "level": 2, "category": "activation",
    "description": "SwiGlu: out = silu(gate) * up, silu(g) = g * sigmoid(g).",
    "inputs": {"gate": ["B", "H"], "up": ["B", "H"]},
    "outputs": {"out": ["B", "H"]},
    "sizes": {"B": 64, "H": 1000},
    "variants": [{"B": 7, "H": 1531}, {"B": 33, "H": 33}],
    "special_values": ["nan", "signed_zero", "subnormal"],
    "dtype": "float32", "atol": 1e-5, "rtol": 1e-5,
}


class Model(nn.Module):
    def forward(self, gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
        return F.silu(gate) * up


def get_inputs():
    return [torch.randn(B, H) * 2, torch.randn(B, H)]


def get_init_inputs():
    return []
