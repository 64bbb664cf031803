"""ATU — Adoption-Traced Utility (spec §4), and the Uniform Credit ablation (spec §9).

Pure functions over records: nothing here touches the store. `policies.py` loads the touched
items, calls `apply_credit`, and writes the results back in one transaction.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from enum import Enum

from sagekernel.memory.records import Item, ItemState, MemoryConfig
from sagekernel.records import EpisodeKind, EpisodeTrace


class CreditRule(str, Enum):
    ATU = "atu"  # z/|A| to adopted items, −β to retrieved-but-unused (spec §4.2)
    UNIFORM = "uniform"  # every retrieved item gets z (spec §9 "Uniform Credit")


@dataclass(frozen=True)
class EpisodeSets:
    """R and A of one episode (spec §2, "Episode-level sets")."""

    retrieved: frozenset[int]  # R, minus items left unresolved (⊥)
    adopted: frozenset[int]  # A: adopted in some round, plus resident rules marked used
    resident_used: frozenset[int]
    resident_shown: frozenset[int]


def episode_sets(trace: EpisodeTrace) -> EpisodeSets:
    # RECONSTRUCTED (spec §2): an item whose adoption stayed ⊥ gets no update and no count.
    unresolved = trace.unresolved_ids()
    retrieved = trace.retrieved_ids() - unresolved
    used = {i for rt in trace.rounds for i in rt.resident_used}
    shown = {i for rt in trace.rounds for i in rt.resident_shown} | used
    adopted = (trace.adopted_ids() - unresolved) | used
    return EpisodeSets(frozenset(retrieved), frozenset(adopted), frozenset(used), frozenset(shown))


def terminal_score(trace: EpisodeTrace, cfg: MemoryConfig) -> float | None:
    """z ∈ [−δ, 1] of spec §4.1, or None when the episode had no rounds (no update)."""
    if not trace.rounds:
        return None
    if trace.episode is EpisodeKind.CORR:
        # RECONSTRUCTED: success is binary (1); failure −δ with no partial compile credit.
        # A quarantined (suspect) verdict is never a success (RoundTrace.counts_as_success).
        return 1.0 if any(r.counts_as_success for r in trace.rounds) else -cfg.delta
    t_first = trace.t_first_ms if valid_latency(trace.t_first_ms) else None
    # The agent's T_best already ignores re-measured kernels and gains below its noise margin
    # (agent/state.py MIN_GAIN); fall back to raw round latencies only for traces without it.
    # A NaN, infinite, zero or negative latency is a failed measurement, never a speed-up
    # (it would put z outside [−δ, 1] and break Property 2).
    latencies = [r.latency_ms for r in trace.rounds
                 if r.counts_as_success and r.latency_ms is not None and valid_latency(r.latency_ms)]
    t_best = trace.t_best_ms if valid_latency(trace.t_best_ms) else min(latencies, default=None)
    if t_first is not None and t_best is not None and t_best < t_first:
        return 1.0 - t_best / t_first  # SECONDARY (S3)
    # RECONSTRUCTED: no strictly faster kernel is the unsuccessful opt episode (knob opt_no_gain_score).
    return cfg.no_gain


def valid_latency(ms: float | None) -> bool:
    """A usable latency measurement: finite and positive."""
    return ms is not None and math.isfinite(ms) and ms > 0


def atu_credit(retrieved: Iterable[int], adopted: Iterable[int], z: float, beta: float) -> dict[int, float]:
    """ξ_m (spec §4.2): z/|A| for m ∈ A, −β for m ∈ R \\ A. Property 1: Σ_{A} ξ = z."""
    adopted_set = set(adopted)
    credit = {m: -beta for m in retrieved if m not in adopted_set}
    if adopted_set:
        share = z / len(adopted_set)
        credit.update({m: share for m in adopted_set})
    return credit


def uniform_credit(retrieved: Iterable[int], resident_used: Iterable[int], z: float) -> dict[int, float]:
    """Uniform Credit ablation (spec §9): every retrieved item gets the full z.

    RECONSTRUCTED: resident rules marked used also get z (their usage marks are not adoption
    decisions on retrieved items, so the ablation keeps them).
    """
    return {m: z for m in (*retrieved, *resident_used)}


def learning_rate(n_upd: int, eta_min: float) -> float:
    """η = max(1/(1+n_upd), η_min) with n_upd already counting this update (spec §4.3)."""
    return max(1.0 / (1.0 + n_upd), eta_min)


def update_utility(u: float, n_upd: int, xi: float, eta_min: float) -> tuple[float, int]:
    """Eq. 16: u ← (1−η)u + ηξ. Returns (u', n_upd'); n_upd is incremented before η (spec §4.3)."""
    n = n_upd + 1
    eta = learning_rate(n, eta_min)
    return (1.0 - eta) * u + eta * xi, n


def apply_credit(items: Mapping[int, Item], sets: EpisodeSets, z: float, operator: str,
                 cfg: MemoryConfig, rule: CreditRule = CreditRule.ATU) -> dict[int, Item]:
    """One episode's utility update and counters over the touched items (spec §4.3, §7 ATU_UPDATE).

    Returns updated copies of every item in R ∪ A that exists in `items` (others are ignored:
    e.g. an item deleted between retrieval and learning). Counters: n_ret += 1 for R,
    n_ado += 1 for A, O_m ∪= {operator} for A; the retrieving-operator set grows for R.
    """
    if not math.isfinite(z):
        raise ValueError(f"terminal score must be finite, got {z}")
    if rule is CreditRule.ATU:
        credit = atu_credit(sets.retrieved, sets.adopted, z, cfg.beta)
    else:
        credit = uniform_credit(sets.retrieved, sets.resident_used, z)
    out: dict[int, Item] = {}
    for m, xi in credit.items():
        old = items.get(m)
        if old is None:
            continue
        u, n_upd = update_utility(old.u, old.n_upd, xi, cfg.eta_min)
        out[m] = _counted(replace(old, u=u, n_upd=n_upd), m, sets, operator)
    return out


def _counted(item: Item, m: int, sets: EpisodeSets, operator: str) -> Item:
    """A copy of `item` with the episode's deduplicated counters applied (spec §4.3)."""
    new = replace(item, adopting_ops=set(item.adopting_ops), retrieving_ops=set(item.retrieving_ops))
    if m in sets.retrieved:
        new.n_ret += 1
        new.retrieving_ops.add(operator)
    if m in sets.adopted:
        new.n_ado += 1
        new.adopting_ops.add(operator)
    return new


