"""How far can utility reranking (s = rel + γ·u, spec §3) reorder a retrieval pool, with BM25 alone
and with the system's hybrid relevance (dense all-MiniLM-L6-v2 + BM25)? On a finished stream's
bank, for each built-in operator's query: the relevance range of the top-15 pool, and how many of
pool items 6..15 lie within γ(1 + q) = 0.36 of the fifth (only those can be reranked into the top 5).

    python3 benchmarks/oracle_relevance_spread.py DIR/streams/sage-s1/sage.db [--json]

The bank is copied first (embeddings are added to the copy, never to the stream's own file).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import tempfile
from pathlib import Path
from statistics import mean, median

from sagekernel import db
from sagekernel.memory.embedding import default_embedder
from sagekernel.memory.retrieval import RetrievalIndex
from sagekernel.memory.store import Store
from sagekernel.tasks.suites import load_suite

REACH = 0.3 * (1 + 0.2)  # γ(1 + q), spec §3 Property 3


def spread(bank: Path) -> dict[str, dict[str, float]]:
    embedder = default_embedder()
    if embedder is None:
        raise SystemExit("the dense embedder is not installed (bash scripts/setup.sh --dev)")
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "sage.db"
        src = sqlite3.connect(f"file:{bank}?mode=ro", uri=True)
        dst = sqlite3.connect(copy)
        src.backup(dst)
        src.close()
        dst.row_factory = sqlite3.Row
        store = Store(dst)
        missing = store.missing_embeddings(embedder.name)
        with db.transaction(dst):
            for item, vec in zip(missing, embedder.encode([m.text() for m in missing]), strict=True):
                store.set_embedding(item.id, embedder.name, vec)
        out = {}
        for name, used in (("bm25", None), ("hybrid", embedder)):
            index = RetrievalIndex(store, used)
            ranges, reachable = [], []
            for task in load_suite("builtin"):
                query = f"{task.name} ({task.category}): {task.description}"
                rel = [c.relevance for c in index.pool(query, index.embed_query(query), size=15)]
                if len(rel) >= 6:
                    ranges.append(rel[0] - rel[-1])
                    reachable.append(sum(1 for r in rel[5:] if rel[4] - r <= REACH))
            out[name] = {"queries": len(ranges), "median_range": round(median(ranges), 3),
                         "mean_reachable_of_10": round(mean(reachable), 1)}
        dst.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bank", type=Path, help="a stream's sage.db")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = parser.parse_args()
    result = spread(args.bank)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"{'relevance':10} {'queries':>8} {'pool range (median)':>20} {'items 6..15 within reach':>25}")
    for name, row in result.items():
        print(f"{name:10} {row['queries']:>8} {row['median_range']:>20} {row['mean_reachable_of_10']:>25}")
    print(f"\ncommand: python3 benchmarks/oracle_relevance_spread.py {args.bank}")


if __name__ == "__main__":
    main()
