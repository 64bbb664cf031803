"""Cluster bounds for the dense search above `approx_above` rows (retrieval.py `_dense_top`).

Ranking every row by its 64-d projection still reads n·64 floats per query (~17 ms of memory
traffic at 10^6 rows). Here the rows are grouped into √n clusters, each with a centre c (in the
full embedding space) and its exact radius ρ = max |e − c| over its members, so for every member

  cos(q, e) = q·c + q·(e − c) ≤ q·c + |q|·ρ          (Cauchy–Schwarz)

and a cluster whose bound is below θ — a cosine `size` eligible rows already reach — holds no row
of the top `size`. Only the rows of the other clusters are scored, exactly. The grouping (k-means
on a sample in the projected space, every row assigned to its nearest projected centre) only
decides which rows share a bound: the bound holds for any grouping, so the result is exact.
Rows appended after the grouping (`n_rows` on) are scored on every query; when the surviving
clusters hold more than `_MAX_SHARE` of the rows (isotropic vectors: no cluster is far from
the query), `candidates` returns None and the caller falls back to the projected scan.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

SLACK = 1e-4  # float32 rounding of the centre score
_MAX_SHARE = 16  # at most n/16 rows scored exactly, else the caller's projected scan is cheaper
_CLUSTERS_PER_ROOT = 4.0  # more clusters than a corpus has topics, so few merge two
_ASSIGN_DIMS = 24  # leading projected dimensions used to place every row (the far ones: all)
_KMEANS_ITERS = 6
_FAR = 1.25  # rows farther than this × the median distance are placed in the embedding space
_SAMPLE_PER_CLUSTER = 8
_CHUNK = 32768


@dataclass(frozen=True)
class Clusters:
    n_rows: int  # rows [0, n_rows) are grouped; rows appended later are scored on every query
    centres: np.ndarray  # C×dim float32, in the embedding space
    ptr: np.ndarray  # C+1: the members of cluster g are members[ptr[g]:ptr[g+1]]
    members: np.ndarray  # row positions grouped by cluster
    radius: np.ndarray  # C: max |e − centre| over the members (0 when empty)


def _nearest(rows: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """The nearest centre of every row (argmax of p·c − |c|²/2)."""
    half = 0.5 * np.einsum("ij,ij->i", centres, centres)
    return np.argmax(rows @ centres.T - half, axis=1)


def build(emb: np.ndarray, proj: np.ndarray, *, seed: int = 0) -> Clusters:
    """k-means (a few Lloyd steps on a sample of the projected rows), every row assigned to its
    nearest projected centre; each cluster's centre is the mean of its sampled members in the
    embedding space and its radius is measured over all its members."""
    n = len(proj)
    k = max(1, min(n, round(_CLUSTERS_PER_ROOT * math.sqrt(n))))
    rng = np.random.default_rng(seed)
    pick = np.sort(rng.choice(n, size=min(n, _SAMPLE_PER_CLUSTER * k), replace=False))
    sample = proj[pick]
    cp = sample[rng.choice(len(sample), size=k, replace=False)].copy()
    for _ in range(_KMEANS_ITERS):
        label = _nearest(sample, cp)
        cp = _means(sample, label, k, cp)
    label = _nearest(sample, cp)
    full = emb[pick].astype(np.float64)
    centres = _means(full, label, k, np.zeros((k, emb.shape[1]))).astype(np.float32)
    label = np.empty(n, dtype=np.int64)
    dist = np.empty(n)
    c64 = centres.astype(np.float64)
    lead = np.ascontiguousarray(cp[:, :_ASSIGN_DIMS])
    for lo in range(0, n, _CHUNK):  # chunked: no n×k or n×dim float64 temporary
        label[lo:lo + _CHUNK] = _nearest(proj[lo:lo + _CHUNK, :_ASSIGN_DIMS], lead)
        diff = emb[lo:lo + _CHUNK].astype(np.float64) - c64[label[lo:lo + _CHUNK]]
        dist[lo:lo + _CHUNK] = np.sqrt(np.einsum("ij,ij->i", diff, diff))
    # a row its projection placed badly would widen its cluster's radius: re-place the far ones
    # by their nearest centre in the embedding space
    far = np.flatnonzero(dist > _FAR * np.median(dist))
    for lo in range(0, len(far), _CHUNK // 8):
        rows = far[lo:lo + _CHUNK // 8]
        label[rows] = _nearest(emb[rows], centres)
        diff = emb[rows].astype(np.float64) - c64[label[rows]]
        dist[rows] = np.sqrt(np.einsum("ij,ij->i", diff, diff))
    members = np.argsort(label, kind="stable")
    ptr = np.zeros(k + 1, dtype=np.int64)
    np.cumsum(np.bincount(label, minlength=k), out=ptr[1:])
    radius = np.zeros(k)
    nz = np.flatnonzero(np.diff(ptr) > 0)
    if len(nz):
        radius[nz] = np.maximum.reduceat(dist[members], ptr[:-1][nz])
    return Clusters(n, centres, ptr, members, radius)


def _means(rows: np.ndarray, label: np.ndarray, k: int, old: np.ndarray) -> np.ndarray:
    """Each group's mean (the old centre where a group is empty)."""
    count = np.bincount(label, minlength=k)
    sums = np.zeros((k, rows.shape[1]))
    np.add.at(sums, label, rows)
    out = old.astype(np.float64, copy=True)
    ok = count > 0
    out[ok] = sums[ok] / count[ok, None]
    return out.astype(old.dtype)


def candidates(cl: Clusters, emb: np.ndarray, q: np.ndarray, mask: np.ndarray, size: int,
               max_share: int = _MAX_SHARE) -> tuple[np.ndarray, np.ndarray] | None:
    """(rows, exact cosines) of every eligible row in a cluster whose bound reaches the
    `size`-th best cosine (a superset of the exact top `size`), or None when the bounds leave
    more than 1/`max_share` of the rows."""
    n = len(emb)
    ub = cl.centres @ q + (float(np.linalg.norm(q)) * cl.radius + SLACK)
    by_ub = np.argsort(-ub)
    sizes = np.diff(cl.ptr)[by_ub]
    first = int(np.searchsorted(np.cumsum(sizes), 20 * size)) + 1  # the best clusters seed θ
    seed = _rows(cl, by_ub[:first])
    seed = seed[mask[seed]]
    if len(seed) < size:
        return None
    exact = emb[seed] @ q
    theta = float(np.partition(exact, len(exact) - size)[len(exact) - size])
    live = by_ub[: int(np.count_nonzero(ub[by_ub] >= theta))]  # ub is descending along by_ub
    if int(sizes[: len(live)].sum()) + (n - cl.n_rows) > n // max_share:
        return None
    rows = np.concatenate([_rows(cl, live), np.arange(cl.n_rows, n)])
    rows = rows[mask[rows]]
    return rows, emb[rows] @ q


def _rows(cl: Clusters, groups: np.ndarray) -> np.ndarray:
    if not len(groups):
        return np.zeros(0, dtype=np.int64)
    return np.concatenate([cl.members[cl.ptr[g]:cl.ptr[g + 1]] for g in groups.tolist()])
