"""KLDiv loss between a predicted log-distribution and a target distribution, batchmean."""

import torch
import torch.nn as nn
import torch.nn.functional as F

B = 64
D = 500

SAGE_TASK = {
    "name": "kl_div", "level": 2, "category": "loss",
    "description": "KL divergence with batchmean reduction: log_q holds log-probabilities and p "
                   "probabilities (each row sums to 1); out = sum over all (b, d) of "
                   "p * (log(p) - log_q) / B, where terms with p == 0 contribute 0 "
                   "(torch.nn.functional.kl_div, reduction='batchmean').",
    "inputs": {"log_q": ["B", "D"], "p": ["B", "D"]},
    "outputs": {"out": []},
    "sizes": {"B": 64, "D": 500},
    "variants": [{"B": 7, "D": 1531}, {"B": 1000, "D": 7}],
    "dtype": "float32", "atol": 1e-5, "rtol": 1e-4,
}


class Model(nn.Module):
    def forward(self, log_q: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
        return F.kl_div(log_q, p, reduction="batchmean")


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
    log_q = torch.log_softmax(_draw(shape, gen, distribution), dim=-1)
    p = torch.softmax(_draw(shape, gen, distribution), dim=-1)
    return [log_q, p]


def get_inputs():
    return make_inputs({"B": B, "D": D}, None, "default")


def get_init_inputs():
    return []
