"""Mean and unbiased variance of each row."""

import torch
import torch.nn as nn

B = 128
D = 500

SAGE_TASK = {
    "name": "mean_var", "level": 2, "category": "reduction",
    "description": "For each row b: mean[b] = sum(x[b, :]) / D and the unbiased variance "
                   "var[b] = sum((x[b, :] - mean[b])^2) / (D - 1) (torch.var_mean, correction=1); D >= 2.",
    "inputs": {"x": ["B", "D"]},
    "outputs": {"mean": ["B"], "var": ["B"]},
    "sizes": {"B": 128, "D": 500},
    "size_rules": {"D": {"min": 2}},
    "variants": [{"B": 7, "D": 1531}, {"B": 1000, "D": 7}],
    "special_values": ["nan"], "ties": True,  # inf: var_mean's mean of [inf, 1] is NaN (Welford)
    "dtype": "float32", "atol": 1e-5, "rtol": 1e-5,
}


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        var, mean = torch.var_mean(x, dim=-1, correction=1)
        return mean, var


def get_inputs():
    return [torch.randn(B, D) * 2 + 3]


def get_init_inputs():
    return []
