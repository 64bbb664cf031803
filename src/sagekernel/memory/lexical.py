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

Layout: term postings (document, weighted frequency) in CSC order for a base prefix of the
documents, plus an unsorted tail for documents appended since; the tail is scanned per query and
merged into the base once it passes 1/8 of it (amortised O(1) per appended token). Phrases use
positional postings built the same way over the flat token stream.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Sequence

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
        self._tok.extend(toks)
        self._seg.extend(segs)
        self._p_doc.extend(p_doc)
        self._p_term.extend(p_term)
        self._p_wtf.extend(p_wtf)
        self._dlen.extend(lens)
        self.n_docs += len(docs)
        if self._p_doc.n - self._base_p > max(4096, self._base_p // 8):
            self._merge()
        return list(range(first, self.n_docs))

    def _merge(self) -> None:
        nv = len(self.vocab)
        self._post_order, self._post_ptr = _group(self._p_term.view, nv)
        self._base_p = self._p_doc.n
        stream = self._tok.view
        real = np.flatnonzero(stream >= 0)
        order, self._pos_ptr = _group(stream[real], nv)
        self._pos = real[order]
        self._base_t = self._tok.n

    # ---- lookups --------------------------------------------------------------------------------
    def _postings(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        """(docs ascending, weighted frequencies) of term t."""
        docs, wtf = self._p_doc.a, self._p_wtf.a
        parts_d, parts_w = [], []
        if t < len(self._post_ptr) - 1:
            sel = self._post_order[self._post_ptr[t]: self._post_ptr[t + 1]]
            parts_d.append(docs[sel])
            parts_w.append(wtf[sel])
        if self._p_doc.n > self._base_p:
            tail = self._base_p + np.flatnonzero(self._p_term.a[self._base_p: self._p_doc.n] == t)
            parts_d.append(docs[tail])
            parts_w.append(wtf[tail])
        if len(parts_d) == 1:
            return parts_d[0], parts_w[0]
        return np.concatenate(parts_d), np.concatenate(parts_w)

    def _positions(self, t: int) -> np.ndarray:
        base = t < len(self._pos_ptr) - 1
        out = self._pos[self._pos_ptr[t]: self._pos_ptr[t + 1]] if base else self._pos[:0]
        if self._tok.n > self._base_t:
            tail = self._base_t + np.flatnonzero(self._tok.a[self._base_t: self._tok.n] == t)
            out = np.concatenate([out, tail])
        return out

    def _phrase(self, ids: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """(docs ascending, weighted phrase frequencies) of an adjacent token sequence."""
        stream = self._tok.a
        end = self._tok.n
        starts = self._positions(ids[0])
        for j, t in enumerate(ids[1:], start=1):
            starts = starts[starts + j < end]
            starts = starts[stream[starts + j] == t]
        if not len(starts):
            return starts, np.zeros(0)
        seg = np.searchsorted(self._seg.view, starts, side="right") - 1
        nf = len(self.weights)
        doc = seg // nf
        w = self.weights[seg % nf]
        uniq, inv = np.unique(doc, return_inverse=True)
        return uniq, np.bincount(inv, weights=w)

    def scores(self, terms: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(documents with a hit, their BM25 scores) for the OR of the phrases `terms`."""
        n = self.n_docs
        if n == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        avgdl = self.total_tokens / n
        dlen = self._dlen.a
        parts_d: list[np.ndarray] = []
        parts_s: list[np.ndarray] = []
        for term in terms:
            words = tokenize(term)
            ids = [self.vocab.get(w, -1) for w in words]
            if not ids or min(ids) < 0:
                continue  # an empty phrase or an unseen word: no row contains it
            docs, f = self._postings(ids[0]) if len(ids) == 1 else self._phrase(ids)
            if not len(docs):
                continue
            hit = len(docs)
            idf = math.log((n - hit + 0.5) / (hit + 0.5))
            if idf <= 0.0:
                idf = 1e-6
            parts_d.append(docs)
            parts_s.append(idf * ((f * (K1 + 1.0)) / (f + K1 * (1.0 - B + B * dlen[docs] / avgdl))))
        if not parts_d:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        if len(parts_d) == 1:
            return parts_d[0], parts_s[0]
        docs, inv = np.unique(np.concatenate(parts_d), return_inverse=True)
        return docs, np.bincount(inv, weights=np.concatenate(parts_s))

    def top(self, terms: Sequence[str], limit: int) -> tuple[np.ndarray, np.ndarray]:
        """The best `limit` (documents, scores), best first; ties by smaller document number."""
        docs, s = self.scores(terms)
        if len(docs) > limit > 0:
            thr = np.partition(s, len(s) - limit)[len(s) - limit]
            keep = np.flatnonzero(s >= thr)
            docs, s = docs[keep], s[keep]
        order = np.lexsort((docs, -s))[: max(0, limit)]
        return docs[order], s[order]
