"""Learners on many machines at once (issue 30): W learner processes applying episode updates to one
memory, PostgreSQL and SQLite side by side in one run, repeated; medians reported.

    python3 benchmarks/bench_shared_memory.py [--workers 8] [--updates 1000] [--repeats 3] [--json]

Each repeat, for each backend: a fresh memory (a throwaway PostgreSQL cluster on a unix socket,
memory/pgserver.py; a fresh SQLite workspace file) seeded with the CPU seed memory; W processes
(memory/learners.py) start together and apply `updates / W` deterministic episode updates each
(ATU credit to items that collide across learners, a new item every 4th episode, the UGC rebuild and
its snapshot), each update one transaction. Then the updates are replayed serially in the memory's
commit order into a fresh SQLite memory, and every item's utility, counters, state, p̂ and operators
are compared: `lost` counts items that differ (0: no update lost, none applied twice). Also: the
sum of n_upd against the number of credit rows, and updates/s (all updates / wall time of the
slowest learner, from the common start).
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing
import shutil
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from sagekernel import db  # noqa: E402
from sagekernel.memory.backend import connect_memory  # noqa: E402
from sagekernel.memory.io import load_seed  # noqa: E402
from sagekernel.memory.learners import (  # noqa: E402
    Workload,
    commit_order,
    fingerprint,
    learner,
    replay_serially,
)
from sagekernel.memory.pgserver import LocalPostgres  # noqa: E402
from sagekernel.memory.records import MemoryConfig  # noqa: E402
from sagekernel.memory.store import Store  # noqa: E402

SEED = ROOT / "src/sagekernel/targets/cpu/seed_memory.jsonl"
CFG = MemoryConfig(budget_tokens=60)  # small: the resident set churns


def _open_sqlite(path: str) -> Any:
    return db.connect(path, timeout_s=300)


def _learn(open_conn: Any, work: Workload, worker: int, episodes: int, start: Any, out: Any) -> None:
    learner(open_conn, work, worker, episodes, CFG, start)
    out.put((worker, time.perf_counter()))


def one(open_conn: Any, workers: int, updates: int, scratch: Path) -> dict[str, Any]:
    conn = open_conn()
    load_seed(conn, SEED)
    store = Store(conn)
    work = Workload(tuple(m.id for m in store.list_items(order="id")))
    ctx = multiprocessing.get_context("fork")
    start, out = ctx.Barrier(workers + 1), ctx.Queue()
    per = updates // workers
    procs = [ctx.Process(target=_learn, args=(open_conn, work, w, per, start, out)) for w in range(workers)]
    for p in procs:
        p.start()
    start.wait()
    t0 = time.perf_counter()
    ends = [out.get(timeout=1800)[1] for _ in procs]
    for p in procs:
        p.join()
    wall = max(ends) - t0
    order = commit_order(conn)
    serial = db.connect(scratch / f"serial-{time.monotonic_ns()}")
    load_seed(serial, SEED)
    replay_serially(serial, work, order, CFG)
    got, want = fingerprint(store.all_items()), fingerprint(Store(serial).all_items())
    lost = sum(got.get(h) != v for h, v in want.items()) + len(set(got) - set(want))
    credited = conn.execute("SELECT count(*) FROM item_history WHERE kind = 'credited'").fetchone()[0]
    n_upd = sum(m.n_upd for m in store.all_items())
    switches = sum(a[0] != b[0] for a, b in itertools.pairwise(order))
    serial.close()
    conn.close()
    return {"updates": len(order), "wall_s": wall, "updates_per_s": len(order) / wall, "lost": lost,
            "n_upd": n_upd, "credit_rows": credited, "interleavings": switches}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--updates", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="sage-bench-shared-"))
    pg_root = tempfile.mkdtemp(prefix="sagepg-")  # its own folder: as root, it is given to `postgres`
    server = LocalPostgres(pg_root)
    server.start()
    rows: dict[str, list[dict[str, Any]]] = {"postgres": [], "sqlite": []}
    try:
        for r in range(args.repeats):
            url = server.create_database(f"bench{r}")
            rows["postgres"].append(one(partial(connect_memory, url), args.workers, args.updates, root))
            rows["sqlite"].append(one(partial(_open_sqlite, str(root / f"sqlite{r}")), args.workers,
                                      args.updates, root))
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(pg_root, ignore_errors=True)
    summary = {name: {"median_updates_per_s": statistics.median(x["updates_per_s"] for x in xs),
                      "median_wall_s": statistics.median(x["wall_s"] for x in xs),
                      "lost_max": max(x["lost"] for x in xs),
                      "n_upd_equals_credit_rows": all(x["n_upd"] == x["credit_rows"] for x in xs),
                      "median_interleavings": statistics.median(x["interleavings"] for x in xs),
                      "runs": xs}
               for name, xs in rows.items()}
    if args.json:
        print(json.dumps({"workers": args.workers, "updates": args.updates, "repeats": args.repeats,
                          **summary}, indent=2))
        return
    print(f"{args.workers} learner processes x {args.updates // args.workers} updates, "
          f"{args.repeats} repeats (medians)")
    print(f"{'backend':<10}{'updates/s':>11}{'wall s':>9}{'lost':>6}{'n_upd==credits':>16}"
          f"{'interleavings':>15}")
    for name, s in summary.items():
        print(f"{name:<10}{s['median_updates_per_s']:>11.1f}{s['median_wall_s']:>9.2f}{s['lost_max']:>6}"
              f"{s['n_upd_equals_credit_rows']!s:>16}{s['median_interleavings']:>15.0f}")


if __name__ == "__main__":
    main()
