"""The "Value Memory" baseline: EvoKernel-style per-stage Q values (spec §12.6, RECONSTRUCTED).

corr episode = Drafting (Q1), opt episode = Refining (Q2). Retrieval takes the dense top-K′ pool
and picks N items ε-greedily by Q of the stage. After each round every item retrieved in that
round moves toward the same reward (uniform credit): Q ← Q + α(r − Q). Corr rounds: r = +1 if
correct else −1. Opt rounds: r = −1 if infeasible, else tanh(log b_t − log ℓ_t) with b_t the
best-so-far latency, normalised PopArt-style (Welford mean/std, σ ≥ 1e-6, r̂ = r until ≥ 2 samples).
Deviation from EvoKernel, logged: the SAGE harness continues from the best feasible kernel, so
there is no Q2 start-point selection.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from sagekernel.memory.atu import valid_latency
from sagekernel.memory.retrieval import Candidate
from sagekernel.records import EpisodeKind, EpisodeTrace


def epsilon_greedy(pool: Sequence[Candidate], k: int, epsilon: float, rng: random.Random) -> list[Candidate]:
    """Pick k of the pool: each slot is the next-highest Q (ties: higher relevance, smaller id),
    or with probability ε a uniformly random remaining candidate (as in S6 policy.py)."""
    remaining = sorted(pool, key=lambda c: (-c.utility, -c.relevance, c.item_id))
    chosen: list[Candidate] = []
    while remaining and len(chosen) < k:
        idx = rng.randrange(len(remaining)) if rng.random() < epsilon else 0
        chosen.append(remaining.pop(idx))
    return chosen


@dataclass
class PopArt:
    """Running (Welford) mean and std of the opt rewards."""

    count: int = 0
    mean: float = 0.0
    m2: float = 0.0

    def observe(self, r: float) -> float:
        """Add r and return its normalised value r̂ (r itself until there are 2 samples)."""
        self.count += 1
        d = r - self.mean
        self.mean += d / self.count
        self.m2 += d * (r - self.mean)
        if self.count < 2:
            return r
        sigma = max(math.sqrt(self.m2 / (self.count - 1)), 1e-6)
        return (r - self.mean) / sigma

    def dumps(self) -> str:
        return json.dumps({"count": self.count, "mean": self.mean, "m2": self.m2})

    @classmethod
    def loads(cls, text: str | None) -> PopArt:
        return cls(**json.loads(text)) if text else cls()


def round_rewards(trace: EpisodeTrace, popart: PopArt) -> list[tuple[list[int], float]]:
    """(items retrieved in the round, reward) per round, in round order."""
    out: list[tuple[list[int], float]] = []
    best = trace.t_first_ms if valid_latency(trace.t_first_ms) else None
    for rt in sorted(trace.rounds, key=lambda r: r.round):
        ids = [r.item_id for r in rt.retrieved]
        if trace.episode is EpisodeKind.CORR:
            out.append((ids, 1.0 if rt.counts_as_success else -1.0))
            continue
        # A NaN/inf/non-positive latency is a failed measurement: infeasible (r = −1), and it never
        # becomes b_t — one NaN reward would poison the persisted PopArt statistics for good.
        latency = rt.latency_ms if rt.counts_as_success and valid_latency(rt.latency_ms) else None
        if latency is None:
            r = -1.0
        elif best is None:
            r = 0.0  # no reference latency: a feasible kernel with unknown gain
        else:
            r = math.tanh(math.log(best) - math.log(latency))
        if latency is not None:
            best = latency if best is None else min(best, latency)
        out.append((ids, popart.observe(r)))
    return out


def q_update(q: float, r: float, alpha: float) -> float:
    """Monte-Carlo update Q ← Q + α(r − Q) (EvoKernel Eq. 4)."""
    return q + alpha * (r - q)
