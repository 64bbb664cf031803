"""The cluster bounds of the dense search (memory/dense_clusters.py): whatever the grouping, the
rows `candidates` returns hold every eligible row whose cosine reaches the `size`-th best, with
their exact cosines, so the top `size` taken from them is the brute-force top."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sagekernel.memory import dense_clusters


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 30), st.floats(0.05, 2.0), st.integers(0, 300),
       st.integers(1, 20))
def test_candidates_hold_the_exact_top(seed: int, topics: int, spread: float, appended: int,
                                       size: int) -> None:
    rng = np.random.default_rng(seed)
    dim = 24
    centres = rng.normal(size=(topics, dim))
    n = 1500 + appended
    emb = _unit(centres[rng.integers(0, topics, n)] + spread * rng.normal(size=(n, dim)))
    basis = np.linalg.qr(rng.normal(size=(dim, 8)))[0].astype(np.float32)  # any orthonormal basis
    clusters = dense_clusters.build(emb[:1500], emb[:1500] @ basis, seed=seed % 7)
    mask = rng.random(len(emb)) > 0.1
    for q in (emb[0], emb[-1], _unit(rng.normal(size=(1, dim)))[0], _unit(centres[:1])[0]):
        found = dense_clusters.candidates(clusters, emb, q, mask, size, max_share=1)  # never give up
        if found is None:  # fewer than `size` eligible rows in the seed clusters
            assert np.count_nonzero(mask) < 20 * size
            continue
        rows, cos = found
        assert mask[rows].all() and len(np.unique(rows)) == len(rows)
        assert np.array_equal(cos, emb[rows] @ q)
        full = np.where(mask, emb @ q, -np.inf)
        kth = np.sort(full)[-size]
        assert set(np.flatnonzero(full >= kth).tolist()) <= set(rows.tolist())


def test_clustered_rows_are_mostly_skipped() -> None:
    """On clustered vectors the bounds leave a small share of the rows (the point of it)."""
    rng = np.random.default_rng(1)
    centres = rng.normal(size=(64, 48))
    emb = _unit(centres[rng.integers(0, 64, 20000)] + 0.3 * rng.normal(size=(20000, 48)))
    basis = np.linalg.qr(rng.normal(size=(48, 16)))[0].astype(np.float32)
    clusters = dense_clusters.build(emb, emb @ basis)
    found = dense_clusters.candidates(clusters, emb, emb[5], np.ones(len(emb), dtype=bool), 15)
    assert found is not None and len(found[0]) < len(emb) // 16
