"""CrossEntropy with label smoothing, mean over the batch."""

import torch
import torch.nn as nn
import torch.nn.functional as F

B = 128
C = 500
LABEL_SMOOTHING = 0.1

SAGE_TASK = {
    "name": "cross_entropy", "level": 2, "category": "loss",
    "description": "Cross-entropy of logits [B, C] against int64 class targets in [0, C) with label "
                   "smoothing ls: per row, lse = logsumexp(logits[b]); "
                   "loss_b = (1 - ls) * (lse - logits[b, target[b]]) + ls * (lse - mean(logits[b])); "
                   "out = mean over b of loss_b (one float32 value; torch.nn.functional.cross_entropy).",
    "inputs": {"logits": ["B", "C"], "target": ["B"]},
    "outputs": {"out": []},
    "attrs": {"label_smoothing": 0.1},
    "sizes": {"B": 128, "C": 500},
    "variants": [{"B": 7, "C": 1531}, {"B": 1000, "C": 33}],
    "special_values": {"logits": ["nan"]}, "ties": True,
    "attr_domains": {"label_smoothing": {"range": [0.0, 0.4]}},
    "dtype": "float32", "atol": 1e-5, "rtol": 1e-4,
}


class Model(nn.Module):
    def __init__(self, label_smoothing: float):
        super().__init__()
        self.label_smoothing = label_smoothing

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, target, label_smoothing=self.label_smoothing)


def get_inputs():
    return [torch.randn(B, C) * 2, torch.randint(0, C, (B,), dtype=torch.int64)]


def get_init_inputs():
    return [LABEL_SMOOTHING]
