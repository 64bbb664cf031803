"""Metrics (sage_spec.md §8) against hand-computed values and the paper's own arithmetic."""

from __future__ import annotations

import math
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sagekernel.metrics import (
    compilation_rate,
    cost_per_solved,
    cumulative_execution_rate,
    execution_rate,
    execution_rate_by_level,
    fast_p,
    geometric_mean,
    rate,
    rounds_to_first_correct,
    self_speedup_median,
    speedup_distribution,
    summarize,
    tokens_per_solved,
)
from sagekernel.records import OperatorResult
from sagekernel.report.tables import fmt_rate, fmt_x


def op(pos: int, level: int = 1, *, compiled: bool = True, correct: bool = True, t_first: float | None = 1.0,
       t_best: float | None = 1.0, t_ref: float | None = 1.0, first_round: int | None = 1, tokens: int = 0,
       cost: float | None = None) -> OperatorResult:
    return OperatorResult(
        run_id="r", position=pos, operator=f"op{pos}", level=level, category="c", compiled=compiled,
        correct=correct, rounds_used=30, first_correct_round=first_round if correct else None,
        t_first_ms=t_first if correct else None, t_best_ms=t_best if correct else None, t_ref_ms=t_ref,
        prompt_tokens=tokens, completion_tokens=0, cost_usd=cost)


def paper_run(per_level: list[tuple[int, int, int]], compiled: int, fast: int,
              self_speedups: list[float] | None = None) -> list[OperatorResult]:
    """Operators per level (level, n, solved); `compiled` compile in total (solved ones first);
    the first `fast` solved ones have speedup 2 (the rest exactly 1.0, which is not > 1)."""
    out: list[OperatorResult] = []
    n_solved = sum(s for _, _, s in per_level)
    extra_compiled = compiled - n_solved
    speedups = iter(self_speedups or [])
    i_solved = 0
    for level, n, n_ok in per_level:
        for k in range(n):
            pos = len(out)
            if k < n_ok:
                s_self = next(speedups, 1.0)
                out.append(op(pos, level, t_first=s_self, t_best=1.0, t_ref=2.0 if i_solved < fast else 1.0))
                i_solved += 1
            else:
                out.append(op(pos, level, compiled=extra_compiled > 0, correct=False))
                extra_compiled -= 1
    assert extra_compiled <= 0, "more compiled than operators"
    return out


# Table 1 (sage_spec.md §11): (levels as (level, n, solved), compiled, fast) -> displayed numbers.
TABLE1 = {
    "Qwen Refinement": ([(1, 20, 1), (2, 50, 0), (3, 18, 0)], 31, 0,
                        ["5.0", "0.0", "0.0", "35.2", "1.1", "0.0"]),
    "Qwen Static RAG": ([(1, 20, 6), (2, 50, 13), (3, 18, 0)], 45, 4,
                        ["30.0", "26.0", "0.0", "51.1", "21.6", "21.1"]),
    "Qwen Value Memory": ([(1, 20, 10), (2, 50, 12), (3, 18, 1)], 58, 4,
                          ["50.0", "24.0", "5.6", "65.9", "26.1", "17.4"]),
    "Qwen SAGE": ([(1, 20, 11), (2, 50, 16), (3, 18, 1)], 66, 8,
                  ["55.0", "32.0", "5.6", "75.0", "31.8", "28.6"]),
    "DeepSeek Refinement": ([(1, 20, 7), (2, 50, 9), (3, 18, 0)], 49, 5,
                            ["35.0", "18.0", "0.0", "55.7", "18.2", "31.3"]),
}


@pytest.mark.parametrize("row", list(TABLE1))
def test_table1_rows_reproduce_the_papers_numbers(row: str) -> None:
    per_level, compiled, fast, expected = TABLE1[row]
    results = paper_run(per_level, compiled, fast)
    assert len(results) == 88
    by_level = execution_rate_by_level(results)
    values = [by_level[1], by_level[2], by_level[3], compilation_rate(results), execution_rate(results),
              fast_p(results, 1.0)]
    shown = [fmt_rate(v) for v in values]
    assert shown == expected


def test_qwen_sage_exact_fractions() -> None:
    results = paper_run([(1, 20, 11), (2, 50, 16), (3, 18, 1)], 66, 8)
    assert execution_rate_by_level(results) == {1: 100 * 11 / 20, 2: 100 * 16 / 50, 3: 100 * 1 / 18}
    assert execution_rate(results) == pytest.approx(100 * 28 / 88)  # 31.8: 11 + 16 + 1 = 28 of 88
    assert compilation_rate(results) == 75.0  # 66/88
    assert fast_p(results, 1.0) == pytest.approx(100 * 8 / 28)  # Fast divides by solved: 28.6
    assert fast_p(results, 1.0, over="all") == pytest.approx(100 * 8 / 88)  # KernelBench-style: 9.1


