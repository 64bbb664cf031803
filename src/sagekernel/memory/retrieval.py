"""Retrieval with controlled utility reranking (spec §3).

relevance (RECONSTRUCTED combination, docs/spec_choices.md):
  rel = 0.7 · max(0, cos(q, m)) + 0.3 · bm25(q, m) / max bm25 over the query's lexical hits
with cos from all-MiniLM-L6-v2 (embeddings cached per item, an in-memory float32 matrix loaded
once) and BM25 from SQLite FTS5. Without the embedding model rel is the normalised BM25 alone.
The pool is the top K′ by rel among eligible items (cold/validated, optional type filter);
`rerank` then orders it by s = rel + γ·u and keeps k. γ = 0 is exactly relevance order.

The query embedding (`embed_query`) is computed apart from the scoring (`pool`) so the
benchmark can time them separately. Above `approx_above` items, dense scoring first ranks all
rows in a 96-dimensional PCA projection and then rescores the best 20·K′ exactly.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from sagekernel.memory.embedding import Embedder
from sagekernel.memory.records import Item, ItemState
from sagekernel.memory.store import Store

DENSE_WEIGHT = 0.7  # RECONSTRUCTED: dense carries most of the signal, BM25 anchors exact API names
_BM25_WEIGHTS = (4.0, 2.0, 1.0, 1.0, 0.5, 0.5)  # title, error_message, category, type, wrong, correct
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
    """In-memory arrays (ids, u, q1, q2, state, type, embeddings) over the store, loaded once and
    patched after each learn; BM25 comes from the store's FTS5 table."""

    def __init__(self, store: Store, embedder: Embedder | None, *, approx_above: int = 40000,
                 approx_dim: int = 96) -> None:
        self.store = store
        self.embedder = embedder
        self.approx_above = approx_above
        self.approx_dim = approx_dim
        self.reload()

    # ---- loading and patching --------------------------------------------------------------------
    def reload(self) -> None:
        rows = self.store.conn.execute("SELECT id, u, q1, q2, state, type FROM items ORDER BY id").fetchall()
        n = len(rows)
        self.ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=n)
        self.u = np.fromiter((r[1] for r in rows), dtype=np.float64, count=n)
        self.q1 = np.fromiter((r[2] for r in rows), dtype=np.float64, count=n)
        self.q2 = np.fromiter((r[3] for r in rows), dtype=np.float64, count=n)
        self.state = np.fromiter((_STATE_CODE[ItemState(r[4])] for r in rows), dtype=np.int8, count=n)
        self._types: list[str] = []
        self._type_code: dict[str, int] = {}
        self.type = np.fromiter((self._code(r[5]) for r in rows), dtype=np.int32, count=n)
        self.has_emb = np.zeros(n, dtype=bool)
        self.emb = np.zeros((n, self.embedder.dim if self.embedder else 0), dtype=np.float32)
        if self.embedder is not None and n:
            eids, mat = self.store.embeddings(self.embedder.name)
            if len(eids):
                pos = np.searchsorted(self.ids, eids)
                ok = (pos < n) & (self.ids[np.minimum(pos, n - 1)] == eids)
                self.emb[pos[ok]] = mat[ok]
                self.has_emb[pos[ok]] = True
        self._build_projection()

    def _code(self, type_: str) -> int:
        if type_ not in self._type_code:
            self._type_code[type_] = len(self._types)
            self._types.append(type_)
        return self._type_code[type_]

    def _build_projection(self) -> None:
        self._proj: np.ndarray | None = None
        self._basis: np.ndarray | None = None
        if self.embedder is None or len(self.ids) <= self.approx_above:
            return
        rng = np.random.default_rng(0)
        sample = self.emb[rng.choice(len(self.ids), size=min(4096, len(self.ids)), replace=False)]
        _, _, vt = np.linalg.svd(sample - sample.mean(axis=0), full_matrices=False)
        self._basis = np.ascontiguousarray(vt[: self.approx_dim].T.astype(np.float32))
        self._proj = np.ascontiguousarray(self.emb @ self._basis)

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
        self.type = np.append(self.type, np.int32(self._code(item.type)))
        self.has_emb = np.append(self.has_emb, vec is not None)
        if self.embedder is not None:
            row = (vec if vec is not None else np.zeros(self.embedder.dim, np.float32)).astype(np.float32)
            self.emb = _grow(self, "_emb_buf", self.emb, row)
            if self._proj is not None and self._basis is not None:
                self._proj = _grow(self, "_proj_buf", self._proj, row @ self._basis)

    # ---- scoring --------------------------------------------------------------------------------
    def embed_query(self, text: str) -> np.ndarray | None:
        return None if self.embedder is None else self.embedder.encode_one(text)

    def eligible_mask(self, type_filter: Callable[[str], bool] | None = None) -> np.ndarray:
        mask = self.state != _STATE_CODE[ItemState.CONSOLIDATED]
        if type_filter is not None:
            allowed = [c for c, t in enumerate(self._types) if type_filter(t)]
            mask &= np.isin(self.type, allowed)
        return mask

    def lexical(self, text: str, limit: int) -> dict[int, float]:
        """BM25 scores (higher is better) of the best `limit` FTS5 matches, by item id."""
        terms = query_terms(text)
        if not terms:
            return {}
        match = " OR ".join(f'"{t}"' for t in terms)
        weights = ", ".join(str(w) for w in _BM25_WEIGHTS)
        rows = self.store.conn.execute(
            f"SELECT rowid, -bm25(items_fts, {weights}) AS s FROM items_fts WHERE items_fts MATCH ? "
            f"ORDER BY bm25(items_fts, {weights}) LIMIT ?", (match, limit)).fetchall()
        return {int(r[0]): max(0.0, float(r[1])) for r in rows}

    def pool(self, text: str, qvec: np.ndarray | None, *, size: int = 15, utility: str = "u",
             type_filter: Callable[[str], bool] | None = None) -> list[Candidate]:
        """The top-`size` eligible candidates by hybrid relevance, best first."""
        n = len(self.ids)
        if n == 0 or size <= 0:
            return []
        mask = self.eligible_mask(type_filter)
        lex = self.lexical(text, limit=max(50, 4 * size))
        lex_pos: dict[int, float] = {}
        if lex:
            keys = np.fromiter(lex, dtype=np.int64)
            pos = np.searchsorted(self.ids, keys)
            for key, p in zip(keys.tolist(), pos.tolist(), strict=True):
                if p < n and self.ids[p] == key and mask[p]:
                    lex_pos[p] = lex[key]
        top_lex = max(lex_pos.values(), default=0.0)
        dense = qvec is not None and self.embedder is not None and bool(self.has_emb.any())
        cand = set(lex_pos)
        if dense:
            assert qvec is not None
            cand |= set(self._dense_top(qvec, mask & self.has_emb, size).tolist())
        if not cand:
            return []
        cpos = np.fromiter(sorted(cand), dtype=np.int64)
        lex01 = np.array([lex_pos.get(int(p), 0.0) / top_lex if top_lex > 0 else 0.0 for p in cpos])
        if dense:
            assert qvec is not None
            cos = np.where(self.has_emb[cpos], self.emb[cpos] @ qvec.astype(np.float32), 0.0)
            rel = DENSE_WEIGHT * np.clip(cos, 0.0, 1.0) + (1.0 - DENSE_WEIGHT) * lex01
        else:
            rel = lex01
        util = {"u": self.u, "q1": self.q1, "q2": self.q2, "none": np.zeros(n)}[utility]
        order = sorted(range(len(cpos)), key=lambda i: (-rel[i], int(self.ids[cpos[i]])))[:size]
        return [Candidate(int(self.ids[cpos[i]]), float(np.clip(rel[i], 0.0, 1.0)), float(util[cpos[i]]))
                for i in order]

    def _dense_top(self, qvec: np.ndarray, mask: np.ndarray, size: int) -> np.ndarray:
        """Positions of the `size` eligible rows with the highest cosine."""
        q = qvec.astype(np.float32)
        if self._proj is not None and self._basis is not None:
            coarse = self._proj @ (q @ self._basis)
            coarse[~mask] = -np.inf
            short = min(len(coarse), 20 * size)
            rows = np.argpartition(-coarse, short - 1)[:short]
            rows = rows[np.isfinite(coarse[rows])]
            exact = self.emb[rows] @ q
            keep = min(size, len(rows))
            return rows[np.argpartition(-exact, keep - 1)[:keep]] if keep else rows
        scores = self.emb @ q
        scores[~mask] = -np.inf
        keep = min(size, int(mask.sum()))
        if keep == 0:
            return np.zeros(0, dtype=np.int64)
        return np.argpartition(-scores, keep - 1)[:keep]


def _grow(owner: object, attr: str, view: np.ndarray, row: np.ndarray) -> np.ndarray:
    """Append a row to a matrix kept as a view of a larger buffer (amortised O(1), no full copy)."""
    buf: np.ndarray | None = getattr(owner, attr, None)
    n = view.shape[0]
    if buf is None or buf.shape[0] <= n or view.base is not buf:
        buf = np.empty((max(16, int(n * 1.25) + 1), view.shape[1]), dtype=np.float32)
        buf[:n] = view
        setattr(owner, attr, buf)
    buf[n] = row
    return buf[: n + 1]
