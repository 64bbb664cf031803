"""Log1p: elementwise log(1 + x) for x > -1."""

import torch
import torch.nn as nn

B = 64
D = 1000

SAGE_TASK = {
    "name": "log1p", "level": 1, "category": "math",
    "description": "Elementwise log(1 + x), accurate for small |x|; all inputs are > -1.",
    "inputs": {"x": ["B", "D"]},
    "outputs": {"out": ["B", "D"]},
    "sizes": {"B": 64, "D": 1000},
    "variants": [{"B": 7, "D": 1531}, {"B": 33, "D": 33}],
    "special_values": True,
    "dtype": "float32", "atol": 1e-5, "rtol": 1e-5,
}


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log1p(x)


def _draw(shape, gen, distribution):
    if distribution == "uniform":
        return torch.rand(shape, generator=gen) * 2 - 1
    if distribution == "offset_uniform":
        lo, w = torch.rand(2, generator=gen).tolist()
        return (lo * 8 - 4) + (0.5 + 3.5 * w) * torch.rand(shape, generator=gen)
    if distribution == "heavy_tailed":
        chi2 = torch.randn((3, *shape), generator=gen).square().sum(0)
        return torch.randn(shape, generator=gen) / torch.sqrt(chi2 / 3).clamp_min(1e-3)
    if distribution == "large_magnitude":
        return torch.randn(shape, generator=gen) * 1000
    return torch.randn(shape, generator=gen)


def make_inputs(sizes, gen, distribution):
    return [_draw((sizes["B"], sizes["D"]), gen, distribution).abs() * 2 - 0.9]


def get_inputs():
    return make_inputs({"B": B, "D": D}, None, "default")


def get_init_inputs():
    return []
