"""Synthetic learners for the shared-memory check and benchmark (tests/test_shared_memory_concurrency.py,
benchmarks/shared_memory.py): many processes applying episode updates to one memory at once.

Every episode is a pure function of (worker, n): which seed items it retrieved and adopted, whether
it succeeded, and (one in four) a new item it distilled. So the updates the learners committed can
be replayed serially in the order the memory's episode clock recorded (`commit_order`), into a
fresh memory, and the two memories compared: equal utilities and counts mean no update was lost
and none was applied twice.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sagekernel.memory.records import Item, MemoryConfig
from sagekernel.records import (
    AdoptionDecision,
    EpisodeKind,
    EpisodeTrace,
    ItemDraft,
    RetrievedItem,
    RoundTrace,
)

#: Workers' episodes touch the first HOT_ITEMS seed items most (so credits to one item collide).
HOT_ITEMS = 12


@dataclass(frozen=True)
class Workload:
    seed_ids: tuple[int, ...]  # the item ids episodes draw from (a seeded store's ids)
    per_episode: int = 5  # items retrieved per episode
    adopt: int = 2  # of which adopted
    new_item_every: int = 4  # an episode distils a new item every this many


def operator_name(worker: int, n: int) -> str:
    return f"w{worker}-op{n}"


def parse_operator(name: str) -> tuple[int, int]:
    w, op = name.split("-op")
    return int(w[1:]), int(op)


def episode_of(work: Workload, worker: int, n: int) -> tuple[EpisodeTrace, list[ItemDraft]]:
    """The deterministic episode `n` of learner `worker`, with the items it distilled."""
    rng = random.Random(f"{worker}:{n}")
    hot = list(work.seed_ids[:HOT_ITEMS])
    ids = rng.sample(hot, min(work.per_episode, len(hot)))
    op = operator_name(worker, n)
    got = [RetrievedItem(item_id=i, title="", type="", category="", error_message="", wrong_code="",
                         correct_code="", relevance=1.0 - 0.1 * k, utility=0.0, score=1.0 - 0.1 * k)
           for k, i in enumerate(ids)]
    dec = [AdoptionDecision(i, k < work.adopt, f"{op} {'used' if k < work.adopt else 'skipped'} it")
           for k, i in enumerate(ids)]
    correct = rng.random() < 0.7
    rt = RoundTrace(round=1, episode=EpisodeKind.CORR, retrieved=got, decisions=dec, compiled=True,
                    correct=correct, latency_ms=1.0 if correct else None)
    trace = EpisodeTrace(op, "Elementwise", 1, EpisodeKind.CORR, [rt], success=correct)
    drafts = []
    if n % work.new_item_every == 0:
        drafts.append(ItemDraft(f"Learner {worker} finding {n}: vectorise the tail loop of {op}",
                                "performance", "Elementwise", f"scalar tail in {op} (case {worker}.{n})",
                                f"for(i=0;i<n;i++) y[i]=x[i]; // {op}",
                                f"for(i=0;i+8<=n;i+=8) vst(y+i, vld(x+i)); // {op}", op))
    return trace, drafts


def learner(open_conn: Callable[[], Any], work: Workload, worker: int, episodes: int, config: MemoryConfig,
            start: Any = None) -> tuple[int, float]:
    """Run one learner process: `episodes` updates to the memory `open_conn()` opens, as run
    `w<worker>`. `start` (a multiprocessing barrier) lines the learners up. Returns (updates, seconds)."""
    from sagekernel.memory.policies import make_policy

    conn = open_conn()
    try:
        policy = make_policy("sage", conn, run_id=f"w{worker}", embedder=None, config=config)
        if start is not None:
            start.wait()
        t0 = time.perf_counter()
        for n in range(episodes):
            trace, drafts = episode_of(work, worker, n)
            policy.learn(trace, drafts)
        return episodes, time.perf_counter() - t0
    finally:
        conn.close()


def commit_order(conn: Any) -> list[tuple[str, str]]:
    """(run_id, operator) of every learned episode, in the order the memory committed them."""
    from sagekernel.memory.store import Store

    return Store(conn).episode_order()


def replay_serially(conn: Any, work: Workload, order: list[tuple[str, str]], config: MemoryConfig) -> None:
    """Apply the episodes of `order` one after another to the memory `conn` (one policy per run)."""
    from sagekernel.memory.policies import make_policy

    policies: dict[str, Any] = {}
    for run_id, operator in order:
        if run_id not in policies:
            policies[run_id] = make_policy("sage", conn, run_id=run_id, embedder=None, config=config)
        worker, n = parse_operator(operator)
        trace, drafts = episode_of(work, worker, n)
        policies[run_id].learn(trace, drafts)


def fingerprint(items: list[Item]) -> dict[str, tuple[Any, ...]]:
    """What must be equal between two memories that learned the same updates, by content hash."""
    return {m.content_hash: (round(m.u, 12), m.n_ret, m.n_ado, m.n_upd, m.state.value, round(m.p_hat, 12),
                             m.eligible_episodes, m.resident_episodes, m.promoted_at_episode, m.rule_tokens,
                             tuple(sorted(m.adopting_ops)), tuple(sorted(m.retrieving_ops)), m.born_episode)
            for m in items}
