"""Drawn float attributes carry few significant bits (harness/trials.py `dyadic`), so a reference's
own arithmetic on them is exact and zero tolerances stay valid (one_hot's `hot * (on - off) + off`
was 1 ulp off with an arbitrary double and failed its honest kernel)."""

from __future__ import annotations

import math

import torch
from hypothesis import given
from hypothesis import strategies as st

from sagekernel.harness.trials import ATTR_SIGNIFICANT_BITS, dyadic

finite = st.floats(min_value=-1e4, max_value=1e4, allow_nan=False).filter(lambda v: abs(v) > 1e-30)
#: values of one attribute domain's scale (the suite's domains span at most a few decades)
domain = st.floats(min_value=-100, max_value=100, allow_nan=False).filter(lambda v: abs(v) > 1e-6)


@given(finite)
def test_a_drawn_value_is_exact_in_bf16_and_close_to_the_draw(value: float) -> None:
    d = dyadic(value)
    assert d != 0 and math.copysign(1, d) == math.copysign(1, value)
    assert abs(d - value) <= abs(value) * 2.0**-ATTR_SIGNIFICANT_BITS
    assert float(torch.tensor(d, dtype=torch.bfloat16).item()) == d
    assert float(torch.tensor(d, dtype=torch.float32).item()) == d


@given(domain, domain)
def test_one_hot_style_arithmetic_is_exact_on_drawn_values(on: float, off: float) -> None:
    on, off = dyadic(on), dyadic(off)
    hot = torch.tensor([1.0, 0.0], dtype=torch.float64)
    got = (hot * (on - off) + off).to(torch.float32)
    assert got.tolist() == [on, off]