def test_glm_sage_solves_84_of_88() -> None:
    results = paper_run([(1, 20, 20), (2, 50, 50), (3, 18, 14)], 88, 73)
    assert execution_rate(results) == pytest.approx(100 * 84 / 88)
    assert fmt_rate(execution_rate(results)) == "95.5"
    assert fmt_rate(execution_rate_by_level(results)[3]) == "77.8"
    assert fmt_rate(fast_p(results, 1.0)) == "86.9"  # Table 7 ATU: 73/84


def test_s_self_is_the_median_of_first_over_best() -> None:
    # Qwen SAGE S_self 1.27×: 28 solved; the two middle values are 1.27.
    speedups = [1.0] * 13 + [1.27, 1.27] + [2.0] * 13
    results = paper_run([(1, 20, 11), (2, 50, 16), (3, 18, 1)], 66, 8, self_speedups=speedups)
    assert self_speedup_median(results) == pytest.approx(1.27)
    assert fmt_x(self_speedup_median(results)) == "1.27×"
    # Qwen Refinement: one solved operator whose best is its first kernel: 1.00×.
    refinement = paper_run([(1, 20, 1), (2, 50, 0), (3, 18, 0)], 31, 0)
    assert fmt_x(self_speedup_median(refinement)) == "1.00×"
    # Even count: the mean of the two middle values; unsolved operators are ignored.
    results = [op(0, t_first=3.0, t_best=1.0), op(1, t_first=1.0, t_best=1.0), op(2, correct=False),
               op(3, t_first=1.5, t_best=1.0), op(4, t_first=8.0, t_best=2.0)]
    assert self_speedup_median(results) == pytest.approx((1.5 + 3.0) / 2)
    assert self_speedup_median([op(0, correct=False)]) is None


def test_speedup_distribution_on_the_gmm_example() -> None:
    # L3/GMM with GLM-5.2: 16 correct operators, median 1.54×, range 0.38×–71.41×.
    values = [0.38, 0.5, 0.7, 0.9, 1.1, 1.2, 1.3, 1.5, 1.58, 2, 3, 4, 5, 8, 20, 71.41]
    results = [op(i, t_best=1.0, t_ref=v) for i, v in enumerate(values)] + [op(99, correct=False)]
    dist = speedup_distribution(results)
    assert dist.count == 16
    assert dist.median == pytest.approx(1.54)
    assert (dist.minimum, dist.maximum) == (pytest.approx(0.38), pytest.approx(71.41))
    assert dist.geomean == pytest.approx(math.prod(values) ** (1 / 16))
    assert speedup_distribution([op(0, correct=False)]).median is None


def test_fast_p_for_any_p_is_strict_and_counts_missing_reference_as_not_fast() -> None:
    results = [op(0, t_best=1.0, t_ref=3.0), op(1, t_best=1.0, t_ref=2.0), op(2, t_best=2.0, t_ref=1.0),
               op(3, t_best=1.0, t_ref=None), op(4, correct=False), op(5, correct=False)]
    assert fast_p(results, 1.0) == pytest.approx(100 * 2 / 4)
    assert fast_p(results, 2.0) == pytest.approx(100 * 1 / 4)  # speedup exactly 2 is not > 2
    assert fast_p(results, 0.4) == pytest.approx(100 * 3 / 4)
    assert fast_p(results, 1.0, over="all") == pytest.approx(100 * 2 / 6)
    assert fast_p([op(0, correct=False)], 1.0) is None
    assert fast_p([op(0, correct=False)], 1.0, over="all") == 0.0
    with pytest.raises(ValueError):
        fast_p(results, 1.0, over="some")


def test_rates_and_empty_denominators() -> None:
    assert rate(1, 3) == pytest.approx(33.333333)
    assert rate(0, 0) is None and execution_rate([]) is None and compilation_rate([]) is None
    with pytest.raises(ValueError):
        rate(4, 3)
    # A correct kernel compiled even if the row's compiled flag is off.
    flags_off = [op(0, compiled=False, correct=True), op(1, compiled=False, correct=False)]
    assert compilation_rate(flags_off) == 50.0


