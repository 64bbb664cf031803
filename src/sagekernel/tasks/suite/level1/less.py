"""less: elementwise comparison of two float32 matrices into a bool matrix."""

import torch
import torch.nn as nn

B = 64
D = 1000

SAGE_TASK = {
    "name": "less", "level": 1, "category": "comparison",
    "description": "Elementwise x < y; about 30% of the elements are ties (x == y). Output is bool (one "
                   "byte, 0 or 1).",
    "inputs": {"x": ["B", "D"], "y": ["B", "D"]},
    "outputs": {"out": ["B", "D"]},
    "sizes": {"B": 64, "D": 1000},
    "variants": [{"B": 7, "D": 1531}, {"B": 33, "D": 33}],
    "special_values": True, "ties": True,
    "dtype": "float32", "atol": 0.0, "rtol": 0.0,
}


class Model(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.lt(x, y)


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
    other = _draw(shape, gen, distribution)
    tie = torch.rand(shape, generator=gen) < 0.3
    return [x, torch.where(tie, x, other)]


def get_inputs():
    return make_inputs({"B": B, "D": D}, None, "default")


def get_init_inputs():
    return []
