"""In-memory BM25 over the items' retrieval text (the lexical half of spec §3 relevance).

It computes exactly what SQLite FTS5 `bm25(items_fts, 4, 2, 1, 1, 0.5, 0.5)` computed for an
OR query of quoted terms over an FTS5 table with the `unicode61` tokenizer (the store used such a
table before; tests/test_memory_lexical.py checks equality against a real FTS5 table):

  score(D) = Σ_phrases idf · f·(k1+1) / (f + k1·(1 − b + b·|D|/avgdl)),  k1 = 1.2, b = 0.75
  f   = Σ_columns weight[col] · (instances of the phrase in that column of D)
  idf = ln((N − n_hit + 0.5)/(n_hit + 0.5)), or 1e-6 when that is ≤ 0
  |D| = tokens of D over all columns, avgdl = tokens / N over all N documents.

A query term is a phrase: "tile_size" is the phrase (tile, size), matched at adjacent positions
inside one column. Documents (one per item, in id order) are only ever appended; a state change
does not touch the index (FTS5 kept consolidated items too; retrieval masks them out).

Layout: term postings (document, weighted frequency) grouped by term for a base prefix of the
documents, plus a tail for documents appended since (a term → entries map), merged into the base
once it passes 1/8 of it (amortised O(1) per appended token). Phrases use positional postings
built the same way over the flat token stream.

`top` returns exactly the best documents of `scores` (same scores bit for bit, same tie rule)
without scoring every posting of the common words: MaxScore pruning (Turtle & Flood 1995), in
term-at-a-time form. Each term's contribution is bounded by idf · (k1+1)·f̂/(f̂ + k1(1 − b +
b·d̂/avgdl)) with f̂ its largest weighted frequency and d̂ its shortest document (kept per term);
terms are taken by bound, highest first, and their postings accumulated while a document found
in none of them so far could still reach the `limit`-th best partial score θ; after that only the
candidates already found are looked up in the remaining terms, and a candidate whose partial
score plus the remaining bounds falls below θ is dropped. The survivors are rescored in query
order, as `scores` sums, and sorted. tests/test_memory_lexical.py checks `top` against `scores`.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

K1 = 1.2
B = 0.75
WEIGHTS = (4.0, 2.0, 1.0, 1.0, 0.5, 0.5)  # title, error_message, category, type, wrong, correct
_WORD = re.compile(r"[^\W_]+")  # unicode61: letters and digits are token characters, the rest separates


def tokenize(text: str) -> list[str]:
    """unicode61 tokens (lower case, Latin diacritics removed) for the text a search will see."""
    if not text.isascii():
        text = "".join(c for c in unicodedata.normalize("NFKD", text) if unicodedata.category(c) != "Mn")
    return _WORD.findall(text.lower())


class _Buf:
    """A growable 1-d numpy array (amortised O(1) append)."""

    def __init__(self, dtype: type, cap: int = 1024) -> None:
        self.a: np.ndarray = np.empty(cap, dtype=dtype)
        self.n = 0

    def extend(self, values: Sequence[float] | np.ndarray) -> None:
        k = len(values)
        if self.n + k > len(self.a):
            new = np.empty(max(2 * len(self.a), self.n + k), dtype=self.a.dtype)
            new[: self.n] = self.a[: self.n]
            self.a = new
        self.a[self.n: self.n + k] = values
        self.n += k

    @property
    def view(self) -> np.ndarray:
        return self.a[: self.n]


def _group(keys: np.ndarray, n_keys: int) -> tuple[np.ndarray, np.ndarray]:
    """(order, ptr): a stable sort of `keys` and CSC-style pointers, so group g is
    order[ptr[g]:ptr[g+1]] (positions in their original order)."""
    order = np.argsort(keys, kind="stable")
    ptr = np.zeros(n_keys + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=n_keys), out=ptr[1:])
    return order, ptr


def _per_group(reduce: np.ufunc, values: np.ndarray, ptr: np.ndarray, empty: float) -> np.ndarray:
    """reduce(values[ptr[g]:ptr[g+1]]) for every group g, `empty` for empty groups."""
    out = np.full(len(ptr) - 1, empty)
    nz = np.flatnonzero(np.diff(ptr) > 0)
    if len(nz):
        out[nz] = reduce.reduceat(values, ptr[:-1][nz])
    return out


def bm25(idf: float, f: np.ndarray, dl: np.ndarray, avgdl: float) -> np.ndarray:
    """One phrase's contribution to the documents with weighted frequencies f and lengths dl."""
    return idf * ((f * (K1 + 1.0)) / (f + K1 * (1.0 - B + B * dl / avgdl)))


