"""Fixed-bank replay (spec §9 last row, S1 App. D.2): pure, over episodes already rebuilt.

Recomputes cold utilities from u = 0 under (a) relevance-only (γ = 0, so u plays no part),
(b) uniform credit and (c) ATU. Reading a run's episodes from its workspace and writing the
replayed bank are the runner's (runner/bank_replay.py): the memory never reads run records.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sagekernel import defaults
from sagekernel.memory.atu import CreditRule, apply_credit, episode_sets, terminal_score
from sagekernel.memory.records import Item, MemoryConfig
from sagekernel.memory.retrieval import Candidate, rerank
from sagekernel.records import EpisodeTrace

VARIANTS = ("relevance", "uniform", "atu")


@dataclass(frozen=True)
class ReplayResult:
    episodes: int
    utilities: dict[str, dict[int, float]]  # variant -> item id -> u
    reordered: dict[str, int]  # rounds whose top-k differs from relevance order
    rounds: int


def replay(items: dict[int, Item], episodes: list[EpisodeTrace], cfg: MemoryConfig | None = None,
           gamma: float = defaults.GAMMA) -> ReplayResult:
    """Pure: recompute utilities from u = 0 under each variant over the same episodes."""
    cfg = cfg or MemoryConfig()
    fresh = {i: replace(m, u=0.0, n_upd=0, n_ret=0, n_ado=0, adopting_ops=set(), retrieving_ops=set())
             for i, m in items.items()}
    utilities: dict[str, dict[int, float]] = {"relevance": {i: 0.0 for i in fresh}}
    for name, rule in (("uniform", CreditRule.UNIFORM), ("atu", CreditRule.ATU)):
        state = dict(fresh)
        for trace in episodes:
            z = terminal_score(trace, cfg)
            if z is None:
                continue
            state.update(apply_credit(state, episode_sets(trace), z, trace.operator, cfg, rule))
        utilities[name] = {i: m.u for i, m in state.items()}
    reordered = dict.fromkeys(VARIANTS, 0)
    total = 0
    for trace in episodes:
        for rt in trace.rounds:
            if not rt.retrieved:
                continue
            total += 1
            plain = [Candidate(r.item_id, r.relevance, 0.0) for r in rt.retrieved]
            base = [c.candidate.item_id for c in rerank(plain, 0.0, len(plain))]
            for name in ("uniform", "atu"):
                u = utilities[name]
                pool = [Candidate(r.item_id, r.relevance, u.get(r.item_id, 0.0)) for r in rt.retrieved]
                order = [c.candidate.item_id for c in rerank(pool, gamma, len(pool))]
                reordered[name] += order != base
    return ReplayResult(len(episodes), utilities, reordered, total)
