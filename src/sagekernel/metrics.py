"""The paper's metrics over operator results (sage_spec.md §8). Pure functions, no I/O.

All rates are percentages in [0, 100]. A rate whose denominator is empty is `None` (shown as
"–"), never 0: "no solved operators" is not the same as "none of them was fast".

Choices (RECONSTRUCTED where §8 is silent; stated here and in the report's legends):
- Denominators are the operators a run has *finished* (rows of `operator_results`). A run that
  stopped early is reported over what it finished, and the report says "k of n planned".
  The paper's runs are complete, so there the denominator is the full 88 (20/50/18 per level).
- Fast_p over solved operators is the paper's Fast_1.0 (Qwen SAGE 8/28 = 28.6). Fast_p over all
  operators is KernelBench's fast_p (correct and faster, divided by every operator).
  "Beats the reference" is strict: speedup > p. A solved operator without a reference latency
  has no speedup; it counts in the denominator and never as fast.
- S_self is the median over solved operators of T_first/T_best (spec §8).
- Tokens and cost per solved operator are the run's whole spend (solved or not) divided by the
  number of solved operators: what one solved operator costs.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from sagekernel.records import OperatorResult


def rate(numerator: int, denominator: int) -> float | None:
    """numerator/denominator as a percentage; None when the denominator is 0."""
    if denominator < 0 or numerator < 0 or numerator > denominator:
        raise ValueError(f"rate needs 0 <= {numerator} <= {denominator}")
    return None if denominator == 0 else 100.0 * numerator / denominator


def solved(results: Iterable[OperatorResult]) -> list[OperatorResult]:
    """Operators with at least one correct kernel (the paper's "solved")."""
    return [r for r in results if r.correct]


def compilation_rate(results: Sequence[OperatorResult]) -> float | None:
    """CR: share of operators with at least one kernel that compiled."""
    # A correct kernel compiled, whatever the row's flag says.
    return rate(sum(1 for r in results if r.compiled or r.correct), len(results))


def execution_rate(results: Sequence[OperatorResult]) -> float | None:
    """ER: share of operators with at least one correct kernel."""
    return rate(len(solved(results)), len(results))


def levels(results: Iterable[OperatorResult]) -> list[int]:
    return sorted({r.level for r in results})


def execution_rate_by_level(results: Sequence[OperatorResult]) -> dict[int, float | None]:
    """Per-level ER, each over that level's own operators (Table 1: 11/20, 16/50, 1/18)."""
    return {lv: execution_rate([r for r in results if r.level == lv]) for lv in levels(results)}


def is_fast(result: OperatorResult, p: float) -> bool:
    s = result.speedup
    return _ratio(s) and s is not None and s > p


def fast_p(results: Sequence[OperatorResult], p: float = 1.0, *, over: str = "solved") -> float | None:
    """Fast_p: share of operators whose best correct kernel has speedup T_ref/T_best > p.

    over="solved" divides by solved operators (the paper's Fast_1.0); over="all" divides by every
    operator (KernelBench's fast_p).
    """
    if over not in ("solved", "all"):
        raise ValueError(f"fast_p over must be 'solved' or 'all', not {over!r}")
    ok = solved(results)
    n_fast = sum(1 for r in ok if is_fast(r, p))
    return rate(n_fast, len(ok) if over == "solved" else len(results))


def _ratio(value: float | None) -> bool:
    """A usable speedup: finite and positive (records built from bad latencies are not)."""
    return value is not None and math.isfinite(value) and value > 0


def self_speedup_median(results: Sequence[OperatorResult]) -> float | None:
    """S_self: median over solved operators of T_first/T_best (None if none has both times)."""
    values = [s for r in results if _ratio(s := r.self_speedup) and s is not None]
    return statistics.median(values) if values else None


def geometric_mean(values: Sequence[float]) -> float | None:
    if not values:
        return None
    if any(v <= 0 for v in values):
        raise ValueError("geometric mean needs positive values")
    return math.exp(math.fsum(math.log(v) for v in values) / len(values))


@dataclass(frozen=True)
class Distribution:
    """Summary of a long-tailed positive quantity (speedups): why the paper reports medians."""

    count: int
    median: float | None
    geomean: float | None
    minimum: float | None
    maximum: float | None


def speedup_distribution(results: Sequence[OperatorResult]) -> Distribution:
    """Speedup over the reference (T_ref/T_best) across solved operators that have one."""
    values = [s for r in results if _ratio(s := r.speedup) and s is not None]
    if not values:
        return Distribution(0, None, None, None, None)
    return Distribution(len(values), statistics.median(values), geometric_mean(values),
                        min(values), max(values))


def rounds_to_first_correct(results: Sequence[OperatorResult]) -> tuple[float | None, float | None]:
    """(median, mean) round of the first correct kernel, over solved operators that recorded it."""
    values = [r.first_correct_round for r in results if r.correct and r.first_correct_round is not None]
    if not values:
        return None, None
    return float(statistics.median(values)), statistics.fmean(values)


def tokens_per_solved(results: Sequence[OperatorResult]) -> float | None:
    """All prompt + completion tokens of the run divided by the number of solved operators."""
    n = len(solved(results))
    total = sum(r.prompt_tokens + r.completion_tokens for r in results)
    return total / n if n else None


def cost_per_solved(results: Sequence[OperatorResult]) -> float | None:
    """All recorded cost (USD) divided by solved operators; None when no cost was recorded."""
    n = len(solved(results))
    costs = [r.cost_usd for r in results if r.cost_usd is not None]
    if not n or not costs:
        return None
    return math.fsum(costs) / n


def cumulative_execution_rate(results: Sequence[OperatorResult]) -> list[float]:
    """ER after each operator in stream order: the learning curve (last value = ER)."""
    out: list[float] = []
    n_ok = 0
    for i, r in enumerate(sorted(results, key=lambda r: r.position), start=1):
        n_ok += r.correct
        out.append(100.0 * n_ok / i)
    return out


@dataclass
class RunMetrics:
    """Every figure the report shows for one run's operators."""

    p: float
    n_operators: int
    n_solved: int
    n_compiled: int
    cr: float | None
    er: float | None
    er_by_level: dict[int, float | None]
    n_by_level: dict[int, int]
    solved_by_level: dict[int, int]
    fast_solved: float | None
    fast_all: float | None
    n_fast: int
    s_self: float | None
    speedup: Distribution
    rounds_first_median: float | None
    rounds_first_mean: float | None
    tokens_total: int
    tokens_per_solved: float | None
    cost_total: float | None
    cost_per_solved: float | None
    learning_curve: list[float] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for key in ("er_by_level", "n_by_level", "solved_by_level"):
            data[key] = {f"L{k}": v for k, v in data[key].items()}
        return data


def summarize(results: Sequence[OperatorResult], p: float = 1.0) -> RunMetrics:
    """All metrics of one run (spec §8) from its finished operators."""
    ok = solved(results)
    by_level = {lv: [r for r in results if r.level == lv] for lv in levels(results)}
    costs = [r.cost_usd for r in results if r.cost_usd is not None]
    median_rounds, mean_rounds = rounds_to_first_correct(results)
    return RunMetrics(
        p=p,
        n_operators=len(results),
        n_solved=len(ok),
        n_compiled=sum(1 for r in results if r.compiled or r.correct),
        cr=compilation_rate(results),
        er=execution_rate(results),
        er_by_level={lv: execution_rate(rs) for lv, rs in by_level.items()},
        n_by_level={lv: len(rs) for lv, rs in by_level.items()},
        solved_by_level={lv: len(solved(rs)) for lv, rs in by_level.items()},
        fast_solved=fast_p(results, p, over="solved"),
        fast_all=fast_p(results, p, over="all"),
        n_fast=sum(1 for r in ok if is_fast(r, p)),
        s_self=self_speedup_median(results),
        speedup=speedup_distribution(results),
        rounds_first_median=median_rounds,
        rounds_first_mean=mean_rounds,
        tokens_total=sum(r.prompt_tokens + r.completion_tokens for r in results),
        tokens_per_solved=tokens_per_solved(results),
        cost_total=math.fsum(costs) if costs else None,
        cost_per_solved=cost_per_solved(results),
        learning_curve=cumulative_execution_rate(results),
    )
