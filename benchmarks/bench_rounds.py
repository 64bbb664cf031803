"""What one agent round costs on the embedded model, for two source trees side by side (A/B).

Runs the demo stream (abs, swish, rms_norm) with `sage run --model local` once per source tree
("before": e.g. an export of main's prompt layout; "after": this tree), alternating operator by
operator (A op1, B op1, A op2, B op2, ...) so that the load of a shared machine falls on both
alike. Each variant keeps its own workspace across its operators, so memory learned on one
operator reaches the next as in a real stream; each `sage run` is a fresh process (the model is
loaded again and starts with an empty KV cache: a stream run in one process would also reuse
the target's knowledge prefix across operators, which this does not count).

Per round it reads the workspace's exchange log and round traces: prompt tokens (round call +
re-asks), cached tokens (the `cached_tokens` column, or `extra.prompt_reused_tokens` in a log
older than migration 0006), completion tokens, model seconds, and round seconds (from the first
call's start to the round's recorded trace: prompt reading, generation, re-asks and the
harness's evaluation).

    python benchmarks/bench_rounds.py --before /tmp/base/src --after src [--budget 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

DEMO = ("level1/abs.py", "level2/swish.py", "level2/rms_norm.py")


def suite_root(src: Path) -> Path:
    return src / "sagekernel" / "tasks" / "suite"


def run_operator(src: Path, task_file: Path, workspace: Path, budget: int,
                 extra: list[str]) -> dict[str, Any]:
    """One `sage run` of a one-operator suite with the sources under `src`."""
    with tempfile.TemporaryDirectory() as tmp:
        suite = Path(tmp) / task_file.parent.name
        suite.mkdir()
        shutil.copy(task_file, suite / task_file.name)
        cmd = [sys.executable, "-c", "from sagekernel.cli import main; main()", "run", "--suite", str(suite),
               "--workspace", str(workspace), "--model", "local", "--budget", str(budget), "--no-progress",
               "--json", "--embedder", "none", *extra]
        env = {**os.environ, "PYTHONPATH": str(src)}
        started = time.perf_counter()
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"sage run failed ({done.returncode}) for {task_file.name} with {src}:\n"
                         f"{done.stderr[-3000:]}")
    return {"wall_s": round(wall, 1), "loadavg_1m": round(os.getloadavg()[0], 2)}


def _ts(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def rounds_of(workspace: Path) -> list[dict[str, Any]]:
    """One row per agent round in the workspace, in order."""
    conn = sqlite3.connect(f"file:{workspace / 'sage.db'}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    columns = {r[1] for r in conn.execute("PRAGMA table_info(exchanges)")}
    cached_col = "cached_tokens" if "cached_tokens" in columns else "NULL"
    calls = conn.execute(
        f"SELECT operator, round, tags_json, prompt_tokens, completion_tokens, latency_s, created_at, "
        f"{cached_col} AS cached, extra_json FROM exchanges WHERE status = 'ok' AND round IS NOT NULL "
        "ORDER BY id").fetchall()
    traces = {(r["operator"], r["round"]): r["created_at"]
              for r in conn.execute("SELECT operator, round, created_at FROM round_traces")}
    rows: dict[tuple[str, int], dict[str, Any]] = {}
    for c in calls:
        purpose = str(json.loads(c["tags_json"]).get("purpose", ""))
        if purpose != "round" and not purpose.startswith("reask"):
            continue
        extra = json.loads(c["extra_json"])
        cached = c["cached"] if c["cached"] is not None else extra.get("prompt_reused_tokens")
        row = rows.setdefault((c["operator"], c["round"]), {
            "operator": c["operator"], "round": c["round"], "calls": 0, "prompt_tokens": 0,
            "first_prompt_tokens": c["prompt_tokens"], "cached_tokens": 0, "computed_tokens": 0,
            "completion_tokens": 0, "model_s": 0.0,
            "start": _ts(c["created_at"]) - float(c["latency_s"] or 0)})
        if extra.get("tokens_per_s"):
            row.setdefault("write_tps", []).append(float(extra["tokens_per_s"]))
        if extra.get("prompt_tokens_per_s") and (extra.get("prompt_eval_tokens") or 0) >= 100:
            row.setdefault("read_tps", []).append(float(extra["prompt_tokens_per_s"]))
        row["calls"] += 1
        row["prompt_tokens"] += c["prompt_tokens"] or 0
        row["cached_tokens"] += cached or 0
        row["computed_tokens"] += (c["prompt_tokens"] or 0) - (cached or 0)
        row["completion_tokens"] += c["completion_tokens"] or 0
        row["model_s"] += float(c["latency_s"] or 0)
    out = []
    for key, row in rows.items():
        end = traces.get(key)
        row["round_s"] = round(_ts(end) - row.pop("start"), 2) if end else None
        row["model_s"] = round(row["model_s"], 2)
        out.append(row)
    return out


#: Prompt reading and generation speeds of the embedded model on a quiet 2-core machine (issue 15:
#: about 60 tokens/s read, 18-30 written), for the `quiet_model_s` projection of a round's model time.
QUIET_READ_TPS = 60.0
QUIET_WRITE_TPS = 24.0


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    for r in rows:
        quiet = r["computed_tokens"] / QUIET_READ_TPS + r["completion_tokens"] / QUIET_WRITE_TPS
        r["quiet_model_s"] = round(quiet, 1)

    def med(key: str) -> float | None:
        values = [r[key] for r in rows if r[key] is not None]
        return round(statistics.median(values), 1) if values else None

    prompt = sum(r["prompt_tokens"] for r in rows)

    def speed(key: str) -> float | None:  # this machine's llama.cpp speeds, from the exchange log
        values = [v for r in rows for v in r.get(key, [])]
        return round(statistics.median(values), 1) if values else None

    return {"rounds": len(rows), "median_round_s": med("round_s"), "median_model_s": med("model_s"),
            "median_write_tps": speed("write_tps"), "median_read_tps": speed("read_tps"),
            "calls": sum(r["calls"] for r in rows),
            "median_quiet_model_s": med("quiet_model_s"),
            "median_first_prompt_tokens": med("first_prompt_tokens"),
            "median_prompt_tokens": med("prompt_tokens"), "median_computed_tokens": med("computed_tokens"),
            "median_completion_tokens": med("completion_tokens"),
            "cached_share": round(sum(r["cached_tokens"] for r in rows) / prompt, 3) if prompt else None,
            "mean_round_s": round(statistics.fmean(r["round_s"] for r in rows if r["round_s"] is not None), 1)
            if any(r["round_s"] is not None for r in rows) else None}


def bench(variants: dict[str, Path], budget: int, ops: list[str], extra: list[str],
          keep: Path | None) -> dict[str, Any]:
    root = keep or Path(tempfile.mkdtemp(prefix="bench_rounds_"))
    workspaces = {name: root / f"ws_{name}" for name in variants}
    for ws in workspaces.values():
        if ws.exists():
            shutil.rmtree(ws)
    runs: list[dict[str, Any]] = []
    started = os.getloadavg()[0]
    for op in ops:
        for name, src in variants.items():
            task = suite_root(src) / op
            info = run_operator(src, task, workspaces[name], budget, extra)
            runs.append({"variant": name, "operator": Path(op).stem, **info})
            print(f"  {name:7s} {Path(op).stem:10s} {info['wall_s']:7.1f}s (load {info['loadavg_1m']})",
                  file=sys.stderr, flush=True)
    per_round = {name: rounds_of(ws) for name, ws in workspaces.items()}
    return {"command": "python " + " ".join(shlex.quote(a) for a in sys.argv), "budget": budget,
            "operators": [Path(o).stem for o in ops], "cpus": len(os.sched_getaffinity(0)),
            "loadavg_1m_start": round(started, 2), "loadavg_1m_end": round(os.getloadavg()[0], 2),
            "variants": {name: {"src": str(src), **summary(per_round[name])}
                         for name, src in variants.items()},
            "runs": runs, "rounds": per_round, "workspaces": {k: str(v) for k, v in workspaces.items()}}


def print_table(result: dict[str, Any]) -> None:
    print(f"$ {result['command']}")
    print(f"demo stream {', '.join(result['operators'])}, budget {result['budget']}, embedded local model; "
          f"{result['cpus']} usable cores, 1-min load average {result['loadavg_1m_start']} at the start, "
          f"{result['loadavg_1m_end']} at the end")
    head = (f"{'variant':8s} {'operator':10s} {'round':>5s} {'calls':>5s} {'prompt tok':>10s} {'cached':>7s} "
            f"{'computed':>8s} {'reply tok':>9s} {'model s':>8s} {'round s':>8s}")
    head += f" {'quiet s':>7s}"
    print(head)
    print("-" * len(head))
    for name, rows in result["rounds"].items():
        for r in rows:
            print(f"{name:8s} {r['operator']:10s} {r['round']:5d} {r['calls']:5d} {r['prompt_tokens']:10d} "
                  f"{r['cached_tokens']:7d} {r['computed_tokens']:8d} {r['completion_tokens']:9d} "
                  f"{r['model_s']:8.1f} {r['round_s'] if r['round_s'] is not None else float('nan'):8.1f} "
                  f"{r['quiet_model_s']:7.1f}")
    print()
    head = (f"{'variant':8s} {'rounds':>6s} {'med 1st-call prompt tok':>23s} {'med computed tok':>16s} "
            f"{'cached share':>12s} {'med round s':>11s} {'mean round s':>12s} {'med quiet model s':>17s}")
    print(head)
    print("-" * len(head))
    for name, s in result["variants"].items():
        print(f"{name:8s} {s['rounds']:6d} {s['median_first_prompt_tokens'] or 0:23.0f} "
              f"{s['median_computed_tokens'] or 0:16.0f} {s['cached_share'] or 0:12.1%} "
              f"{s['median_round_s'] or 0:11.1f} {s['mean_round_s'] or 0:12.1f} "
              f"{s['median_quiet_model_s'] or 0:17.1f}")
    for name, s in result["variants"].items():
        if s.get("median_write_tps"):
            print(f"{name}: {s.get('calls')} model calls for {s['rounds']} rounds; measured here: "
                  f"{s.get('median_read_tps')} prompt tokens/s read, {s['median_write_tps']} tokens/s"
                  " written (medians)")
    print(f"quiet s: the round's model time at {QUIET_READ_TPS:g} prompt tokens/s read and "
          f"{QUIET_WRITE_TPS:g} tokens/s written (a quiet 2-core machine, issue 15), from the computed "
          "and reply tokens; round s: measured here, including the harness's evaluation")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, default=None, help="the `src` folder of the baseline tree")
    parser.add_argument("--after", type=Path, default=Path(__file__).resolve().parents[1] / "src",
                        help="the `src` folder of the tree under test (default: this checkout's)")
    parser.add_argument("--budget", type=int, default=4, help="rounds per operator (default 4, the demo's)")
    parser.add_argument("--ops", default=",".join(DEMO), help="task files under tasks/suite, comma-separated")
    parser.add_argument("--keep", type=Path, default=None, help="keep the two workspaces under this folder")
    parser.add_argument("--run-opt", action="append", default=[],
                        help="extra `sage run` argument (repeatable)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--from-json", type=Path, default=None, help="re-print a saved --json result")
    parser.add_argument("--collect", action="store_true",
                        help="only read the two workspaces under --keep (an interrupted bench) and report")
    args = parser.parse_args()
    if args.collect:  # the workspaces of an interrupted bench under --keep, as far as they got
        if args.keep is None:
            parser.error("--collect needs --keep")
        names = ("before", "after")
        per_round = {name: rounds_of(args.keep / f"ws_{name}") for name in names}
        result = {"command": "python " + " ".join(shlex.quote(a) for a in sys.argv), "budget": args.budget,
                  "operators": sorted({r["operator"] for rows in per_round.values() for r in rows}),
                  "cpus": len(os.sched_getaffinity(0)), "loadavg_1m_start": None,
                  "loadavg_1m_end": round(os.getloadavg()[0], 2),
                  "variants": {name: summary(per_round[name]) for name in names}, "runs": [],
                  "rounds": per_round}
    elif args.from_json is not None:
        result = json.loads(args.from_json.read_text())
        for name, rows in result["rounds"].items():
            result["variants"][name].update(summary(rows))
    elif args.before is None:
        parser.error("--before is required (unless --from-json)")
    else:
        result = bench({"before": args.before.resolve(), "after": args.after.resolve()}, args.budget,
                       args.ops.split(","), args.run_opt, args.keep)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_table(result)


if __name__ == "__main__":
    main()
