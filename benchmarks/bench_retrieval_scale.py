"""Retrieval at scale (issue 30): load time, p50/p95 per query and recall against exact search, at
10^5 and 10^6 items, for the embedded store (SQLite) and for PostgreSQL, side by side in one run.

    python3 benchmarks/bench_retrieval_scale.py [--sizes 100000,1000000] [--queries 200]
        [--backends sqlite,postgres] [--json]

Per size and backend: a fresh store (a SQLite workspace file; a throwaway PostgreSQL cluster on a
unix socket, memory/pgserver.py, skipped with the reason when none can be started) holds `n`
synthetic items; then
- load: seconds to build `RetrievalIndex` from the store (all rows, the BM25 index, the embedding
  matrix, the PCA projection and the dense clusters above `approx_above` rows): what a learner
  pays at start;
- p50/p95: milliseconds per query through the real path, `RetrievalIndex.pool` (BM25 + dense
  scoring + hybrid relevance over every eligible item) and `rerank` (γ = 0.5, k = 5); the query
  embedding is not included (it does not depend on the store: bench_memory.py times it);
- recall: for each query the exact answer is computed by brute force (every eligible row's cosine,
  BM25 by scoring every posting, the same hybrid relevance and tie-breaking, then `rerank`); recall@K′ is the
  overlap of the pool (K′ = 15) with the exact pool, recall@k that of the final k = 5; `exact` is the share of
  queries the index certified exact (retrieval.py `_dense_top`);
- lexical / dense: the p50 of the two parts of the pool timed on their own (BM25 top hits over all
  items; the dense top K′), to show where the time goes.
One BLAS thread (OPENBLAS_NUM_THREADS=1 unless set): one learner's query on one core.

Items: titles/texts from kernel-error templates (operators, failure kinds, APIs), a few percent
validated/consolidated; vectors of the embedder's dimension (384) drawn from a seeded normal
mixture (1024 topic centres + per-item noise, then L2-normalised) — no model is loaded or
downloaded. Real sentence embeddings are clustered like this; isotropic vectors (`--spread` large)
are the adversarial case for the projection, and the table says which was used.
"""

from __future__ import annotations

import argparse
import gc
import inspect
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one core: stable timings on a shared machine
os.environ.setdefault("OMP_NUM_THREADS", "1")
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from sagekernel import db  # noqa: E402
from sagekernel.memory.embedding import DIM, to_blob  # noqa: E402
from sagekernel.memory.retrieval import DENSE_WEIGHT, Candidate, RetrievalIndex, query_terms, rerank  # noqa: E402
from sagekernel.memory.store import Store  # noqa: E402

OPS = ["softmax", "matmul", "layernorm", "conv2d", "reduction", "attention", "gelu", "transpose", "scan",
       "topk", "rmsnorm", "embedding_bag", "cross_entropy", "batchnorm", "depthwise_conv", "gather"]
FAULTS = ["out-of-bounds read in the tail loop", "race on the shared accumulator", "misaligned vector load",
          "overflow in the exponent", "wrong stride for non-contiguous input", "cache thrashing at large N",
          "NaN from an empty row", "precision loss in float16 accumulation",
          "bank conflicts in shared memory", "register spill in the inner loop", "unvectorised remainder",
          "missing barrier before reuse"]
APIS = ["tl.load", "tl.store", "tl.dot", "__shfl_down_sync", "_mm256_fmadd_ps", "vld1q_f32", "atomicAdd",
        "tl.max", "cp.async", "omp parallel for", "__syncthreads", "DataCopy"]
FIXES = ["mask the tail with offsets < n", "accumulate in float32", "tile by 64 and unroll by 4",
         "subtract the row max first", "pad the shared tile by one column", "use a two-pass reduction",
         "guard the empty row", "align the pointer to 32 bytes", "hoist the stride out of the loop"]
NAME = "bench-synthetic-384"
APPROX_ABOVE = inspect.signature(RetrievalIndex).parameters["approx_above"].default  # the learners' own


class SyntheticEmbedder:
    """The embedder interface RetrievalIndex reads (name, dim); vectors come from `vectors`."""

    name = NAME
    dim = DIM


def texts(rng: np.random.Generator, n: int) -> list[tuple[str, str, str, str, str, str]]:
    """(title, type, category, error_message, wrong_code, correct_code) of n items."""
    op, fault, api, fix = (rng.integers(len(xs), size=n) for xs in (OPS, FAULTS, APIS, FIXES))
    tile = rng.integers(1, 9, size=n) * 32
    out = []
    for i in range(n):
        o, f, a, x = OPS[op[i]], FAULTS[fault[i]], APIS[api[i]], FIXES[fix[i]]
        out.append((f"{o}: {f} ({a})", "correctness" if i % 3 else "performance", o,
                    f"{o} kernel failed: {f} near {a} with BLOCK={tile[i]}",
                    f"{a}(ptr + offs)  # BLOCK={tile[i]}", f"{x}; {a}(ptr + offs, mask=offs < n)"))
    return out