@dataclass(frozen=True)
class _Term:
    """One query phrase's postings: documents ascending, weighted frequencies, idf, and a bound
    on its contribution to any document."""

    docs: np.ndarray
    f: np.ndarray
    idf: float
    bound: float

    def lookup(self, cand: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(which of the sorted candidates hold the phrase, their weighted frequencies)."""
        if not len(cand):
            return np.zeros(0, dtype=bool), np.zeros(0)
        cand = cand.astype(self.docs.dtype, copy=False)  # one dtype: searchsorted would copy docs
        idx = np.minimum(np.searchsorted(self.docs, cand), len(self.docs) - 1)
        hit = self.docs[idx] == cand
        return hit, self.f[idx[hit]].astype(np.float64)


class LexicalIndex:
    """BM25 over documents of len(weights) fields; documents are numbered 0, 1, ... as added."""

    def __init__(self, weights: Sequence[float] = WEIGHTS) -> None:
        self.weights = np.asarray(weights, dtype=np.float64)
        self.vocab: dict[str, int] = {}
        self.n_docs = 0
        self.total_tokens = 0
        self._dlen = _Buf(np.float64)  # |D|
        # postings triplets (doc, term, weighted frequency), appended in document order
        self._p_doc, self._p_term, self._p_wtf = _Buf(np.int64), _Buf(np.int64), _Buf(np.float64)
        # flat token stream: -1 before every field, so a phrase never spans fields or documents
        self._tok = _Buf(np.int64)
        self._seg = _Buf(np.int64)  # stream position of the separator opening field (doc, col)
        self._base_p = 0  # triplets [0, _base_p) are grouped by term
        self._base_t = 0  # stream positions [0, _base_t) are grouped by token
        self._tail_p: dict[int, list[int]] = {}  # term -> its triplets at or after _base_p
        self._tail_t: dict[int, list[int]] = {}  # token -> its stream positions at or after _base_t
        self._merge()

    def __len__(self) -> int:
        return self.n_docs

    # ---- building -------------------------------------------------------------------------------
    def add(self, fields: Sequence[str]) -> int:
        """Append one document (its fields in weight order); returns its number."""
        return self.add_many([fields])[0]

    def add_many(self, docs: Sequence[Sequence[str]]) -> list[int]:
        nf = len(self.weights)
        first = self.n_docs
        toks: list[int] = []
        segs: list[int] = []
        p_doc: list[int] = []
        p_term: list[int] = []
        p_wtf: list[float] = []
        lens: list[float] = []
        pos = self._tok.n
        vocab = self.vocab
        for d, fields in enumerate(docs, start=first):
            if len(fields) != nf:
                raise ValueError(f"expected {nf} fields, got {len(fields)}")
            wtf: dict[int, float] = {}
            length = 0
            for col, text in enumerate(fields):
                ids = [vocab.setdefault(t, len(vocab)) for t in tokenize(text)]
                segs.append(pos)
                toks.append(-1)
                toks += ids
                pos += 1 + len(ids)
                length += len(ids)
                w = float(self.weights[col])
                for t in ids:
                    wtf[t] = wtf.get(t, 0.0) + w
            for t, f in wtf.items():
                p_doc.append(d)
                p_term.append(t)
                p_wtf.append(f)
            lens.append(float(length))
            self.total_tokens += length
        if self._p_doc.n + len(p_doc) - self._base_p <= max(4096, self._base_p // 8):
            for k, t in enumerate(p_term, start=self._p_doc.n):  # stays in the tail: index it
                self._tail_p.setdefault(t, []).append(k)
            for k, t in enumerate(toks, start=self._tok.n):
                if t >= 0:
                    self._tail_t.setdefault(t, []).append(k)
            merge = False
        else:
            merge = True
        self._tok.extend(toks)
        self._seg.extend(segs)
        self._p_doc.extend(p_doc)
        self._p_term.extend(p_term)
        self._p_wtf.extend(p_wtf)
        self._dlen.extend(lens)
        self.n_docs += len(docs)
        if merge:
            self._merge()
        return list(range(first, self.n_docs))

    def _merge(self) -> None:
        nv = len(self.vocab)
        order, self._post_ptr = _group(self._p_term.view, nv)
        # postings stored grouped (a term's are a slice, no gather per query); documents fit int32
        # and weighted frequencies (sums of the column weights) are kept as float32 when exact
        self._post_doc = self._p_doc.view[order].astype(np.int32)
        wtf = self._p_wtf.view[order]
        w32 = wtf.astype(np.float32)
        self._post_wtf = w32 if np.array_equal(w32, wtf) else wtf
        self._max_f = _per_group(np.maximum, wtf, self._post_ptr, 0.0)
        self._min_dl = _per_group(np.minimum, self._dlen.view[self._post_doc], self._post_ptr, np.inf)
        self._base_p = self._p_doc.n
        stream = self._tok.view
        real = np.flatnonzero(stream >= 0)
        order, self._pos_ptr = _group(stream[real], nv)
        self._pos = real[order]
        # the field (doc·nf + column) of every grouped position: a phrase's matches need no search
        self._pos_seg = (np.cumsum(stream < 0) - 1)[self._pos].astype(np.int32)
        self._base_t = self._tok.n
        self._tail_p.clear()
        self._tail_t.clear()

    # ---- lookups --------------------------------------------------------------------------------
    def _postings(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        """(docs ascending, weighted frequencies as stored) of term t."""
        base = t < len(self._post_ptr) - 1
        lo, hi = (self._post_ptr[t], self._post_ptr[t + 1]) if base else (0, 0)
        docs, wtf = self._post_doc[lo:hi], self._post_wtf[lo:hi]
        tail = self._tail_p.get(t)
        if tail:
            docs = np.concatenate([docs, self._p_doc.a[tail]])
            wtf = np.concatenate([wtf.astype(np.float64), self._p_wtf.a[tail]])
        return docs, wtf

    def _n_positions(self, t: int) -> int:
        base = int(self._pos_ptr[t + 1] - self._pos_ptr[t]) if t < len(self._pos_ptr) - 1 else 0
        return base + len(self._tail_t.get(t, ()))

    def _positions(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        """(stream positions ascending, their fields) of token t."""
        base = t < len(self._pos_ptr) - 1
        lo, hi = (self._pos_ptr[t], self._pos_ptr[t + 1]) if base else (0, 0)
        pos, seg = self._pos[lo:hi], self._pos_seg[lo:hi]
        tail = self._tail_t.get(t)
        if tail:
            extra = np.asarray(tail, dtype=np.int64)
            pos = np.concatenate([pos, extra])
            seg = np.concatenate([seg, np.searchsorted(self._seg.view, extra, side="right") - 1])
        return pos, seg

    def _phrase(self, ids: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """(docs ascending, weighted phrase frequencies) of an adjacent token sequence, found
        from the positions of its rarest word."""
        stream = self._tok.a
        end = self._tok.n
        anchor = min(range(len(ids)), key=lambda j: self._n_positions(ids[j]))
        pos, seg = self._positions(ids[anchor])
        starts = pos - anchor
        ok = (starts >= 0) & (starts + len(ids) <= end)
        starts, seg = starts[ok], seg[ok]
        for j, t in enumerate(ids):
            if j != anchor:
                ok = stream[starts + j] == t
                starts, seg = starts[ok], seg[ok]
        if not len(starts):
            return starts, np.zeros(0)
        nf = len(self.weights)
        doc = seg // nf  # ascending, as the positions are
        w = self.weights[seg % nf]
        first = np.flatnonzero(np.r_[True, doc[1:] != doc[:-1]])
        return doc[first].astype(np.int64), np.add.reduceat(w, first)

    def _term(self, term: str, avgdl: float) -> _Term | None:
        """The phrase's postings, or None when no document holds it."""
        ids = [self.vocab.get(w, -1) for w in tokenize(term)]
        if not ids or min(ids) < 0:
            return None  # an empty phrase or an unseen word: no row contains it
        n = self.n_docs
        if len(ids) == 1:
            docs, f = self._postings(ids[0])
        else:
            docs, f = self._phrase(ids)
        if not len(docs):
            return None
        hit = len(docs)
        idf = math.log((n - hit + 0.5) / (hit + 0.5))
        if idf <= 0.0:
            idf = 1e-6
        if len(ids) == 1:
            t = ids[0]
            max_f = float(self._max_f[t]) if t < len(self._max_f) else 0.0
            min_dl = float(self._min_dl[t]) if t < len(self._min_dl) else math.inf
            tail = self._tail_p.get(t)
            if tail:
                max_f = max(max_f, float(self._p_wtf.a[tail].max()))
                min_dl = min(min_dl, float(self._dlen.a[self._p_doc.a[tail]].min()))
            bound = float(bm25(idf, np.array([max_f]), np.array([min_dl]), avgdl)[0])
        else:
            bound = float(bm25(idf, f, self._dlen.a[docs], avgdl).max())
        return _Term(docs, f, idf, bound)

    def scores(self, terms: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(documents with a hit, their BM25 scores) for the OR of the phrases `terms`: every
        posting scored (the reference `top` is checked against)."""
        n = self.n_docs
        if n == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        avgdl = self.total_tokens / n
        parts_d: list[np.ndarray] = []
        parts_s: list[np.ndarray] = []
        for term in terms:
            p = self._term(term, avgdl)
            if p is None:
                continue
            docs = p.docs.astype(np.int64)
            parts_d.append(docs)
            parts_s.append(bm25(p.idf, p.f.astype(np.float64), self._dlen.a[docs], avgdl))
        if not parts_d:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        if len(parts_d) == 1:
            return parts_d[0], parts_s[0]
        docs, inv = np.unique(np.concatenate(parts_d), return_inverse=True)
        return docs, np.bincount(inv, weights=np.concatenate(parts_s))

    def top(self, terms: Sequence[str], limit: int) -> tuple[np.ndarray, np.ndarray]:
        """The best `limit` (documents, scores) of `scores`, best first; ties by smaller document
        number. MaxScore pruning (module docstring)."""
        empty = np.zeros(0, dtype=np.int64), np.zeros(0)
        n = self.n_docs
        if n == 0 or limit <= 0:
            return empty
        avgdl = self.total_tokens / n
        dlen = self._dlen.a
        found = [self._term(t, avgdl) for t in terms]
        live = [p for p in found if p is not None]
        if not live:
            return empty
        by_bound = sorted(live, key=lambda p: -p.bound)
        rest = [*np.cumsum([p.bound for p in by_bound][::-1])[::-1].tolist(), 0.0]  # bounds from j on
        acc = np.zeros(n)
        seen = np.zeros(n, dtype=bool)
        theta = -math.inf  # the limit-th best partial score so far: a lower bound on the answer's
        j = 0
        while j < len(by_bound) and rest[j] >= theta - _slack(theta):
            p = by_bound[j]  # a document outside the candidates could still reach θ: take them all
            acc[p.docs] += bm25(p.idf, p.f.astype(np.float64), dlen[p.docs], avgdl)
            seen[p.docs] = True
            j += 1
            if len(p.docs) >= limit:  # any `limit` partial scores bound θ from below: this term's
                theta = max(theta, _kth_largest(acc[p.docs], limit))  # (no pass over all n)
        cand = np.flatnonzero(seen)
        part = acc[cand]
        if len(part) >= limit:
            theta = max(theta, _kth_largest(part, limit))
        for p in by_bound[j:]:
            keep = part + rest[j] >= theta - _slack(theta)
            cand, part = cand[keep], part[keep]
            hit, f = p.lookup(cand)
            part[hit] += bm25(p.idf, f, dlen[cand[hit]], avgdl)
            j += 1
            if len(part) >= limit:
                theta = max(theta, _kth_largest(part, limit))
        if len(part) > limit:
            keep = part >= theta - _slack(theta)
            cand = cand[keep]
        score = np.zeros(len(cand))  # rescored in query order: the sums `scores` makes, bit for bit
        for p in live:
            hit, f = p.lookup(cand)
            score[hit] += bm25(p.idf, f, dlen[cand[hit]], avgdl)
        order = np.lexsort((cand, -score))[:limit]
        return cand[order].astype(np.int64), score[order]


def _kth_largest(values: np.ndarray, k: int) -> float:
    return float(np.partition(values, len(values) - k)[len(values) - k])


def _slack(theta: float) -> float:
    """Room for rounding: partial sums are added in another order than the final scores."""
    return 1e-9 * max(1.0, abs(theta)) if math.isfinite(theta) else 0.0
