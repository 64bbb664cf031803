"""Retrieval (spec §3): Property 3, γ = 0 order, filters, lexical fallback, dense hybrid."""

from __future__ import annotations

import logging
import sqlite3
from importlib import resources

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sagekernel import db
from sagekernel.memory import embedding
from sagekernel.memory.records import Item, MemoryConfig
from sagekernel.memory.retrieval import Candidate, RetrievalIndex, rerank
from sagekernel.memory.store import Store

CFG = MemoryConfig()
MIGRATION = resources.files("sagekernel.migrations").joinpath("0001_memory.sql").read_text()

cands = st.lists(st.tuples(st.floats(0.0, 1.0), st.floats(-CFG.q, 1.0)), min_size=2, max_size=30)


@given(cands, st.floats(0.0, 1.0))
def test_p3_large_relevance_lead_is_never_overturned(spec: list[tuple[float, float]], gamma: float) -> None:
    pool = [Candidate(i, rel, u) for i, (rel, u) in enumerate(spec)]
    order = [r.candidate for r in rerank(pool, gamma, len(pool))]
    rank = {c.item_id: n for n, c in enumerate(order)}
    for a in pool:
        for b in pool:
            if a.relevance - b.relevance > gamma * (1 + CFG.q) + 1e-12:
                assert rank[a.item_id] < rank[b.item_id]


@given(cands)
def test_gamma_zero_is_exactly_relevance_order(spec: list[tuple[float, float]]) -> None:
    pool = [Candidate(i, rel, u) for i, (rel, u) in enumerate(spec)]
    got = [r.candidate.item_id for r in rerank(pool, 0.0, 5)]
    want = [c.item_id for c in sorted(pool, key=lambda c: (-c.relevance, c.item_id))][:5]
    assert got == want


def test_utility_reorders_items_of_comparable_relevance() -> None:
    pool = [Candidate(1, 0.80, -0.2), Candidate(2, 0.78, 0.5)]
    assert [r.candidate.item_id for r in rerank(pool, 0.3, 2)] == [2, 1]
    assert [r.candidate.item_id for r in rerank(pool, 0.0, 2)] == [1, 2]


def _store(workspace) -> Store:  # type: ignore[no-untyped-def]
    store = Store(db.connect(workspace))
    texts = [("Reduce with a tree of partial sums", "reduction", "slow serial reduction over the row"),
             ("Vectorise elementwise loops with restrict pointers", "elementwise", "loop not vectorised"),
             ("Tile matmul loops for cache reuse", "matmul", "cache misses in matmul inner loop"),
             ("Guard the tail of a reduction loop", "reduction", "out of bounds read in reduction tail"),
             ("Use expf for float math", "elementwise", "implicit declaration of expf")]
    with db.transaction(store.conn):
        for title, cat, err in texts:
            store.insert_item(Item(id=0, title=title, type="fix" if "Guard" in title else "performance",
                                   category=cat, error_message=err, wrong_code="", correct_code=""))
    return store


def test_lexical_only_pool_filters_and_warns(workspace, monkeypatch, caplog) -> None:  # type: ignore[no-untyped-def]
    store = _store(workspace)
    monkeypatch.setenv("SAGE_NO_EMBED", "1")
    monkeypatch.setattr(embedding, "_warned", set())
    with caplog.at_level(logging.WARNING, logger="sagekernel.memory"):
        assert embedding.default_embedder() is None
        assert embedding.default_embedder() is None
    assert sum("lexical BM25 only" in r.message for r in caplog.records) == 1  # said once
    index = RetrievalIndex(store, None)
    pool = index.pool("reduction tail out of bounds", None, size=3)
    assert [c.item_id for c in pool][:2] == [4, 1]
    assert pool[0].relevance == 1.0 and all(0 <= c.relevance <= 1 for c in pool)
    store.conn.execute("UPDATE items SET state = 'consolidated' WHERE id = 4")
    index.reload()
    assert 4 not in [c.item_id for c in index.pool("reduction tail out of bounds", None, size=5)]
    assert index.pool("zzz qqq", None, size=5) == []


