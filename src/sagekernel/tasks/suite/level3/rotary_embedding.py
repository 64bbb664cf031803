"""Rotary embedding with a position-indexed cos/sin cache (vLLM NeoX layout)."""

import torch
import torch.nn as nn

T = 128
H = 8
D = 64
P = 256

SAGE_TASK = {
    "name": "rotary_embedding", "level": 3, "category": "fused",
    "description": "Rotary position embedding of x[t, h, :] (even length D, half = D / 2) at position "
                   "positions[t] (int64 in [0, P)). Row cos_sin_cache[p] holds cos in [0, half) and sin in "
                   "[half, D). With c = cache[pos][i], s = cache[pos][half + i], for i < half: "
                   "out[i] = x[i] * c - x[i + half] * s and out[i + half] = x[i + half] * c + x[i] * s.",
    "inputs": {"positions": ["T"], "x": ["T", "H", "D"], "cos_sin_cache": ["P", "D"]},
    "outputs": {"out": ["T", "H", "D"]},
    "sizes": {"T": 128, "H": 8, "D": 64, "P": 256},
    "variants": [{"T": 33, "H": 3, "D": 34, "P": 100}, {"T": 7, "H": 16, "D": 128, "P": 1000}],
    "structured_inputs": ["cos_sin_cache"],
    "structured_domains": {"cos_sin_cache": "real"}, "size_rules": {"D": {"multiple_of": 2}},
    "dtype": "float32", "atol": 1e-5, "rtol": 1e-5,
}


class Model(nn.Module):
    def forward(self, positions: torch.Tensor, x: torch.Tensor, cos_sin_cache: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] % 2:
            raise ValueError("rotary_embedding needs an even head dimension D")
        cos, sin = cos_sin_cache[positions].chunk(2, dim=-1)
        cos = cos[:, None, :]
        sin = sin[:, None, :]
        half = x.shape[-1] // 2
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


def get_inputs():
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, D, 2, dtype=torch.float32) / D))
    freqs = torch.outer(torch.arange(P, dtype=torch.float32), inv_freq)
    cache = torch.cat((freqs.cos(), freqs.sin()), dim=-1)
    return [torch.randint(0, P, (T,), dtype=torch.int64), torch.randn(T, H, D), cache]


def get_init_inputs():
    return []
