"""isfinite: classify float32 values; the inputs contain +inf, -inf and NaN."""

import torch
import torch.nn as nn

B = 64
D = 1000

SAGE_TASK = {
    "name": "isfinite", "level": 1, "category": "condition",
    "description": "Elementwise isfinite: True where x is neither inf nor NaN. About 6% of the inputs "
                   "each are +inf, -inf and NaN. Output is bool (one byte, 0 or 1).",
    "inputs": {"x": ["B", "D"]},
    "outputs": {"out": ["B", "D"]},
    "sizes": {"B": 64, "D": 1000},
    "variants": [{"B": 7, "D": 1531}, {"B": 33, "D": 33}],
    "special_values": True,
    "dtype": "float32", "atol": 0.0, "rtol": 0.0,
}


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.isfinite(x)


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
    r = torch.rand(shape, generator=gen)
    x = torch.where(r < 0.06, float("inf"), x)
    x = torch.where((r >= 0.06) & (r < 0.12), float("-inf"), x)
    x = torch.where((r >= 0.12) & (r < 0.18), float("nan"), x)
    return [x]


def get_inputs():
    return make_inputs({"B": B, "D": D}, None, "default")


def get_init_inputs():
    return []