@pytest.mark.skipif(embedding.model_path() is None, reason="embedding model not installed")
def test_dense_hybrid_finds_paraphrase_without_shared_words(workspace) -> None:  # type: ignore[no-untyped-def]
    store = _store(workspace)
    emb = embedding.default_embedder()
    assert emb is not None
    with db.transaction(store.conn):
        for m in store.all_items():
            store.set_embedding(m.id, emb.name, emb.encode_one(m.text()))
    index = RetrievalIndex(store, emb)
    text = "summing all values of a vector takes ages"
    pool = index.pool(text, index.embed_query(text), size=5)
    assert pool and pool[0].item_id == 1  # no shared word with "Reduce with a tree of partial sums"
    lexical = RetrievalIndex(store, None).pool(text, None, size=5)
    assert 1 not in [c.item_id for c in lexical[:1]]


def test_approximate_dense_scoring_matches_exact_top_on_clustered_data(workspace) -> None:  # type: ignore[no-untyped-def]
    import numpy as np

    class FakeDim:  # only .dim and .name are read for scoring when vectors are injected
        name, dim = "test", 32

    store = Store(db.connect(workspace))
    rng = np.random.default_rng(0)
    centers = rng.normal(size=(20, 32))
    vecs = centers[rng.integers(0, 20, 3000)] + 0.3 * rng.normal(size=(3000, 32))
    vecs = (vecs / np.linalg.norm(vecs, axis=1, keepdims=True)).astype(np.float32)
    with db.transaction(store.conn):
        for i, v in enumerate(vecs):
            new = store.insert_item(Item(id=0, title=f"t{i}", type="x", category="", error_message="",
                                         wrong_code="", correct_code=""))
            store.set_embedding(new, "test", v)
    exact = RetrievalIndex(store, FakeDim(), approx_above=10**9)  # type: ignore[arg-type]
    approx = RetrievalIndex(store, FakeDim(), approx_above=100, approx_dim=16)  # type: ignore[arg-type]
    q = vecs[17]
    a = {c.item_id for c in exact.pool("", q, size=15)}
    b = {c.item_id for c in approx.pool("", q, size=15)}
    assert len(a & b) >= 13  # recall@15 of the PCA prefilter


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 150), st.integers(4, 24))  # > 100 appended: regrouped
def test_projected_search_is_exact_when_certified_and_after_appends(seed: int, n_add: int,
                                                                    dim_p: int) -> None:
    """The cosine upper bound of the PCA prefilter: a search reported exact equals the brute
    force top (also after `add` appends rows to the projection), and dedup (`any_similar`) is
    always exact."""
    import numpy as np

    class FakeDim:
        name, dim = "test", 32

    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(8, 32))
    noise = rng.uniform(0.1, 1.0) * rng.normal(size=(400 + n_add, 32))
    vecs = centers[rng.integers(0, 8, 400 + n_add)] + noise
    vecs = (vecs / np.linalg.norm(vecs, axis=1, keepdims=True)).astype(np.float32)
    conn = sqlite3.connect(":memory:")
    conn.executescript(MIGRATION)
    store = Store(conn)

    def put(i: int) -> Item:
        item = Item(id=0, title=f"t{i}", type="x", category="", error_message="", wrong_code="",
                    correct_code="")
        item.id = store.insert_item(item)
        store.set_embedding(item.id, "test", vecs[i])
        return item

    for i in range(400):
        put(i)
    index = RetrievalIndex(store, FakeDim(), approx_above=100, approx_dim=dim_p)  # type: ignore[arg-type]
    for i in range(400, 400 + n_add):
        index.add(put(i), vecs[i])
    index.state[rng.integers(0, len(index), 20)] = 2  # some consolidated rows
    mask = index.eligible_mask() & index.has_emb
    for q in (vecs[3], vecs[-1], centers[0] / np.linalg.norm(centers[0])):
        q = q.astype(np.float32)
        got = index._dense_top(q, mask, 15)
        full = vecs @ q
        full[~mask] = -np.inf
        if index.last_exact:
            assert sorted(full[got].tolist()) == pytest.approx(sorted(np.sort(full)[-15:].tolist()), abs=1e-6)
        for thr in (0.5, 0.9, float(full.max()) - 1e-5, float(full[mask].max()) + 1e-3):
            assert index.any_similar(q, thr) == bool((vecs @ q).max() >= thr)