def test_rounds_tokens_and_cost_per_solved() -> None:
    results = [op(0, first_round=2, tokens=100, cost=0.5), op(1, first_round=9, tokens=300, cost=None),
               op(2, first_round=4, tokens=200, cost=0.25), op(3, correct=False, tokens=1000, cost=1.0)]
    assert rounds_to_first_correct(results) == (4.0, 5.0)
    assert tokens_per_solved(results) == pytest.approx(1600 / 3)  # all spend / solved operators
    assert cost_per_solved(results) == pytest.approx(1.75 / 3)
    assert cost_per_solved([op(0, cost=None)]) is None
    assert tokens_per_solved([op(0, correct=False, tokens=10)]) is None
    assert rounds_to_first_correct([op(0, correct=False)]) == (None, None)


def test_cumulative_execution_rate_follows_stream_order() -> None:
    results = [op(2, correct=True), op(0, correct=True), op(3, correct=False), op(1, correct=False)]
    assert cumulative_execution_rate(results) == pytest.approx([100.0, 50.0, 100 * 2 / 3, 50.0])


def test_summarize_collects_everything() -> None:
    results = [op(0, 1, t_first=2.0, t_best=1.0, t_ref=4.0, tokens=10, cost=0.1),
               op(1, 1, correct=False, tokens=30),
               op(2, 2, compiled=False, correct=False),
               op(3, 2, t_first=1.0, t_best=1.0, t_ref=0.5, first_round=7)]
    m = summarize(results, p=1.0)
    assert (m.n_operators, m.n_solved, m.n_compiled, m.n_fast) == (4, 2, 3, 1)
    assert (m.cr, m.er, m.fast_solved, m.fast_all) == (75.0, 50.0, 50.0, 25.0)
    assert m.er_by_level == {1: 50.0, 2: 50.0} and m.n_by_level == {1: 2, 2: 2}
    assert m.s_self == pytest.approx(1.5) and m.speedup.median == pytest.approx(2.25)
    assert m.rounds_first_median == 4.0 and m.tokens_total == 40 and m.tokens_per_solved == 20.0
    assert m.cost_total == pytest.approx(0.1)
    assert m.learning_curve == [100.0, 50.0, pytest.approx(100 / 3), 50.0]
    assert m.to_dict()["er_by_level"] == {"L1": 50.0, "L2": 50.0}


# ---------------------------------------------------------------- properties
latency = st.floats(min_value=1e-3, max_value=1e3, allow_nan=False)


@st.composite
def results_lists(draw: st.DrawFn) -> list[OperatorResult]:
    n = draw(st.integers(min_value=0, max_value=40))
    out = []
    for pos in range(n):
        correct = draw(st.booleans())
        out.append(op(pos, draw(st.integers(1, 3)), compiled=correct or draw(st.booleans()), correct=correct,
                      t_first=draw(latency), t_best=draw(latency),
                      t_ref=draw(st.one_of(st.none(), latency)), first_round=draw(st.integers(1, 30))))
    return out


@given(results_lists(), st.floats(min_value=0, max_value=100, allow_nan=False))
def test_rates_are_percentages_and_ordered(results: list[OperatorResult], p: float) -> None:
    m = summarize(results, p)
    for value in (m.cr, m.er, m.fast_solved, m.fast_all, *m.er_by_level.values()):
        assert value is None or 0.0 <= value <= 100.0
    if results:
        assert m.er is not None and m.cr is not None and m.er <= m.cr
        assert m.fast_all is not None
        if m.fast_solved is not None:
            assert m.fast_all <= m.fast_solved + 1e-9
        # ER is the operator-weighted mean of the per-level ERs.
        weighted = sum((m.er_by_level[lv] or 0) * m.n_by_level[lv] for lv in m.n_by_level) / len(results)
        assert weighted == pytest.approx(m.er)
        assert m.learning_curve[-1] == pytest.approx(m.er)


@given(results_lists(), st.floats(min_value=0, max_value=10), st.floats(min_value=0, max_value=10))
def test_fast_p_never_grows_with_p(results: list[OperatorResult], a: float, b: float) -> None:
    lo, hi = sorted((a, b))
    f_lo, f_hi = fast_p(results, lo), fast_p(results, hi)
    assert (f_lo is None) == (f_hi is None)
    if f_lo is not None and f_hi is not None:
        assert f_hi <= f_lo


@given(st.lists(st.floats(min_value=1e-3, max_value=1e3), min_size=1, max_size=50))
def test_geomean_lies_between_min_and_max_and_below_the_mean(values: list[float]) -> None:
    g = geometric_mean(values)
    assert g is not None
    assert min(values) * (1 - 1e-9) <= g <= max(values) * (1 + 1e-9)
    assert g <= statistics.fmean(values) * (1 + 1e-9)
