"""A speedup with its uncertainty: a bootstrap interval from the interleaved rounds (issue 31).

A verdict's speedup is the median over rounds of reference time / candidate time, each round timed
back to back in random order. On a shared machine those per-round ratios scatter by several
percent, so a kernel whose median lands at 1.01x is as likely slower as faster. The interval says
how far the median can be trusted:

- **method**: percentile bootstrap of the median per-round ratio (`RESAMPLES` resamples of the
  rounds with replacement); for a task with input groups, of the geometric mean of the groups'
  medians, each group resampled on its own. The interval is two-sided at `CONFIDENCE` (95 %): its
  lower bound is the 2.5th percentile of the resampled statistic.
- **seed**: derived from the measurements themselves (SHA-256 of the ratios as printed with 17
  significant digits): the function is pure, anyone can recompute an interval from the timing
  record, and no party chooses the draw. Only the parent's measurements enter it.
- **faster than p** (`faster_than`): the lower bound is above p. A true tie is then counted faster
  at most about 2.5 % of the time (the strict `median > p` counts it about half the time).
- **better than another kernel** (`better_than`): the same test on the ratio of the two kernels'
  speedups, both resampled (the optimisation episode's "better than the best so far").

Pure functions; the stdlib only (no numpy: the records are small, a few rounds per kernel).
"""

from __future__ import annotations

import hashlib
import math
import random
import statistics
from collections.abc import Sequence
from typing import Any

from sagekernel.records import SpeedupInterval

CONFIDENCE = 0.95
RESAMPLES = 2000
METHOD = "percentile bootstrap of the median per-round ratio (groups: geometric mean of medians)"


#: The interval record (records.py: the agent and the report read it too).
Interval = SpeedupInterval


def seed_of(groups: Sequence[Sequence[float]]) -> int:
    """The bootstrap's seed: a hash of the measurements (pure, reproducible, chosen by nobody)."""
    text = "|".join(",".join(f"{v:.17g}" for v in g) for g in groups)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")


def _usable(groups: Sequence[Sequence[float]]) -> list[list[float]]:
    out = [[float(v) for v in g] for g in groups]
    if not out or any(not g for g in out):
        raise ValueError("every group needs at least one per-round ratio")
    if any(not (math.isfinite(v) and v > 0) for g in out for v in g):
        raise ValueError("per-round ratios must be finite and positive")
    return out


def _geomean(values: Sequence[float]) -> float:
    if len(values) == 1:
        return values[0]  # exactly (exp(log(x)) rounds)
    return math.exp(math.fsum(math.log(v) for v in values) / len(values))


def _percentile(sorted_values: Sequence[float], q: float) -> float:
    """The q-quantile (0..1) by linear interpolation between order statistics."""
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def _statistic(groups: Sequence[Sequence[float]]) -> float:
    return _geomean([statistics.median(g) for g in groups])


def _resampled(groups: Sequence[Sequence[float]], rng: random.Random) -> float:
    return _statistic([rng.choices(g, k=len(g)) for g in groups])


def speedup_interval(groups: Sequence[Sequence[float]], confidence: float = CONFIDENCE,
                     resamples: int = RESAMPLES) -> Interval:
    """The interval of the speedup whose per-round ratios (reference / candidate) are `groups`
    (one list per input group; one list for an ordinary task)."""
    data = _usable(groups)
    if not 0 < confidence < 1 or resamples < 1:
        raise ValueError("confidence must lie in (0, 1) and resamples be at least 1")
    seed = seed_of(data)
    rng = random.Random(seed)
    stats = sorted(_resampled(data, rng) for _ in range(resamples))
    tail = (1 - confidence) / 2
    point = _statistic(data)
    # Clamp: the point is inside its own interval even where interpolation rounds past it.
    low, high = min(point, _percentile(stats, tail)), max(point, _percentile(stats, 1 - tail))
    return Interval(point, low, high, confidence, resamples, sum(map(len, data)), seed, METHOD)


def ratio_interval(new: Sequence[Sequence[float]], old: Sequence[Sequence[float]],
                   confidence: float = CONFIDENCE, resamples: int = RESAMPLES) -> Interval:
    """The interval of speedup(new) / speedup(old), both resampled independently: how much faster
    one kernel is than another, each measured against the reference in its own timing run."""
    a, b = _usable(new), _usable(old)
    if not 0 < confidence < 1 or resamples < 1:
        raise ValueError("confidence must lie in (0, 1) and resamples be at least 1")
    seed = seed_of([*a, [-1.0], *b])
    rng = random.Random(seed)
    stats = sorted(_resampled(a, rng) / _resampled(b, rng) for _ in range(resamples))
    tail = (1 - confidence) / 2
    point = _statistic(a) / _statistic(b)
    low, high = min(point, _percentile(stats, tail)), max(point, _percentile(stats, 1 - tail))
    return Interval(point, low, high, confidence, resamples, sum(map(len, a)) + sum(map(len, b)), seed,
                    "percentile bootstrap of the ratio of two kernels' median per-round speedups")


def faster_than(interval: Interval | None, p: float) -> bool:
    """Noise-aware Fast_p: faster than p only when the interval's lower bound is above p."""
    return interval is not None and interval.faster_than(p)


def better_than(new: Sequence[Sequence[float]], old: Sequence[Sequence[float]]) -> bool:
    """A kernel beats another only when its speedup over the other's is above 1 at the lower bound."""
    return faster_than(ratio_interval(new, old), 1.0)


def round_ratios(timing: dict[str, Any]) -> list[list[float]] | None:
    """The per-round ratios behind a verdict's reported speedup, from its timing record: the
    held-out shape's rounds when the speedup came from there, each input group's for a grouped
    task; None when the record has no rounds (an untimed verdict, an older record)."""
    groups = timing.get("groups")
    if isinstance(groups, list) and groups:
        per_group = [round_ratios(g.get("timing", {})) if isinstance(g, dict) else None for g in groups]
        if any(g is None for g in per_group):
            return None
        return [r for g in per_group if g for r in g]
    source = timing
    held = timing.get("held_out")
    if timing.get("speedup_from") == "held-out large shape" and isinstance(held, dict):
        source = held
    cand, ref = source.get("candidate_round_ms"), source.get("reference_round_ms")
    if not isinstance(cand, list) or not isinstance(ref, list) or not cand or len(cand) != len(ref):
        return None
    try:
        ratios = [float(r) / float(c) for r, c in zip(ref, cand, strict=True)]
    except (TypeError, ValueError, ZeroDivisionError):
        return None
    if not all(math.isfinite(v) and v > 0 for v in ratios):
        return None
    return [ratios]


def verdict_interval(timing: dict[str, Any]) -> Interval | None:
    """The interval of the speedup a timing record reports (None without its rounds)."""
    groups = round_ratios(timing)
    return None if groups is None else speedup_interval(groups)


__all__ = ["CONFIDENCE", "Interval", "better_than", "faster_than", "ratio_interval", "round_ratios",
           "seed_of", "speedup_interval", "verdict_interval"]
