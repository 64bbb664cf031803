"""The element-wise comparison: NaN is never a wildcard, infinities match exactly,
tolerance is atol + rtol*|e|."""

from __future__ import annotations

import math

import torch
from hypothesis import assume, given
from hypothesis import strategies as st

from sagekernel.harness.compare import SENTINELS, compare


def test_nan_must_match_nan_positions() -> None:
    e = torch.tensor([1.0, float("nan"), 3.0])
    assert compare(torch.tensor([1.0, float("nan"), 3.0]), e, 0, 0, "float32") is None
    m = compare(torch.tensor([float("nan")] * 3), e, 1e9, 1e9, "float32")
    assert m is not None and m.index == (0,) and "NaN where the reference is a number" in m.detail
    assert compare(torch.tensor([1.0, 2.0, 3.0]), e, 1e9, 1e9, "float32") is not None


def test_infinities_must_match_exactly() -> None:
    e = torch.tensor([float("inf"), -1.0])
    assert compare(torch.tensor([float("inf"), -1.0]), e, 0, 0, "float32") is None
    assert compare(torch.tensor([float("-inf"), -1.0]), e, 1e30, 1e30, "float32") is not None
    assert compare(torch.tensor([1e30, -1.0]), e, 1e30, 1e30, "float32") is not None


def test_sentinel_is_reported_as_unwritten() -> None:
    raw = SENTINELS["float32"] * 4
    actual = torch.frombuffer(bytearray(raw), dtype=torch.float32)
    m = compare(actual, torch.ones(2, 2), 0.1, 0.1, "float32", raw)
    assert m is not None and "never written" in m.detail and m.index == (0, 0) and m.count == 4


def test_integers_are_exact_and_bool_bytes_must_be_zero_or_one() -> None:
    assert compare(torch.tensor([1, 2]), torch.tensor([1, 3]), 10, 10, "int64") is not None
    raw = bytes([1, 0xA5])
    got = torch.frombuffer(bytearray(raw), dtype=torch.uint8)
    assert compare(got, torch.tensor([True, True]), 0, 0, "bool", raw) is not None


@given(st.floats(-1e6, 1e6), st.floats(0, 1e-2), st.floats(0, 1e-2), st.floats(-1, 1))
def test_tolerance_rule(e: float, atol: float, rtol: float, frac: float) -> None:
    bound = atol + rtol * abs(e)
    # a bound finer than e's float spacing has no representable point inside it but e itself:
    # e + 0.99 * bound rounds to the next float, outside (e=13, atol=0, rtol=2**-52); a zero
    # bound asks for the same bits, and -0.0 + 0.0 is +0.0 (test_harness_coverage tests that rule)
    assume(bound >= 4 * math.ulp(e))
    inside = torch.tensor([e + frac * bound * 0.99], dtype=torch.float64)
    assert compare(inside, torch.tensor([e], dtype=torch.float64), atol, rtol, "float64") is None
    outside = e + math.copysign(bound * 1.01 + 1e-9 * (1 + abs(e)), frac or 1.0)
    assert (
        compare(
            torch.tensor([outside], dtype=torch.float64),
            torch.tensor([e], dtype=torch.float64),
            atol,
            rtol,
            "float64",
        )
        is not None
    )
