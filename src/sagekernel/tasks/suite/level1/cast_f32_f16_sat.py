"""Cast float32 -> float16 with saturation (out-of-range values clamp to +-65504, NaN stays NaN)."""

import torch
import torch.nn as nn

B = 64
D = 1000

SAGE_TASK = {
    "name": "cast_f32_f16_sat", "level": 1, "category": "math",
    "description": "Saturating cast to IEEE half precision: clamp to [-65504, 65504], then round to "
                   "nearest-even float16 (subnormals included); NaN stays NaN. The float16 output travels "
                   "as raw 16-bit patterns. About 5% of the inputs are beyond the float16 range, 1% NaN.",
    "inputs": {"x": ["B", "D"]},
    "outputs": {"out": ["B", "D"]},
    "sizes": {"B": 64, "D": 1000},
    "variants": [{"B": 7, "D": 1531}, {"B": 33, "D": 33}],
    "special_values": True, "ties": True,
    "dtype": "float32", "atol": 0.0, "rtol": 0.0,
}


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.clamp(x, -65504.0, 65504.0).to(torch.float16)


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
    big = torch.sign(torch.randn(shape, generator=gen)) * (7e4 + 2e5 * torch.rand(shape, generator=gen))
    x = torch.where(r < 0.05, big, x)
    x = torch.where((r >= 0.05) & (r < 0.06), float("nan"), x)
    return [x]


def get_inputs():
    return make_inputs({"B": B, "D": D}, None, "default")


def get_init_inputs():
    return []