def vectors(rng: np.random.Generator, centres: np.ndarray, n: int, spread: float) -> np.ndarray:
    v = centres[rng.integers(len(centres), size=n)] + spread * rng.normal(size=(n, DIM))
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return v.astype(np.float32)


def batches(n: int, seed: int, spread: float, size: int = 50_000,
            ) -> Iterator[tuple[int, list[Any], np.ndarray]]:
    """(first id, text rows, vectors) in chunks, deterministic in (n, seed, spread)."""
    rng = np.random.default_rng(seed)
    centres = np.random.default_rng(seed + 1).normal(size=(1024, DIM))
    for lo in range(0, n, size):
        m = min(size, n - lo)
        yield lo + 1, texts(rng, m), vectors(rng, centres, m, spread)


def rows_of(first: int, txt: list[Any]) -> list[tuple[Any, ...]]:
    out = []
    for j, (title, typ, cat, err, wrong, right) in enumerate(txt):
        i = first + j
        state = "consolidated" if i % 500 == 0 else ("validated" if i % 50 == 0 else "cold")
        u = ((i * 7919) % 1000) / 1000 - 0.3
        out.append((i, title, typ, cat, err, wrong, right, u, state, "2026-01-01T00:00:00Z", "seed", f"h{i}"))
    return out


_ITEM_COLS = ("id, title, type, category, error_message, wrong_code, correct_code, u, state, created_at, "
              "source, content_hash")


def fill_sqlite(path: Path, n: int, seed: int, spread: float) -> Any:
    conn = db.connect(path)
    for first, txt, vec in batches(n, seed, spread):
        with db.transaction(conn):
            conn.executemany(f"INSERT INTO items ({_ITEM_COLS}) VALUES ({','.join('?' * 12)})",
                             rows_of(first, txt))
            conn.executemany("INSERT INTO item_embeddings VALUES (?, ?, ?, ?)",
                             [(first + j, NAME, DIM, to_blob(v)) for j, v in enumerate(vec)])
    return conn


def fill_postgres(url: str, n: int, seed: int, spread: float) -> Any:
    from sagekernel.memory.backend import connect_memory

    conn = connect_memory(url)
    for first, txt, vec in batches(n, seed, spread):
        with conn.raw.cursor() as cur:  # COPY: a bulk load, not the store's per-item path
            with cur.copy(f"COPY items ({_ITEM_COLS}) FROM STDIN") as cp:
                for r in rows_of(first, txt):
                    cp.write_row(r)
            with cur.copy("COPY item_embeddings (item_id, model, dim, vec) FROM STDIN") as cp:
                for j, v in enumerate(vec):
                    cp.write_row((first + j, NAME, DIM, to_blob(v)))
    conn.execute("ANALYZE")
    return conn


def queries(n_q: int, seed: int, spread: float) -> tuple[list[str], np.ndarray]:
    rng = np.random.default_rng(seed + 99)
    centres = np.random.default_rng(seed + 1).normal(size=(1024, DIM))
    txt = [f"{r[0]} {r[3]}" for r in texts(rng, n_q)]
    return txt, vectors(rng, centres, n_q, spread)


def brute_lexical_top(index: RetrievalIndex, text: str, limit: int) -> tuple[np.ndarray, np.ndarray]:
    """BM25's best `limit` by scoring every posting (`LexicalIndex.scores`), not the pruned `top`."""
    docs, s = index.text.scores(query_terms(text))
    order = np.lexsort((docs, -s))[:limit]
    return docs[order], s[order]


def exact_pool(index: RetrievalIndex, text: str, q: np.ndarray, size: int) -> list[Candidate]:
    """The pool by brute force: every eligible row's cosine, every BM25 posting scored, the same hybrid
    relevance and order as `RetrievalIndex.pool`."""
    mask = index.eligible_mask() & index.has_emb
    cos = index.emb @ q
    lpos, lscore = brute_lexical_top(index, text, max(50, 4 * size))
    keep = index.eligible_mask()[lpos]
    lpos, lscore = lpos[keep], np.maximum(lscore[keep], 0.0)
    lex = np.zeros(len(index))
    if len(lscore) and lscore.max() > 0:
        lex[lpos] = lscore / lscore.max()
    rel = DENSE_WEIGHT * np.clip(cos, 0.0, 1.0) + (1.0 - DENSE_WEIGHT) * lex
    rel[~mask] = -np.inf
    top = np.argpartition(-rel, size)[: size + 64]  # a margin for ties, ordered exactly below
    top = top[np.lexsort((index.ids[top], -rel[top]))][:size]
    return [Candidate(int(index.ids[i]), float(np.clip(rel[i], 0, 1)), float(index.u[i])) for i in top]


