"""What the synthetic oracle saw and did in each stream of an `oracle-method` experiment
(docs/oracle.md): why the methods' ERs differ, read from the exchange log's ground truth.

    python3 benchmarks/oracle_profile.py experiments/oracle-method

Per stream: correctness rounds, the mean number of ids shown per round, of truly useful ids shown,
of truly useful and useless ids adopted, of memory tokens shown that did not help, the mean
P(correct) the generator drew against; the optimisation rounds from a slow variant, their truly
useful ids adopted (by the "faster" truth) and mean P(faster); the final resident rules and the
bank's items with u > 0. `--json` prints the same figures as one object.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
from pathlib import Path
from statistics import mean


def profile(workspace: Path) -> dict[str, float | int]:
    con = sqlite3.connect(f"file:{workspace / 'sage.db'}?mode=ro", uri=True)
    try:
        extras = [json.loads(e) for (e,) in con.execute("SELECT extra_json FROM exchanges")]
        episode = {(op, rnd): ep for op, rnd, ep in con.execute(
            "SELECT operator, round, episode FROM round_traces")}
        hot = con.execute("SELECT entries_json FROM hot_snapshots ORDER BY id DESC LIMIT 1").fetchone()
        positive = con.execute("SELECT count(*) FROM items WHERE u > 0").fetchone()[0]
    finally:
        con.close()
    corr = [e for e in extras if "p_correct" in e and episode.get((e["operator"], e["round"])) == "corr"]
    opt = [e for e in extras if e.get("p_faster", 0) > 0]  # optimisation rounds from a slow variant


    def avg(values: list[float]) -> float:
        return round(mean(values), 2) if values else 0.0

    return {
        "rounds": len(corr),
        "shown": avg([len(e["truth"]) for e in corr]),
        "useful_shown": avg([sum(t["useful"] for t in e["truth"].values()) for e in corr]),
        "useful_adopted": avg([e["useful_adopted"] for e in corr]),
        "useless_adopted": avg([e["useless_adopted"] for e in corr]),
        "padding_tokens": avg([e.get("padding_tokens", 0) for e in corr]),
        "p_correct": avg([e["p_correct"] for e in corr]),
        "opt_rounds": len(opt),
        "opt_useful_adopted": avg([e["useful_adopted"] for e in opt]),
        "p_faster": avg([e["p_faster"] for e in opt]),
        "resident": len(json.loads(hot[0])) if hot else 0,
        "u_positive": positive,
    }


def shown_items(workspace: Path) -> dict[tuple[str, int], frozenset[str]]:
    """(operator, round) -> the retrieved ids a correctness round showed (replays share ids)."""
    con = sqlite3.connect(f"file:{workspace / 'sage.db'}?mode=ro", uri=True)
    try:
        extras = [json.loads(e) for (e,) in con.execute("SELECT extra_json FROM exchanges")]
    finally:
        con.close()
    return {(e["operator"], e["round"]): frozenset(r for r in e["truth"] if r.startswith("E"))
            for e in extras if "p_correct" in e and "truth" in e}


def replay_overlap(streams: Path) -> list[dict[str, object]]:
    """Table 7: in how many shared correctness rounds each replayed bank retrieved a different set
    from relevance-only, and how many items it swapped in all."""
    rows: list[dict[str, object]] = []
    for relevance in sorted(streams.glob("replay-relevance-*")):
        label = relevance.name.removeprefix("replay-relevance-")
        base = shown_items(relevance)
        for variant in ("uniform", "atu"):
            other_ws = streams / f"replay-{variant}-{label}"
            if not (other_ws / "sage.db").exists():
                continue
            other = shown_items(other_ws)
            keys = set(base) & set(other)
            rows.append({"stream": f"replay-{variant}-{label}", "rounds": len(keys),
                         "differ": sum(base[k] != other[k] for k in keys),
                         "swapped": sum(len(base[k] ^ other[k]) // 2 for k in keys)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", type=Path,
                        help="a finished `sage experiment run oracle-method` directory")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = parser.parse_args()
    streams = {ws.name: profile(ws) for ws in sorted((args.directory / "streams").iterdir())
               if (ws / "sage.db").exists()}
    overlap = replay_overlap(args.directory / "streams")
    if args.json:
        print(json.dumps({"streams": streams, "replay_overlap": overlap}, indent=2))
        return
    keys = ["rounds", "shown", "useful_shown", "useful_adopted", "useless_adopted", "padding_tokens",
            "p_correct", "opt_rounds", "opt_useful_adopted", "p_faster", "resident", "u_positive"]
    print(f"{'stream':28} " + " ".join(f"{k:>10}" for k in keys))
    for name, row in streams.items():
        print(f"{name:28} " + " ".join(f"{row[k]!s:>10}" for k in keys))
    for r in overlap:
        print(f"{r['stream']}: {r['differ']} of {r['rounds']} rounds retrieve a different set "
              f"from relevance-only ({r['swapped']} items swapped)")
    print(f"\ncommand: python3 benchmarks/oracle_profile.py {args.directory}")


if __name__ == "__main__":
    main()
