"""A synthetic stream that checks the credit rules end to end (`sage simulate`).

Each item has a home category (its text carries that category's word, plus filler and sometimes
a stray other-category word, so lexical relevance is informative but noisy) and a hidden true
usefulness per category: useful with probability `p_home` in its home category and `p_other`
elsewhere. An operator of category c runs one correctness episode of up to `rounds` rounds; each
round the REAL policy retrieves k items from the REAL store (a temporary SQLite workspace,
lexical BM25 retrieval), the simulated agent adopts an item with probability `adopt_useful` if
it is truly useful for c and `adopt_useless` otherwise, and the round succeeds with probability
min(0.95, base + gain · #adopted useful items). Learning uses the real `learn` code.

Honest comparison: every random draw (item texts, usefulness, operator order and query noise,
adoption draws keyed by (operator, round, item), success draws keyed by (operator, round)) is
made once per seed and shared by all methods; the methods differ only in their credit rule.
UGC is off for all three (residency is not modelled), so only cold reranking differs:
relevance = γ 0 and no updates; uniform = every retrieved item gets z; atu = spec §4.

Reported per method: precision@5 (share of retrieved items truly useful), success rate, and the
utility AUC (the probability that a truly useful retrieved item ends with a higher u than a
useless one; 0.5 for relevance, whose utilities never move). tests/test_memory_simulate.py holds
the claim: ATU's AUC beats uniform credit's on every seed of the default stream.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sagekernel import db, defaults
from sagekernel.memory.methods import Variant
from sagekernel.memory.policies import StorePolicy
from sagekernel.memory.records import Item, MemoryConfig
from sagekernel.memory.store import Store
from sagekernel.records import AdoptionDecision, EpisodeKind, EpisodeTrace, RoundTrace

CATEGORIES = ("reduction", "elementwise", "matmul", "convolution", "attention", "scan", "pooling", "norm")
FILLER = tuple(f"w{i:03d}" for i in range(60))
METHODS = {"relevance": Variant("none", "none", False), "uniform": Variant("uniform", "none", True),
           "atu": Variant("atu", "none", True)}


@dataclass(frozen=True)
class SimConfig:
    items: int = 200
    operators: int = 60
    categories: int = 6
    rounds: int = 3
    k: int = defaults.K
    p_home: float = 0.4
    p_other: float = 0.03
    stray_word: float = 0.3
    adopt_useful: float = 0.8
    adopt_useless: float = 0.15
    base: float = 0.1
    gain: float = 0.3


@dataclass
class World:
    """Everything random about one seed, drawn once."""

    texts: list[tuple[str, str]]  # (title, error_message) per item
    home: np.ndarray  # item -> category index
    useful: np.ndarray  # items × categories, bool
    op_cat: np.ndarray  # operator -> category index
    queries: list[list[str]]  # operator -> per-round query text
    adopt_draw: np.ndarray  # operators × rounds × items
    success_draw: np.ndarray  # operators × rounds


def make_world(cfg: SimConfig, seed: int) -> World:
    rng = np.random.default_rng(seed)
    cats = CATEGORIES[: cfg.categories]
    home = rng.integers(0, len(cats), size=cfg.items)
    useful = rng.random((cfg.items, len(cats))) < cfg.p_other
    useful[np.arange(cfg.items), home] = rng.random(cfg.items) < cfg.p_home
    texts = []
    for m in range(cfg.items):
        words = [cats[home[m]], *rng.choice(FILLER, size=4)]
        if rng.random() < cfg.stray_word:
            words.append(cats[rng.integers(0, len(cats))])
        title = f"{cats[home[m]]} kernel tip " + " ".join(words[1:3])
        texts.append((title, " ".join(words[2:]) + f" {cats[home[m]]} failure"))
    op_cat = rng.integers(0, len(cats), size=cfg.operators)
    queries = [[f"{cats[op_cat[o]]} " + " ".join(rng.choice(FILLER, size=3)) for _ in range(cfg.rounds)]
               for o in range(cfg.operators)]
    return World(texts, home, useful, op_cat, queries,
                 rng.random((cfg.operators, cfg.rounds, cfg.items)), rng.random((cfg.operators, cfg.rounds)))


def run_method(world: World, cfg: SimConfig, method: str, workspace: Path, seed: int) -> dict[str, float]:
    conn = db.connect(workspace)
    try:
        store = Store(conn)
        with db.transaction(conn):
            ids = [store.insert_item(Item(id=0, title=t, type="tip", category="synthetic", error_message=e,
                                          wrong_code="", correct_code="", source="seed"))
                   for t, e in world.texts]
        index_of = {item_id: m for m, item_id in enumerate(ids)}
        policy = StorePolicy("sage", conn, run_id=f"sim-{method}-{seed}", seed=seed,
                             config=MemoryConfig(k=cfg.k), embedder=None)
        policy.variant = METHODS[method]
        hits = shown = solved = 0
        for o in range(cfg.operators):
            c = int(world.op_cat[o])
            rounds: list[RoundTrace] = []
            for t in range(cfg.rounds):
                got = policy.retrieve_with(world.queries[o][t], None, episode=EpisodeKind.CORR, k=cfg.k)
                decisions, good = [], 0
                for r in got:
                    m = index_of[r.item_id]
                    truly = bool(world.useful[m, c])
                    hits += truly
                    shown += 1
                    p = cfg.adopt_useful if truly else cfg.adopt_useless
                    adopted = bool(world.adopt_draw[o, t, m] < p)
                    good += adopted and truly
                    decisions.append(AdoptionDecision(r.item_id, adopted, "simulated"))
                ok = bool(world.success_draw[o, t] < min(0.95, cfg.base + cfg.gain * good))
                rounds.append(RoundTrace(round=t + 1, episode=EpisodeKind.CORR, retrieved=got,
                                         decisions=decisions, compiled=True, correct=ok))
                if ok:
                    break
            success = rounds[-1].correct
            solved += success
            policy.learn(EpisodeTrace(operator=f"op{o}", category=CATEGORIES[c], level=1,
                                      episode=EpisodeKind.CORR, rounds=rounds, success=success))
        useful_home = world.useful[np.arange(cfg.items), world.home]
        final = {index_of[m.id]: m for m in store.get_many(ids).values() if m.n_ret > 0}
        auc = utility_auc([final[m].u for m in final], [bool(useful_home[m]) for m in final])
        return {"precision_at_5": hits / max(1, shown), "success_rate": solved / cfg.operators,
                "utility_auc": auc}
    finally:
        conn.close()


def utility_auc(u: list[float], useful: list[bool]) -> float:
    """P(a truly useful retrieved item has a higher learned u than a useless one); ties count
    half, so equal utilities (relevance only: no updates) give 0.5."""
    pos = [x for x, ok in zip(u, useful, strict=True) if ok]
    neg = [x for x, ok in zip(u, useful, strict=True) if not ok]
    if not pos or not neg:
        return 0.5
    wins = sum((a > b) + 0.5 * (a == b) for a in pos for b in neg)
    return float(wins / (len(pos) * len(neg)))


def simulate(cfg: SimConfig | None = None, seeds: int = 5) -> dict[str, Any]:
    """Run the same streams under relevance, uniform and atu; means over seeds."""
    cfg = cfg or SimConfig()
    per_seed: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="sage-sim-") as tmp:
        for seed in range(seeds):
            world = make_world(cfg, seed)
            row: dict[str, Any] = {"seed": seed}
            for method in METHODS:
                row[method] = run_method(world, cfg, method, Path(tmp) / f"{method}-{seed}", seed)
            per_seed.append(row)
    keys = ("precision_at_5", "success_rate", "utility_auc")
    methods = {m: {key: float(np.mean([r[m][key] for r in per_seed])) for key in keys} for m in METHODS}
    return {"methods": methods, "seeds": seeds, "config": cfg.__dict__, "per_seed": per_seed}
