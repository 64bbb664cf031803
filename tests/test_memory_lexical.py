"""The in-memory BM25 (memory/lexical.py) against SQLite FTS5 bm25() as the oracle, and
incremental appends against a rebuild from scratch."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sagekernel.memory.lexical import WEIGHTS, LexicalIndex, tokenize
from sagekernel.memory.retrieval import query_terms

COLS = ("title", "error_message", "category", "type", "wrong_code", "correct_code")
WORDS = ["tile", "size", "tile_size", "Reduction", "loop", "out", "of", "bounds", "expf", "x",
         "_mm256_add_ps", "mm256", "float4", "2d", "café", "cafe", "__restrict__", "a.b", "a-b", "256x",
         "Tile", "SIZE", "__"]
text = st.lists(st.sampled_from(WORDS), max_size=8).map(lambda ws: " ".join(ws))
doc = st.tuples(*[text] * len(COLS))


def fts5(docs: list[tuple[str, ...]], query: str) -> dict[int, float]:
    conn = sqlite3.connect(":memory:")
    conn.execute(f"CREATE VIRTUAL TABLE f USING fts5({', '.join(COLS)}, tokenize='unicode61')")
    conn.executemany(f"INSERT INTO f(rowid, {', '.join(COLS)}) VALUES (?,?,?,?,?,?,?)",
                     [(i, *d) for i, d in enumerate(docs)])
    terms = query_terms(query)
    if not terms:
        return {}
    match = " OR ".join(f'"{t}"' for t in terms)
    w = ", ".join(str(x) for x in WEIGHTS)
    rows = conn.execute(f"SELECT rowid, -bm25(f, {w}) FROM f WHERE f MATCH ?", (match,)).fetchall()
    return {int(r): float(s) for r, s in rows}


def ours(index: LexicalIndex, query: str) -> dict[int, float]:
    docs, s = index.scores(query_terms(query))
    return dict(zip(docs.tolist(), s.tolist(), strict=True))


def test_tokenizer_matches_unicode61_on_code_text() -> None:
    assert tokenize("_mm256_add_ps(a.b, Tile-SIZE) café") == ["mm256", "add", "ps", "a", "b", "tile", "size",
                                                             "cafe"]


@settings(max_examples=150, deadline=None)
@given(st.lists(doc, min_size=1, max_size=12), text)
def test_scores_equal_fts5_bm25(docs: list[tuple[str, ...]], query: str) -> None:
    index = LexicalIndex()
    index.add_many(docs)
    want = fts5(docs, query)
    got = ours(index, query)
    assert set(got) == set(want)
    for d, s in want.items():
        assert got[d] == pytest.approx(s, rel=1e-9, abs=1e-12)


@settings(max_examples=100, deadline=None)
@given(st.lists(doc, min_size=1, max_size=30), st.integers(0, 30), st.lists(text, min_size=1, max_size=4))
def test_incremental_appends_equal_a_rebuild(docs: list[tuple[str, ...]], split: int,
                                             queries: list[str]) -> None:
    split = min(split, len(docs))
    grown = LexicalIndex()
    grown.add_many(docs[:split])
    for d in docs[split:]:
        grown.add(d)
    fresh = LexicalIndex()
    fresh.add_many(docs)
    for q in queries:
        a, b = ours(grown, q), ours(fresh, q)
        assert a.keys() == b.keys()
        assert all(a[k] == pytest.approx(b[k], rel=1e-12) for k in a)
        ta, tb = grown.top(query_terms(q), 3), fresh.top(query_terms(q), 3)
        assert ta[0].tolist() == tb[0].tolist()


def test_tail_merges_and_stays_exact() -> None:
    rng = np.random.default_rng(0)
    docs = [tuple(" ".join(rng.choice(WORDS, 5)) for _ in COLS) for _ in range(1500)]
    index = LexicalIndex()
    for d in docs:  # 1500 single appends cross the merge threshold several times
        index.add(d)
    fresh = LexicalIndex()
    fresh.add_many(docs)
    for q in ("tile_size loop", "expf bounds cafe", "mm256_add_ps 2d"):
        a, b = ours(index, q), ours(fresh, q)
        assert a.keys() == b.keys() and all(a[k] == pytest.approx(b[k], rel=1e-12) for k in a)
    assert ours(index, "tile_size") == pytest.approx(fts5(docs[:], "tile_size"), rel=1e-9)


def brute_top(index: LexicalIndex, terms: list[str], limit: int) -> tuple[list[int], list[float]]:
    """Every posting scored (`scores`), then best first, ties by smaller document number."""
    docs, s = index.scores(terms)
    order = np.lexsort((docs, -s))[:limit]
    return docs[order].tolist(), s[order].tolist()


# common words (in most documents) next to rare ones, and repeated documents (exact ties)
SKEWED = st.lists(st.sampled_from(["loop"] * 6 + ["tile"] * 3 + WORDS), max_size=8).map(" ".join)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(*[SKEWED] * len(COLS)), min_size=1, max_size=40), st.integers(0, 40),
       st.lists(SKEWED, min_size=1, max_size=3), st.integers(1, 12), st.integers(1, 3))
def test_pruned_top_equals_brute_force_top(docs: list[tuple[str, ...]], split: int, queries: list[str],
                                           limit: int, copies: int) -> None:
    """MaxScore `top` returns exactly the brute-force top: same documents, same scores bit for
    bit, same tie order, also with documents still in the unmerged tail."""
    docs = docs * copies
    index = LexicalIndex()
    index.add_many(docs[:split])
    for d in docs[split:]:
        index.add(d)
    for q in queries:
        terms = query_terms(q)
        got_d, got_s = index.top(terms, limit)
        assert (got_d.tolist(), got_s.tolist()) == brute_top(index, terms, limit)


def test_pruned_top_on_a_large_skewed_index() -> None:
    """Thousands of documents over Zipf-distributed words, queried with common, middling and
    rare words together: the pruning skips postings and drops candidates, and the answer is
    still the brute-force one."""
    rng = np.random.default_rng(7)
    vocab = [f"w{i}" for i in range(400)]
    p = 1.0 / np.arange(1, 401) ** 1.1
    p /= p.sum()
    docs = [tuple(" ".join(rng.choice(vocab, size=int(rng.integers(0, 4)), p=p)) for _ in COLS)
            for _ in range(4000)]
    index = LexicalIndex()
    index.add_many(docs[:3500])
    index.add_many(docs[3500:])  # a tail
    for _ in range(60):
        q = " ".join(rng.choice(vocab[:120], size=int(rng.integers(2, 9))))
        for limit in (1, 5, 60):
            got_d, got_s = index.top(query_terms(q), limit)
            assert (got_d.tolist(), got_s.tolist()) == brute_top(index, query_terms(q), limit)
