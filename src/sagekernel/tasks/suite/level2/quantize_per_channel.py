"""Symmetric per-channel int8 quantisation with given scales."""

import torch
import torch.nn as nn

M = 128
N = 256

SAGE_TASK = {
    "name": "quantize_per_channel", "level": 2, "category": "quantization",
    "description": "Per-channel (per column) symmetric int8 quantisation: "
                   "q[m, n] = clamp(round_half_even(x[m, n] / scale[n]), -128, 127) as int8. Scales are "
                   "positive; some columns saturate.",
    "inputs": {"x": ["M", "N"], "scale": ["N"]},
    "outputs": {"q": ["M", "N"]},
    "sizes": {"M": 128, "N": 256},
    "variants": [{"M": 7, "N": 1531}, {"M": 1000, "N": 33}],
    "edge_cases": ["rounding_ties"],
    "dtype": "float32", "atol": 0.0, "rtol": 0.0,
}


class Model(nn.Module):
    def forward(self, x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        return torch.clamp(torch.round(x / scale), -128, 127).to(torch.int8)


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


def _rounding_ties(sizes, gen):
    """Power-of-two scales and about half the values exactly halfway between two integers (x / scale
    is exact in float32): round-half-even (torch.round, nearbyintf) and half-away (roundf) differ."""
    m, n = sizes["M"], sizes["N"]
    scale = 2.0 ** -torch.randint(3, 9, (n,), generator=gen).float()
    k = torch.randint(-140, 140, (m, n), generator=gen).float()
    halfway = torch.rand((m, n), generator=gen) < 0.5
    x = torch.where(halfway, (k + 0.5) * scale, (k + 0.25) * scale)
    return [x, scale]


def make_inputs(sizes, gen, distribution):
    if distribution == "rounding_ties":
        return _rounding_ties(sizes, gen)
    x = _draw((sizes["M"], sizes["N"]), gen, distribution)
    amax = x.abs().amax(dim=0).clamp_min(1e-6)
    scale = amax / 127 * (0.6 + 0.6 * torch.rand(sizes["N"], generator=gen))
    # Keep x / scale at least ~0.008 away from a rounding tie (x.5), where float32 rounding error
    # could legitimately flip the int8 result: then the int8 output is exact.
    v = x.double() / scale.double()
    near_tie = ((v - torch.floor(v)) - 0.5).abs() < 5e-3
    x = torch.where(near_tie, ((v + 0.01 * torch.sign(v)) * scale.double()).float(), x)
    return [x, scale]


def get_inputs():
    return make_inputs({"M": M, "N": N}, None, "default")


def get_init_inputs():
    return []
