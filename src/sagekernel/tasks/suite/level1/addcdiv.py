"""Addcdiv: out = x + value * t1 / t2."""

import torch
import torch.nn as nn

B = 64
D = 1000
VALUE = 0.5

SAGE_TASK = {
    "name": "addcdiv", "level": 1, "category": "math",
    "description": "out = x + value * t1 / t2 elementwise (torch.addcdiv); |t2| >= 0.5.",
    "inputs": {"x": ["B", "D"], "t1": ["B", "D"], "t2": ["B", "D"]},
    "outputs": {"out": ["B", "D"]},
    "attrs": {"value": 0.5},
    "sizes": {"B": 64, "D": 1000},
    "variants": [{"B": 7, "D": 1531}, {"B": 33, "D": 33}],
    "special_values": ["nan", "inf", "signed_zero"],
    "attr_domains": {"value": {"range": [-2.0, 2.0]}},
    "dtype": "float32", "atol": 1e-5, "rtol": 1e-5,
}


class Model(nn.Module):
    def __init__(self, value: float):
        super().__init__()
        self.value = value

    def forward(self, x: torch.Tensor, t1: torch.Tensor, t2: torch.Tensor) -> torch.Tensor:
        return torch.addcdiv(x, t1, t2, value=self.value)


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
    shape = (sizes["B"], sizes["D"])
    x = _draw(shape, gen, distribution)
    t1 = _draw(shape, gen, distribution)
    d = _draw(shape, gen, distribution)
    t2 = torch.where(d < 0, d - 0.5, d + 0.5)
    return [x, t1, t2]


def get_inputs():
    return make_inputs({"B": B, "D": D}, None, "default")


def get_init_inputs():
    return [VALUE]
