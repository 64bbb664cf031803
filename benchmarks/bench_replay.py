"""Prompt reading per round on the embedded model: one scripted conversation, two prompt layouts.

The conversation is tests/test_prompt_layout.py's scripted demo stream (abs, swish, rms_norm: a
compile error, a mismatch, a correct kernel, an optimisation round; a re-ask; distillation after
each episode), rendered by each source tree's own templates (`python tests/test_prompt_layout.py
FILE` under that tree). Both are replayed through the real model, each on its own loaded
instance (its own KV cache), alternating operator by operator so a shared machine's load falls
on both alike. Every call generates a single token: what is measured is prompt reading, the part
of a round the layout changes (the replies are the same text in both). A re-ask's conversation
holds the scripted reply, which a 1-token call did not generate, so it is read too (both layouts).

    python benchmarks/bench_replay.py --before OLD_TREE [--after .] [--ops abs,swish] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench_rounds import QUIET_WRITE_TPS  # a sibling script; this folder is on sys.path

from sagekernel.models import Message, ModelConfig
from sagekernel.models.local import LocalModel

HERE = Path(__file__).resolve().parents[1]


def conversation(tree: Path) -> list[dict[str, Any]]:
    """The scripted stream's calls as `tree`'s templates render them."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "calls.json"
        subprocess.run([sys.executable, str(HERE / "tests" / "test_prompt_layout.py"), str(out)],
                       env={**os.environ, "PYTHONPATH": str(tree / "src")}, cwd=tree, check=True,
                       capture_output=True, text=True)
        calls: list[dict[str, Any]] = json.loads(out.read_text())
    return calls


def replay(trees: dict[str, Path], ops: list[str], threads: int | None) -> dict[str, Any]:
    calls = {name: conversation(tree) for name, tree in trees.items()}
    models = {name: LocalModel(config=ModelConfig(n_ctx=8192, n_threads=threads)) for name in trees}
    for model in models.values():
        model.load()
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    load_start = os.getloadavg()[0]
    for op in ops:
        for name in trees:
            for n, call in enumerate(c for c in calls[name] if c["operator"] == op):
                messages = [Message(m["role"], m["content"]) for m in call["messages"]]
                reply = models[name].complete(messages, max_tokens=1, temperature=0.0, seed=0)
                row = {"operator": op, "call": n, "purpose": call["purpose"],
                       "prompt_tokens": reply.prompt_tokens, "cached_tokens": reply.cached_tokens or 0,
                       "computed_tokens": reply.prompt_tokens - (reply.cached_tokens or 0),
                       "read_s": round(reply.latency_s, 2), "reply_tokens_est": len(call["reply"]) // 4,
                       "prompt_tokens_per_s": reply.extra.get("prompt_tokens_per_s")}
                rows[name].append(row)
                print(f"  {name:7s} {op:9s} {call['purpose']:8s} prompt {row['prompt_tokens']:5d} cached "
                      f"{row['cached_tokens']:5d} {row['read_s']:6.1f}s", file=sys.stderr, flush=True)
    for model in models.values():
        model.close()
    return {"command": "python " + " ".join(shlex.quote(a) for a in sys.argv), "ops": ops,
            "threads": threads, "cpus": len(os.sched_getaffinity(0)),
            "loadavg_1m": [round(load_start, 2), round(os.getloadavg()[0], 2)],
            "variants": {name: summary(r) for name, r in rows.items()}, "calls": rows}


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per round: its call and re-asks (distillation calls are counted apart)."""
    rounds: list[dict[str, Any]] = []
    for r in rows:
        if r["purpose"] == "round":
            rounds.append({"prompt_tokens": 0, "cached_tokens": 0, "computed_tokens": 0, "read_s": 0.0,
                           "reply_tokens_est": 0})
        if r["purpose"] in ("round", "reask") and rounds:
            for key in ("prompt_tokens", "cached_tokens", "computed_tokens", "read_s", "reply_tokens_est"):
                rounds[-1][key] += r[key]
    for r in rounds:
        # the scripted reply's length at bench_rounds' quiet-machine generation speed
        r["quiet_round_s"] = r["read_s"] + r["reply_tokens_est"] / QUIET_WRITE_TPS
    distill = [r for r in rows if r["purpose"] == "distill"]
    prompt = sum(r["prompt_tokens"] for r in rows)

    def med(key: str) -> float:
        return round(statistics.median(r[key] for r in rounds), 1)

    return {"rounds": len(rounds), "median_round_prompt_tokens": med("prompt_tokens"),
            "median_round_computed_tokens": med("computed_tokens"), "median_round_read_s": med("read_s"),
            "total_read_s": round(sum(r["read_s"] for r in rows), 1),
            "distill_read_s": round(sum(r["read_s"] for r in distill), 1),
            "cached_share": round(sum(r["cached_tokens"] for r in rows) / prompt, 3) if prompt else None,
            "median_prompt_tokens_per_s": round(statistics.median(
                r["prompt_tokens_per_s"] for r in rows if r["prompt_tokens_per_s"]), 1),
            "per_round": rounds}


def print_table(result: dict[str, Any]) -> None:
    print(f"$ {result['command']}")
    print(f"operators {', '.join(result['ops'])}; {result['cpus']} usable cores, threads "
          f"{result['threads'] or 'all'}; 1-min load average {result['loadavg_1m'][0]} before, "
          f"{result['loadavg_1m'][1]} after (a shared machine)")
    head = (f"{'variant':8s} {'operator':9s} {'call':>4s} {'purpose':8s} {'prompt tok':>10s} {'cached':>7s} "
            f"{'computed':>8s} {'read s':>7s}")
    print(head)
    print("-" * len(head))
    for name, rows in result["calls"].items():
        for r in rows:
            print(f"{name:8s} {r['operator']:9s} {r['call']:4d} {r['purpose']:8s} {r['prompt_tokens']:10d} "
                  f"{r['cached_tokens']:7d} {r['computed_tokens']:8d} {r['read_s']:7.1f}")
    print()
    head = (f"{'variant':8s} {'rounds':>6s} {'med prompt tok/round':>20s} {'med computed tok/round':>22s} "
            f"{'cached share':>12s} {'med read s/round':>16s} {'all reading s':>13s} {'prompt tok/s':>12s}")
    print(head)
    print("-" * len(head))
    for name, s in result["variants"].items():
        print(f"{name:8s} {s['rounds']:6d} {s['median_round_prompt_tokens']:20.0f} "
              f"{s['median_round_computed_tokens']:22.0f} {s['cached_share']:12.1%} "
              f"{s['median_round_read_s']:16.1f} {s['total_read_s']:13.1f} "
              f"{s['median_prompt_tokens_per_s']:12.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="the baseline source tree (has src/)")
    parser.add_argument("--after", type=Path, default=HERE, help="the tree under test (default: this one)")
    parser.add_argument("--ops", default="abs,swish,rms_norm")
    parser.add_argument("--threads", type=int, default=None, help="default: all usable cores")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args()
    result = replay({"before": args.before.resolve(), "after": args.after.resolve()}, args.ops.split(","),
                    args.threads)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_table(result)


if __name__ == "__main__":
    main()
