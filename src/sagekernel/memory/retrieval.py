"""Retrieval with controlled utility reranking (spec §3).

relevance (RECONSTRUCTED combination, docs/spec_choices.md):
  rel = 0.7 · max(0, cos(q, m)) + 0.3 · bm25(q, m) / max bm25 over the query's lexical hits
with cos from all-MiniLM-L6-v2 (embeddings cached per item, an in-memory float32 matrix loaded
once) and BM25 from the in-memory `LexicalIndex` (the same scores SQLite FTS5 bm25() gave, see
lexical.py). Without the embedding model rel is the normalised BM25 alone.
The pool is the top K′ by rel among eligible items (cold/validated, optional type filter);
`rerank` then orders it by s = rel + γ·u and keeps k. γ = 0 is exactly relevance order.

The query embedding (`embed_query`) is computed apart from the scoring (`pool`) so the
benchmark can time them separately. Above `approx_above` items, dense scoring first tries the
cluster bounds of dense_clusters.py (exact: only the rows of clusters that can reach the K′-th
best cosine are scored); when they do not cut the scan it ranks all rows in a 64-dimensional PCA
projection, rescores the best 20·K′ exactly, and then uses an exact upper bound on the cosine to
rescore every other row that could still enter the top K′, which makes the result exact whenever
that set is small (`_dense_top`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from sagekernel.memory import dense_clusters
from sagekernel.memory.embedding import Embedder
from sagekernel.memory.lexical import LexicalIndex
from sagekernel.memory.records import Item, ItemState
from sagekernel.memory.store import Store

DENSE_WEIGHT = 0.7  # RECONSTRUCTED: dense carries most of the signal, BM25 anchors exact API names
_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]+|\d+[A-Za-z_]\w*")
_STOP = frozenset({
    "the", "and", "for", "with", "from", "that", "this", "into", "are", "was", "were", "not", "but", "has",
    "have", "had", "its", "per", "use", "using", "when", "then", "than", "all", "any", "can", "via", "get",
    "set", "out"})
_MAX_QUERY_TERMS = 32
_STATE_CODE = {ItemState.COLD: 0, ItemState.VALIDATED: 1, ItemState.CONSOLIDATED: 2}


@dataclass(frozen=True)
class Candidate:
    item_id: int
    relevance: float  # in [0, 1]
    utility: float


@dataclass(frozen=True)
class Ranked:
    candidate: Candidate
    score: float


def rerank(pool: Sequence[Candidate], gamma: float, k: int) -> list[Ranked]:
    """s(m) = rel + γ·u (spec §3); ties by higher relevance, then smaller id. γ = 0 is relevance
    order exactly. Property 3: a relevance lead above γ(1+q) can never be overturned."""
    scored = [Ranked(c, c.relevance + gamma * c.utility) for c in pool]
    scored.sort(key=lambda r: (-r.score, -r.candidate.relevance, r.candidate.item_id))
    return scored[:k]


def query_terms(text: str) -> list[str]:
    seen: dict[str, None] = {}
    for tok in _TOKEN.findall(text.lower()):
        if tok not in _STOP and tok not in seen:
            seen[tok] = None
    return list(seen)[:_MAX_QUERY_TERMS]


class RetrievalIndex:
    """In-memory arrays (ids, u, q1, q2, state, type, embeddings) and the BM25 index over the
    store, loaded once and patched after each learn (`update` for statistics and states, `add`
    for new items), so a query never reads SQLite."""

    def __init__(self, store: Store, embedder: Embedder | None, *, approx_above: int = 40000,
                 approx_dim: int = 64) -> None:
        self.store = store
        self.embedder = embedder
        self.approx_above = approx_above
        self.approx_dim = approx_dim
        self.last_exact = True  # whether the last dense search was exact (see `_dense_top`)
        self.reload()

    # ---- loading and patching --------------------------------------------------------------------
    def reload(self) -> None:
        rows = self.store.index_rows()
        n = len(rows)
        self.ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=n)
        self.u = np.fromiter((r[1] for r in rows), dtype=np.float64, count=n)
        self.q1 = np.fromiter((r[2] for r in rows), dtype=np.float64, count=n)
        self.q2 = np.fromiter((r[3] for r in rows), dtype=np.float64, count=n)
        self.state = np.fromiter((_STATE_CODE[ItemState(r[4])] for r in rows), dtype=np.int8, count=n)
        self.text = LexicalIndex()
        self.text.add_many([(r[6], r[7], r[8], r[5], r[9], r[10]) for r in rows])
        self.has_emb = np.zeros(n, dtype=bool)
        dim = self.embedder.dim if self.embedder else 0
        self._emb_buf = np.zeros((n + max(64, n // 8), dim), dtype=np.float32)  # headroom for `add`
        self.emb = self._emb_buf[:n]
        if self.embedder is not None and n:
            eids, mat = self.store.embeddings(self.embedder.name)
            if len(eids):
                pos = np.searchsorted(self.ids, eids)
                ok = (pos < n) & (self.ids[np.minimum(pos, n - 1)] == eids)
                self.emb[pos[ok]] = mat[ok]
                self.has_emb[pos[ok]] = True
        self._build_projection()

    def _build_projection(self) -> None:
        """Above `approx_above` rows: an orthonormal basis B of the top principal directions, the
        projections P = E·B and the residual norms r = |e − B·Bᵀe| of every row. For any query,
        cos(q, e) = (Bᵀq)·(Bᵀe) + (residual dot) ≤ (Bᵀq)·(Bᵀe) + |r_q|·r_e, an exact upper bound."""
        self._proj: np.ndarray | None = None
        self._basis: np.ndarray | None = None
        self._resid: np.ndarray | None = None
        self._clusters: dense_clusters.Clusters | None = None
        if self.embedder is None or len(self.ids) <= self.approx_above:
            return
        rng = np.random.default_rng(0)
        sample = self.emb[rng.choice(len(self.ids), size=min(4096, len(self.ids)), replace=False)]
        centred = (sample - sample.mean(axis=0)).astype(np.float64)
        # The top eigenvectors of the dim×dim covariance are the top right singular vectors of the
        # sample (orthonormal, so the bound stays exact); eigh takes ~50 ms where a 4096×384 SVD
        # took seconds on the shared 2-core machine.
        _, vecs = np.linalg.eigh(centred.T @ centred)
        top = vecs[:, ::-1][:, : self.approx_dim]
        self._basis = np.ascontiguousarray(top.astype(np.float32))
        n = len(self.ids)
        self._proj_buf = np.zeros((self._emb_buf.shape[0], self.approx_dim), dtype=np.float32)
        self._resid_buf = np.zeros(self._emb_buf.shape[0], dtype=np.float32)
        self._proj = self._proj_buf[:n]
        self._resid = self._resid_buf[:n]
        for lo in range(0, n, 8192):  # chunked: no n×dim temporary
            part = self.emb[lo:lo + 8192]
            self._proj[lo:lo + 8192] = part @ self._basis
            self._resid[lo:lo + 8192] = _residual(part, self._proj[lo:lo + 8192])
        self._clusters = dense_clusters.build(self.emb, self._proj)

    def __len__(self) -> int:
        return len(self.ids)

    def positions(self, item_ids: Iterable[int]) -> np.ndarray:
        want = np.fromiter(item_ids, dtype=np.int64)
        pos = np.searchsorted(self.ids, want)
        if len(want) and (np.any(pos >= len(self.ids)) or np.any(self.ids[np.minimum(pos, len(self.ids) - 1)]
                                                                  != want)):
            missing = sorted(set(want.tolist()) - set(self.ids.tolist()))
            raise KeyError(f"items not in the retrieval index: {missing[:5]}")
        return pos

    def resident_ids(self) -> list[int]:
        """The items this index holds as consolidated."""
        return self.ids[self.state == _STATE_CODE[ItemState.CONSOLIDATED]].tolist()

    def update(self, items: Iterable[Item]) -> None:
        """Patch utilities, Q values and states of existing items (after learn)."""
        items = list(items)
        if not items:
            return
        pos = self.positions(m.id for m in items)
        self.u[pos] = [m.u for m in items]
        self.q1[pos] = [m.q1 for m in items]
        self.q2[pos] = [m.q2 for m in items]
        self.state[pos] = [_STATE_CODE[m.state] for m in items]

    def add(self, item: Item, vec: np.ndarray | None) -> None:
        """Append a newly written item (ids grow, so the arrays stay sorted)."""
        if len(self.ids) and item.id <= self.ids[-1]:
            self.reload()
            return
        self.ids = np.append(self.ids, item.id)
        self.u = np.append(self.u, item.u)
        self.q1 = np.append(self.q1, item.q1)
        self.q2 = np.append(self.q2, item.q2)
        self.state = np.append(self.state, np.int8(_STATE_CODE[item.state]))
        self.has_emb = np.append(self.has_emb, vec is not None)
        self.text.add((item.title, item.error_message, item.category, item.type, item.wrong_code,
                       item.correct_code))
        if self.embedder is not None:
            row = (vec if vec is not None else np.zeros(self.embedder.dim, np.float32)).astype(np.float32)
            self.emb = _grow(self, "_emb_buf", self.emb, row)
            if self._proj is not None and self._basis is not None and self._resid is not None:
                p = row @ self._basis
                self._proj = _grow(self, "_proj_buf", self._proj, p)
                self._resid = _grow(self, "_resid_buf", self._resid, _residual(row[None], p[None])[0])
                cl = self._clusters
                if cl is not None and len(self.ids) - cl.n_rows > cl.n_rows // 4:  # regroup
                    self._clusters = dense_clusters.build(self.emb, self._proj)

    def any_similar(self, vec: np.ndarray, threshold: float) -> bool:
        """Exactly whether some stored embedding has cosine ≥ threshold with `vec` (dedup, spec §5).
        Above `approx_above` rows only rows whose upper bound reaches the threshold are rescored."""
        if not self.has_emb.any():
            return False
        v = vec.astype(np.float32)
        if self._proj is not None and self._basis is not None and self._resid is not None:
            vb = v @ self._basis
            v_res = float(np.sqrt(max(0.0, float(v @ v) - float(vb @ vb))))
            bound = self._proj @ vb + (v_res * self._resid + _BOUND_SLACK)
            rows = np.flatnonzero(bound >= threshold)
            rows = rows[self.has_emb[rows]]
            return bool(len(rows)) and float((self.emb[rows] @ v).max()) >= threshold
        sims = self.emb @ v
        return float(sims[self.has_emb].max()) >= threshold

    # ---- scoring --------------------------------------------------------------------------------
    def embed_query(self, text: str) -> np.ndarray | None:
        return None if self.embedder is None else self.embedder.encode_one(text)

    def eligible_mask(self, only_ids: np.ndarray | None = None) -> np.ndarray:
        mask = self.state != _STATE_CODE[ItemState.CONSOLIDATED]
        if only_ids is not None:  # a provenance scope (memory/records.py RetrievalScope)
            mask &= np.isin(self.ids, only_ids)
        return mask

    def lexical_top(self, text: str, limit: int) -> tuple[np.ndarray, np.ndarray]:
        """(positions, BM25 scores) of the best `limit` lexical matches over all items (in any
        state, as the FTS5 query this replaces), best first."""
        terms = query_terms(text)
        if not terms:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        return self.text.top(terms, limit)

    def lexical(self, text: str, limit: int) -> dict[int, float]:
        """BM25 scores (higher is better) of the best `limit` matches, by item id."""
        pos, score = self.lexical_top(text, limit)
        return dict(zip(self.ids[pos].tolist(), score.tolist(), strict=True))

    def pool(self, text: str, qvec: np.ndarray | None, *, size: int = 15, utility: str = "u",
             only_ids: np.ndarray | None = None) -> list[Candidate]:
        """The top-`size` eligible candidates by hybrid relevance, best first (`only_ids`: only
        these items are eligible)."""
        n = len(self.ids)
        if n == 0 or size <= 0:
            return []
        mask = self.eligible_mask(only_ids)
        dense = qvec is not None and self.embedder is not None and bool(self.has_emb.any())
        limit = max(50, 4 * size)
        lpos, lscore = self.lexical_top(text, limit)
        dpos = self._dense_top(qvec, mask & self.has_emb, size) if dense and qvec is not None else None
        keep = mask[lpos]
        lpos, lscore = lpos[keep], np.maximum(lscore[keep], 0.0)
        top_lex = float(lscore.max()) if len(lscore) else 0.0
        cpos = np.sort(lpos) if dpos is None else np.union1d(lpos, dpos)
        if not len(cpos):
            return []
        lex01 = np.zeros(len(cpos))
        if top_lex > 0:
            lex01[np.searchsorted(cpos, lpos)] = lscore / top_lex
        if dense:
            assert qvec is not None
            cos = np.where(self.has_emb[cpos], self.emb[cpos] @ qvec.astype(np.float32), 0.0)
            rel = DENSE_WEIGHT * np.clip(cos, 0.0, 1.0) + (1.0 - DENSE_WEIGHT) * lex01
        else:
            rel = lex01
        util = {"u": self.u, "q1": self.q1, "q2": self.q2}.get(utility)
        order = np.lexsort((self.ids[cpos], -rel))[:size]
        return [Candidate(int(self.ids[cpos[i]]), float(np.clip(rel[i], 0.0, 1.0)),
                          0.0 if util is None else float(util[cpos[i]])) for i in order]

    def _dense_top(self, qvec: np.ndarray, mask: np.ndarray, size: int) -> np.ndarray:
        """Positions of the `size` eligible rows with the highest cosine.

        Above `approx_above` rows: the cluster bounds (dense_clusters.py, exact) when they leave
        few rows; otherwise rank all rows by the projected score, rescore the best
        20·size exactly, and let θ be the size-th best exact cosine among them. Every row whose
        upper bound (see `_build_projection`) reaches θ could still belong to the top, so when
        there are at most `_CERTIFY_MAX` of them they are all rescored and the result is exact;
        otherwise the top of the 20·size rescored rows is returned (approximate; recall is
        measured in benchmarks/bench_memory.py). `self.last_exact` says which happened."""
        q = qvec.astype(np.float32)
        self.last_exact = True
        if self._proj is not None and self._basis is not None and self._resid is not None:
            qb = q @ self._basis
            q_res = float(np.sqrt(max(0.0, float(q @ q) - float(qb @ qb))))
            if self._clusters is not None:  # the clusters' bounds skip most rows (dense_clusters.py)
                found = dense_clusters.candidates(self._clusters, self.emb, q, mask, size)
                if found is not None:
                    rows, exact = found
                    keep = min(size, len(rows))
                    return rows[np.argpartition(-exact, keep - 1)[:keep]] if keep else rows
            coarse = self._proj @ qb
            coarse[~mask] = -np.inf
            n_ok = int(np.count_nonzero(mask))
            short = min(n_ok, 20 * size)
            if short == 0:
                return np.zeros(0, dtype=np.int64)
            rows = _top_rows(coarse, short)
            exact = self.emb[rows] @ q
            keep = min(size, len(rows))
            theta = np.partition(exact, len(exact) - keep)[len(exact) - keep]
            bound = coarse + (q_res * self._resid + _BOUND_SLACK)
            need = np.flatnonzero(bound >= theta)
            if len(need) <= _CERTIFY_MAX:
                rows, exact = need, self.emb[need] @ q
            else:
                self.last_exact = False
            return rows[np.argpartition(-exact, keep - 1)[:keep]] if keep else rows
        scores = self.emb @ q
        scores[~mask] = -np.inf
        keep = min(size, int(mask.sum()))
        if keep == 0:
            return np.zeros(0, dtype=np.int64)
        return np.argpartition(-scores, keep - 1)[:keep]


_CERTIFY_MAX = 4096  # rows rescored at most to make the projected search exact
_BOUND_SLACK = 1e-4  # float32 rounding of the projected score and the residual norms


def _top_rows(scores: np.ndarray, k: int) -> np.ndarray:
    """About the k rows with the highest finite score (at least min(k, finite rows) of them): a
    threshold from a 1/8 strided sample, then one comparison pass; argpartition as the fallback.
    Only used to seed θ, so the size need not be exact."""
    sub = scores[::8]
    k_sub = -(-k // 8)
    if len(scores) >= 64 * k and len(sub) > k_sub:
        v = np.partition(sub, len(sub) - k_sub)[len(sub) - k_sub]
        if np.isfinite(v):
            rows = np.flatnonzero(scores >= v)
            if k <= len(rows) <= 4 * k:
                return rows
    rows = np.argpartition(-scores, k - 1)[:k]
    return rows[np.isfinite(scores[rows])]


def _residual(rows: np.ndarray, proj: np.ndarray) -> np.ndarray:
    """|e − B·Bᵀe| = sqrt(|e|² − |Bᵀe|²) per row (B orthonormal)."""
    sq = np.einsum("ij,ij->i", rows, rows) - np.einsum("ij,ij->i", proj, proj)
    return np.sqrt(np.maximum(sq, 0.0)).astype(np.float32)


def _grow(owner: object, attr: str, view: np.ndarray, row: np.ndarray) -> np.ndarray:
    """Append a row to an array kept as a view of a larger buffer (amortised O(1), no full copy)."""
    buf: np.ndarray | None = getattr(owner, attr, None)
    n = view.shape[0]
    if buf is None or buf.shape[0] <= n or view.base is not buf:
        buf = np.empty((max(16, int(n * 1.25) + 1), *view.shape[1:]), dtype=view.dtype)
        buf[:n] = view
        setattr(owner, attr, buf)
    buf[n] = row
    return buf[: n + 1]