def count_only(items: Mapping[int, Item], sets: EpisodeSets, operator: str) -> dict[int, Item]:
    """Counters without any utility change (value memory keeps n_ret/n_ado for reports)."""
    out: dict[int, Item] = {}
    for m in sets.retrieved | sets.adopted:
        old = items.get(m)
        if old is None:
            continue
        out[m] = _counted(old, m, sets, operator)
    return out


def update_access(item: Item, clock: int, used: bool, cfg: MemoryConfig) -> Item:
    """p̂ after an episode (spec §6.1). `item.state` is its state during the episode; `clock` is
    the episode clock after this episode.

    Retrievable items: eligible_episodes = clock − born − resident_episodes (every episode since
    creation in which the item was retrievable), p̂ = n_ret / max(1, eligible). Residents: EMA
    p̂ ← (1−μ)p̂ + μ·1[used], and the episode counts as resident.
    """
    if item.state is ItemState.CONSOLIDATED:
        p_hat = (1.0 - cfg.mu) * item.p_hat + cfg.mu * (1.0 if used else 0.0)
        return replace(item, p_hat=p_hat, resident_episodes=item.resident_episodes + 1)
    eligible = max(0, clock - item.born_episode - item.resident_episodes)
    return replace(item, eligible_episodes=eligible, p_hat=retrieval_frequency(item.n_ret, eligible))


def retrieval_frequency(n_ret: int, eligible: int) -> float:
    """p̂ before promotion: n_ret / max(1, eligible_episodes), capped at 1."""
    return min(1.0, n_ret / max(1, eligible))
