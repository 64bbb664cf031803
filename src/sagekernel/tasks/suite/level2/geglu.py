"""GeGlu: out = gelu_tanh(gate) * up."""

import torch
import torch.nn as nn
import torch.nn.functional as F

B = 64
H = 1000

SAGE_TASK = {
    "name": "geglu", "level": 2, "category": "activation",
    "description": "GeGlu: out = gelu_tanh(gate) * up with the tanh approximation gelu_tanh(g) = 0.5 * g * "
                   "(1 + tanh(sqrt(2 / pi) * (g + 0.044715 * g^3))).",
    "inputs": {"gate": ["B", "H"], "up": ["B", "H"]},
    "outputs": {"out": ["B", "H"]},
    "sizes": {"B": 64, "H": 1000},
    "variants": [{"B": 7, "H": 1531}, {"B": 33, "H": 33}],
    "special_values": ["nan", "signed_zero", "subnormal"],
    "dtype": "float32", "atol": 1e-5, "rtol": 1e-5,
}


class Model(nn.Module):
    def forward(self, gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
        return F.gelu(gate, approximate="tanh") * up


def get_inputs():
    return [torch.randn(B, H) * 2, torch.randn(B, H)]


def get_init_inputs():
    return []