def measure(conn: Any, n_q: int, seed: int, spread: float, k: int, size: int, gamma: float, *,
            approx_above: int = APPROX_ABOVE) -> dict[str, Any]:
    t0 = time.perf_counter()
    index = RetrievalIndex(Store(conn), SyntheticEmbedder(), approx_above=approx_above)  # type: ignore[arg-type]
    load_s = time.perf_counter() - t0
    qtext, qvec = queries(n_q, seed, spread)
    for t, q in zip(qtext[:3], qvec[:3], strict=True):  # warm-up: caches, lazy BM25 merges
        rerank(index.pool(t, q, size=size), gamma, k)
    lat, lex_t, dense_t, rec_pool, rec_k, certified = [], [], [], [], [], []
    eligible = index.eligible_mask() & index.has_emb
    for t, q in zip(qtext, qvec, strict=True):
        t1 = time.perf_counter()
        pool = index.pool(t, q, size=size)
        got = rerank(pool, gamma, k)
        lat.append(time.perf_counter() - t1)
        certified.append(index.last_exact)
        t2 = time.perf_counter()
        index.lexical_top(t, max(50, 4 * size))
        t3 = time.perf_counter()
        index._dense_top(q, eligible, size)
        dense_t.append(time.perf_counter() - t3)
        lex_t.append(t3 - t2)
        truth = exact_pool(index, t, q, size)
        rec_pool.append(len({c.item_id for c in pool} & {c.item_id for c in truth}) / size)
        want = {r.candidate.item_id for r in rerank(truth, gamma, k)}
        rec_k.append(len({r.candidate.item_id for r in got} & want) / k)
    out = {"items": len(index), "load_s": load_s, "p50_ms": float(np.percentile(lat, 50) * 1000),
           "p95_ms": float(np.percentile(lat, 95) * 1000), "lexical_p50_ms": statistics.median(lex_t) * 1000,
           "dense_p50_ms": statistics.median(dense_t) * 1000, f"recall_at_{size}": statistics.mean(rec_pool),
           f"recall_at_{k}": statistics.mean(rec_k), "exact_share": statistics.mean(certified),
           "projected": index._proj is not None}
    del index
    gc.collect()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100000,1000000")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--backends", default="sqlite,postgres")
    ap.add_argument("--spread", type=float, default=0.35, help="per-item noise around its topic centre")
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--pool", type=int, default=15)
    ap.add_argument("--gamma", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows: list[dict[str, Any]] = []
    skipped: dict[str, str] = {}
    scratch = Path(tempfile.mkdtemp(prefix="sage-bench-scale-"))
    server = None
    try:
        backends = args.backends.split(",")
        if "postgres" in backends:
            from sagekernel.memory.pgserver import LocalPostgres, ServerUnavailable

            pg_root = tempfile.mkdtemp(prefix="sagepg-")
            try:
                server = LocalPostgres(pg_root)
                server.start()
            except (ServerUnavailable, ImportError) as exc:
                skipped["postgres"] = str(exc)
                server = None
        for n in (int(s) for s in args.sizes.split(",")):
            for backend in backends:
                if backend in skipped:
                    continue
                t0 = time.perf_counter()
                if backend == "sqlite":
                    conn = fill_sqlite(scratch / f"ws{n}", n, args.seed, args.spread)
                else:
                    assert server is not None
                    conn = fill_postgres(server.create_database(f"scale{n}"), n, args.seed, args.spread)
                fill_s = time.perf_counter() - t0
                row = {"backend": backend, "fill_s": fill_s,
                       **measure(conn, args.queries, args.seed, args.spread, args.k, args.pool, args.gamma)}
                conn.close()
                rows.append(row)
                shutil.rmtree(scratch / f"ws{n}", ignore_errors=True)
                print(json.dumps(row), file=sys.stderr, flush=True)
    finally:
        if server is not None:
            server.stop()
            shutil.rmtree(server.root, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)
    command = "python3 " + " ".join(sys.argv)
    vectors_note = (f"synthetic vectors: seeded normal mixture, 1024 centres, spread {args.spread}, "
                    f"L2-normalised, dim {DIM} (no embedding model loaded)")
    if args.json:
        print(json.dumps({"command": command, "vectors": vectors_note, "queries": args.queries,
                          "skipped": skipped, "rows": rows}, indent=2))
        return
    print(f"$ {command}\n{vectors_note}; {args.queries} queries, pool K'={args.pool}, k={args.k}, "
          f"gamma={args.gamma}")
    for name, why in skipped.items():
        print(f"{name}: skipped ({why})")
    print(f"{'backend':<9}{'items':>9}{'fill s':>8}{'load s':>8}{'p50 ms':>8}{'p95 ms':>8}"
          f"{'rec@' + str(args.pool):>8}{'rec@' + str(args.k):>7}{'exact':>7}{'lex ms':>8}{'dense ms':>9}")
    for r in rows:
        print(f"{r['backend']:<9}{r['items']:>9}{r['fill_s']:>8.1f}{r['load_s']:>8.1f}{r['p50_ms']:>8.2f}"
              f"{r['p95_ms']:>8.2f}{r[f'recall_at_{args.pool}']:>8.3f}{r[f'recall_at_{args.k}']:>7.3f}"
              f"{r['exact_share']:>7.2f}{r['lexical_p50_ms']:>8.2f}{r['dense_p50_ms']:>9.2f}")


if __name__ == "__main__":
    main()
