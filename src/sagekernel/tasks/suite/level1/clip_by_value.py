"""ClipByValue: clamp every element into [clip_min, clip_max]."""

import torch
import torch.nn as nn

B = 64
D = 1000
CLIP_MIN = -0.5
CLIP_MAX = 0.75

SAGE_TASK = {
    "name": "clip_by_value", "level": 1, "category": "math",
    "description": "out = min(max(x, clip_min), clip_max) elementwise (torch.clamp).",
    "inputs": {"x": ["B", "D"]},
    "outputs": {"out": ["B", "D"]},
    "attrs": {"clip_min": -0.5, "clip_max": 0.75},
    "sizes": {"B": 64, "D": 1000},
    "variants": [{"B": 7, "D": 1531}, {"B": 33, "D": 33}],
    "special_values": True, "ties": True,
    "attr_domains": {"clip_min": {"range": [-2.0, 0.0]}, "clip_max": {"range": [0.0, 2.0]}},
    "dtype": "float32", "atol": 0.0, "rtol": 0.0,
}


class Model(nn.Module):
    def __init__(self, clip_min: float, clip_max: float):
        super().__init__()
        self.clip_min = clip_min
        self.clip_max = clip_max

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.clamp(x, self.clip_min, self.clip_max)


def get_inputs():
    return [torch.randn(B, D)]


def get_init_inputs():
    return [CLIP_MIN, CLIP_MAX]
