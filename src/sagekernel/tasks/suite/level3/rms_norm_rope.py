"""Fused RMSNorm + rotary position embedding (rotate-half / NeoX layout) on per-head vectors."""

import torch
import torch.nn as nn

B = 2
S = 64
H = 4
D = 64
EPS = 1e-6

SAGE_TASK = {
    "name": "rms_norm_rope", "level": 3, "category": "fused",
    "description": "For every vector x[b, s, h, :] of even length D: y = x / sqrt(mean(x^2) + eps) * weight, "
                   "then rotary embedding with half = D / 2: for d < half, "
                   "out[d] = y[d] * cos_emb[s, d] - y[d + half] * sin_emb[s, d] and "
                   "out[d + half] = y[d + half] * cos_emb[s, d + half] + y[d] * sin_emb[s, d + half].",
    "inputs": {"x": ["B", "S", "H", "D"], "weight": ["D"], "cos_emb": ["S", "D"], "sin_emb": ["S", "D"]},
    "outputs": {"out": ["B", "S", "H", "D"]},
    "attrs": {"eps": 1e-6},
    "sizes": {"B": 2, "S": 64, "H": 4, "D": 64},
    "variants": [{"B": 1, "S": 33, "H": 3, "D": 34}, {"B": 3, "S": 7, "H": 5, "D": 128}],
    "structured_inputs": ["weight", "cos_emb", "sin_emb"],
    "structured_domains": {"weight": "real", "cos_emb": "real", "sin_emb": "real"},
    "size_rules": {"D": {"multiple_of": 2}}, "attr_domains": {"eps": {"range": [1e-6, 0.1]}},
    "dtype": "float32", "atol": 1e-4, "rtol": 1e-4,
}


def _rotate_half(y: torch.Tensor) -> torch.Tensor:
    half = y.shape[-1] // 2
    return torch.cat((-y[..., half:], y[..., :half]), dim=-1)


class Model(nn.Module):
    def __init__(self, eps: float):
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor, cos_emb: torch.Tensor,
                sin_emb: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] % 2:
            raise ValueError("rms_norm_rope needs an even head dimension D")
        y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * weight
        c = cos_emb[None, :, None, :]
        s = sin_emb[None, :, None, :]
        return y * c + _rotate_half(y) * s


def get_inputs():
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, D, 2, dtype=torch.float32) / D))
    freqs = torch.outer(torch.arange(S, dtype=torch.float32), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return [torch.randn(B, S, H, D), 1 + 0.2 * torch.randn(D), emb.cos(), emb.sin()]


def get_init_inputs():
    return [EPS]
