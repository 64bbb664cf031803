"""Memory benchmark: retrieval latency and per-episode update time at 10^3, 10^4, 10^5 items.

    python3 benchmarks/bench_memory.py [--sizes 1000,10000,100000] [--queries 50] [--json]

Columns (medians, milliseconds, one process on one core):
- embed: the real all-MiniLM-L6-v2 query embedding (independent of the store size; '-' if the
  model is not installed);
- score: everything after the query embedding in `retrieve_with` (in-memory BM25, dense scoring,
  hybrid relevance, γ-rerank, loading the 5 items from SQLite);
- lexical / dense: the two parts of score on their own;
- recall: overlap of the dense top-15 with exact scoring (1.0 below the PCA threshold);
- exact: share of queries whose projected dense search was certified exact by the cosine bound;
- learn: one full `learn` (3 rounds × 5 items, ATU + counters + p̂ + gates + Algorithm 1 +
  snapshot + adoption records, one transaction), no new items;
- learn+item: the same plus one distilled item (dedup against all embeddings, insert, embed).
Store items carry synthetic texts and clustered random unit vectors of dimension 384 (10^5 real
MiniLM encodes would take minutes; scoring cost depends on the dimension, not on the values).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from sagekernel import db
from sagekernel.memory.embedding import DIM, default_embedder, to_blob
from sagekernel.memory.policies import StorePolicy
from sagekernel.memory.records import ItemState
from sagekernel.memory.retrieval import RetrievalIndex
from sagekernel.records import AdoptionDecision, EpisodeKind, EpisodeTrace, ItemDraft, RoundTrace

WORDS = [f"tok{i}" for i in range(3000)] + ["reduction", "matmul", "softmax", "tiling", "vectorise", "cache",
                                            "overflow", "race", "alignment", "bounds", "latency", "stride"]


class RandomEmbedder:
    """Deterministic stand-in with the MiniLM interface (name, dim, encode)."""

    name = "bench-random"
    dim = DIM

    def __init__(self, centers: np.ndarray) -> None:
        self.centers = centers

    def encode(self, texts: list[str]) -> np.ndarray:
        out = []
        for t in texts:
            rng = np.random.default_rng(abs(hash(t)) % 2**32)
            v = self.centers[rng.integers(len(self.centers))] + 0.35 * rng.normal(size=DIM)
            out.append(v / np.linalg.norm(v))
        return np.asarray(out, dtype=np.float32)

    def encode_one(self, text: str) -> np.ndarray:
        return self.encode([text])[0]


def build(ws: Path, n: int, emb: RandomEmbedder, rng: np.random.Generator) -> sqlite3.Connection:
    conn = db.connect(ws)
    texts = [" ".join(rng.choice(WORDS, size=12)) for _ in range(n)]
    vecs = emb.encode(texts)
    n_val, n_hot = min(200, n // 10), min(40, n // 50)
    rows = []
    for i, t in enumerate(texts):
        state = "consolidated" if i < n_hot else ("validated" if i < n_val else "cold")
        good = i < n_val
        rows.append((t[:60], "performance" if i % 2 else "correctness", "cat", t, "a;", "b;",
                     0.3 if good else 0.0, 5 if good else 0, 4 if good else 0, 5 if good else 0,
                     0.3 if good else 0.0, state, f"rule {i} " * 20 if good else "", 40 if good else 0,
                     "2026-01-01T00:00:00Z", "seed", f"h{i}"))
    with db.transaction(conn):
        conn.executemany(
            "INSERT INTO items (title, type, category, error_message, wrong_code, correct_code, u, n_ret, "
            "n_ado, n_upd, p_hat, state, rule_text, rule_tokens, created_at, source, content_hash) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
        conn.executemany("INSERT INTO item_adopters VALUES (?, ?)",
                         [(i + 1, f"op{k}") for i in range(n_val) for k in range(3)])
        conn.executemany("INSERT INTO item_embeddings VALUES (?, ?, ?, ?)",
                         [(i + 1, emb.name, DIM, to_blob(v)) for i, v in enumerate(vecs)])
    return conn


def med(xs: list[float]) -> float:
    return statistics.median(xs) * 1000


def bench_size(n: int, queries: int, rng: np.random.Generator) -> dict[str, float]:
    emb = RandomEmbedder(np.random.default_rng(1).normal(size=(256, DIM)))
    with tempfile.TemporaryDirectory() as tmp:
        conn = build(Path(tmp), n, emb, rng)
        policy = StorePolicy("sage", conn, run_id="bench", embedder=emb)  # type: ignore[arg-type]
        texts = [" ".join(rng.choice(WORDS, size=10)) for _ in range(queries)]
        qvecs = [emb.encode_one(t) for t in texts]
        index: RetrievalIndex = policy.index
        exact = index
        if index._proj is not None:
            exact = RetrievalIndex(policy.store, emb, approx_above=10**9)  # type: ignore[arg-type]
        score, lex, dense, recall, certified = [], [], [], [], []
        mask = index.eligible_mask() & index.has_emb
        for t, q in zip(texts, qvecs, strict=True):
            t0 = time.perf_counter()
            policy.retrieve_with(t, q, episode=EpisodeKind.CORR, k=5)
            t1 = time.perf_counter()
            index.lexical(t, 60)
            t2 = time.perf_counter()
            top = index._dense_top(q, mask, 15)
            t3 = time.perf_counter()
            certified.append(index.last_exact)
            score.append(t1 - t0)
            lex.append(t2 - t1)
            dense.append(t3 - t2)
            truth = exact._dense_top(q, mask, 15)
            recall.append(len(set(top.tolist()) & set(truth.tolist())) / 15)
        learn: list[float] = []
        learn_item: list[float] = []
        for e in range(12):
            rounds = []
            for r in range(3):
                got = policy.retrieve_with(texts[(3 * e + r) % len(texts)], qvecs[(3 * e + r) % len(texts)],
                                           episode=EpisodeKind.CORR, k=5)
                rounds.append(RoundTrace(round=r + 1, episode=EpisodeKind.CORR, retrieved=got, correct=r == 2,
                                         decisions=[AdoptionDecision(x.item_id, i < 2, "bench")
                                                    for i, x in enumerate(got)],
                                         resident_shown=[m.id for m in policy.store.in_state(
                                             ItemState.CONSOLIDATED)][:3]))
            trace = EpisodeTrace(f"op{e}", "cat", 1, EpisodeKind.CORR, rounds, success=True)
            drafts = [ItemDraft(f"bench item {e} " + " ".join(rng.choice(WORDS, 6)), "performance", "cat",
                                "slow", "a;", "b;", f"op{e}")] if e % 2 else []
            t0 = time.perf_counter()
            policy.learn(trace, drafts)
            (learn_item if drafts else learn).append(time.perf_counter() - t0)
        conn.close()
    return {"items": n, "score_ms": med(score), "lexical_ms": med(lex), "dense_ms": med(dense),
            "recall_at_15": statistics.mean(recall), "exact_share": statistics.mean(certified),
            "learn_ms": med(learn), "learn_item_ms": med(learn_item)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    real = default_embedder()
    embed_ms = None
    if real is not None:
        real.encode_one("warm up")
        times = []
        for i in range(20):
            t0 = time.perf_counter()
            real.encode_one(f"runtime error: out of bounds read in reduction tail, operator {i}")
            times.append(time.perf_counter() - t0)
        embed_ms = med(times)
    rows = [bench_size(int(s), args.queries, rng) for s in args.sizes.split(",")]
    command = "python3 " + " ".join(sys.argv)
    if args.json:
        print(json.dumps({"command": command, "query_embed_ms": embed_ms, "rows": rows}, indent=2))
        return
    print(f"$ {command}")
    print(f"query embedding (all-MiniLM-L6-v2, p50): {'-' if embed_ms is None else f'{embed_ms:.2f} ms'}")
    print(f"{'items':>8} {'score':>8} {'lexical':>8} {'dense':>8} {'recall':>7} {'exact':>6} {'learn':>8} "
          f"{'learn+item':>11}")
    for r in rows:
        print(f"{r['items']:>8} {r['score_ms']:>8.2f} {r['lexical_ms']:>8.2f} {r['dense_ms']:>8.2f} "
              f"{r['recall_at_15']:>7.3f} {r['exact_share']:>6.2f} {r['learn_ms']:>8.2f} "
              f"{r['learn_item_ms']:>11.2f}")
    base = rows[0]
    print("ratios vs the smallest store: " + ", ".join(
        f"{r['items']}: score ×{r['score_ms'] / base['score_ms']:.1f}, "
        f"learn ×{r['learn_ms'] / base['learn_ms']:.1f}"
        for r in rows[1:]))


if __name__ == "__main__":
    main()
