"""OneHot: expand class labels into rows with on_value at the label and off_value elsewhere."""

import torch
import torch.nn as nn
import torch.nn.functional as F

B = 256
C = 200
ON_VALUE = 2.5
OFF_VALUE = -0.5

SAGE_TASK = {
    "name": "one_hot", "level": 1, "category": "index",
    "description": "out[b, c] = on_value if labels[b] == c else off_value; labels are int64 in [0, C).",
    "inputs": {"labels": ["B"]},
    "outputs": {"out": ["B", "C"]},
    "attrs": {"on_value": 2.5, "off_value": -0.5},
    "sizes": {"B": 256, "C": 200},
    "variants": [{"B": 7, "C": 1531}, {"B": 1000, "C": 33}],
    "attr_domains": {"on_value": {"range": [-4.0, 4.0]}, "off_value": {"range": [-4.0, 4.0]}},
    "dtype": "float32", "atol": 0.0, "rtol": 0.0,
}


class Model(nn.Module):
    def __init__(self, num_classes: int, on_value: float, off_value: float):
        super().__init__()
        self.num_classes = num_classes
        self.on_value = on_value
        self.off_value = off_value

    def forward(self, labels: torch.Tensor) -> torch.Tensor:
        hot = F.one_hot(labels, self.num_classes).to(torch.float32)
        return hot * (self.on_value - self.off_value) + self.off_value


def get_inputs():
    return [torch.randint(0, C, (B,), dtype=torch.int64)]


def get_init_inputs():
    return [C, ON_VALUE, OFF_VALUE]
