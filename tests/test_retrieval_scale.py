"""The retrieval-scale benchmark's measurement (benchmarks/bench_retrieval_scale.py) on a small
seeded store: its brute-force truth agrees with the exact index, and the projected (PCA + bound)
dense search the index uses above `approx_above` rows keeps recall ≥ 0.99 against it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_retrieval_scale",
                                                  ROOT / "benchmarks/bench_retrieval_scale.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_truth_equals_the_exact_index(bench: ModuleType, tmp_path: Path) -> None:
    conn = bench.fill_sqlite(tmp_path / "ws", 2000, seed=3, spread=0.35)
    row = bench.measure(conn, 15, 3, 0.35, 5, 15, 0.5, approx_above=10**9)
    conn.close()
    assert not row["projected"] and row["items"] == 2000
    assert row["recall_at_15"] == 1.0 and row["recall_at_5"] == 1.0 and row["exact_share"] == 1.0


@pytest.mark.parametrize("spread", [0.35, 3.0])  # clustered like real embeddings; nearly isotropic
def test_projected_search_recall(bench: ModuleType, tmp_path: Path, spread: float) -> None:
    conn = bench.fill_sqlite(tmp_path / "ws", 2000, seed=5, spread=spread)
    row = bench.measure(conn, 20, 5, spread, 5, 15, 0.5, approx_above=500)
    conn.close()
    assert row["projected"]
    assert row["recall_at_15"] >= 0.99 and row["recall_at_5"] >= 0.99
