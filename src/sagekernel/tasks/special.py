"""Inputs that sloppy kernels get wrong: special IEEE values, ties, structured inputs re-drawn.

Pure functions on tensors, driven by a seeded `torch.Generator` (the trusted side's seed), used by
`tasks.inputs.build_inputs` for the trial kinds in `COVERAGE_TRIALS` and for the structured inputs
a task gives a domain (tasks/coverage.py):

- ``special_values``: the task's declared kinds (NaN, +-inf, +-0, subnormals) are planted in about
  half the rows of each declared input (a row: the last dimension), a few per row, and always at
  the first and the last element (a vector loop's tail); the other rows stay clean, so a kernel
  that turns every row into NaN fails as well as one that drops NaN;
- ``ties``: each declared input takes only a few distinct values, picked from its own elements (so
  its domain, e.g. non-negative, holds): max/argmax/sort ties and equal neighbours everywhere;
- structured domains (on every non-default distribution, at a realistic scale): ``real`` N(0, 1),
  ``positive`` |N(0, 1)| + 1e-3, ``unit_interval`` U(0, 1).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

#: Trial kinds beyond the value distributions (tasks.inputs.DISTRIBUTIONS); an edge case a task
#: names is a trial kind too (its make_inputs builds it).
COVERAGE_TRIALS = ("special_values", "ties")
#: The distribution the coverage trials start from before planting their values.
BASE_DISTRIBUTION = "normal"
#: At most this many distinct values in a ties input.
TIE_VALUES = 6


def _rand(gen: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.rand(shape, generator=gen, dtype=torch.float64)


def special_value_table(dtype: torch.dtype, kinds: Sequence[str]) -> list[float]:
    """The values each declared kind contributes (both signs where the sign matters)."""
    tiny = float(torch.finfo(dtype).tiny)
    table: list[float] = []
    for kind in kinds:
        if kind == "nan":
            table.append(float("nan"))
        elif kind == "inf":
            table += [float("inf"), float("-inf")]
        elif kind == "signed_zero":
            table += [0.0, -0.0]
        elif kind == "subnormal":
            table += [tiny * 0.375, -tiny * 0.625, tiny * 2.0**-10]
    return table


def plant_special_values(x: torch.Tensor, kinds: Sequence[str], gen: torch.Generator) -> torch.Tensor:
    """`x` with special values planted (module docstring); a new tensor."""
    if not x.is_floating_point() or x.numel() == 0 or not kinds:
        return x
    table = torch.tensor(special_value_table(x.dtype, kinds), dtype=torch.float64)
    flat = x.detach().to(torch.float64).reshape(-1).clone()
    width = x.shape[-1] if x.dim() else 1
    rows = max(1, flat.numel() // max(1, width))
    row_hit = _rand(gen, rows) < 0.5
    per_row = max(1.0, min(4.0, 0.1 * width))
    hit = (_rand(gen, rows, width) < per_row / width) & row_hit[:, None]
    mask = hit.reshape(-1)[: flat.numel()]
    mask[0] = mask[-1] = True
    picks = torch.randint(0, len(table), (flat.numel(),), generator=gen)
    flat = torch.where(mask, table[picks], flat)
    return flat.to(x.dtype).reshape(x.shape)


def make_ties(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """`x` re-filled from a few of its own values (module docstring); a new tensor."""
    if x.numel() < 2 or x.dtype == torch.bool:
        return x
    flat = x.detach().reshape(-1)
    k = max(2, min(TIE_VALUES, flat.numel() // 4))
    chosen = flat[torch.randint(0, flat.numel(), (k,), generator=gen)]
    picks = torch.randint(0, k, (flat.numel(),), generator=gen)
    return chosen[picks].reshape(x.shape).clone()


def redraw_structured(x: torch.Tensor, domain: str, gen: torch.Generator) -> torch.Tensor:
    """A structured input re-drawn in `domain` at a realistic scale, whatever the trial's
    distribution (that one stresses the data inputs): N(0, 1), |N(0, 1)| + 1e-3 or U(0, 1)."""
    if domain == "unit_interval":
        return _rand(gen, *x.shape).to(x.dtype)
    sample = torch.randn(tuple(x.shape), generator=gen, dtype=torch.float64)
    return (sample.abs() + 1e-3 if domain == "positive" else sample).to(x.dtype)


__all__ = ["BASE_DISTRIBUTION", "COVERAGE_TRIALS", "TIE_VALUES", "make_ties", "plant_special_values",
           "redraw_structured", "special_value_table"]
