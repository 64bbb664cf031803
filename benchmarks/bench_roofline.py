"""The roofline fractions of the built-in hand-written CPU kernels (issue 31), with the probed peaks.

    PYTHONPATH=src python3 benchmarks/bench_roofline.py [--json OUT] [--baseline eager|compile|best]
                                                        [TASK ...]

Evaluates each task's hand-written CPU kernel (`tasks/suite/level*/NAME.cpu.c`, the kernels
`sage selfcheck` judges as "reference") through the full harness with the default timing, and
prints per task: the speedup over the baseline, its 95% interval, the bytes and FLOPs per call,
which side bounds it, the bandwidth used for the bound, and the fraction of the roofline reached;
then the distribution, and the CPU peaks (`sage peaks`) it divided by. Canaries are not run (they
are never timed). TASK: a name of the built-in suite (default: every task with a CPU kernel).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tasks", nargs="*")
    parser.add_argument("--json", type=Path, help="write the rows and peaks as JSON here")
    parser.add_argument("--baseline", default="eager", choices=("eager", "compile", "best"))
    args = parser.parse_args()
    from sagekernel.harness.config import HarnessConfig
    from sagekernel.harness.evaluate import evaluate
    from sagekernel.harness.peaks import cpu_peaks
    from sagekernel.targets import get_target
    from sagekernel.tasks.suites import load_suite

    peaks = cpu_peaks()
    tasks = [t for t in load_suite("builtin", strict=False) if "cpu" in t.reference_kernels]
    if args.tasks:
        tasks = [t for t in tasks if t.name in set(args.tasks)]
    config = HarnessConfig(baseline=args.baseline)
    target = get_target("cpu")
    rows = []
    for task in tasks:
        t0 = time.perf_counter()
        v = evaluate(task, task.reference_kernels["cpu"].read_text(encoding="utf-8"), target, config)
        roof = v.timing.get("roofline") or {}
        iv = v.timing.get("speedup_interval") or {}
        row = {"task": task.name, "level": task.level, "stage": v.stage.value, "speedup": v.speedup,
               "low": iv.get("low"), "high": iv.get("high"), "candidate_ms": v.candidate_ms,
               "bytes": roof.get("bytes_moved"), "flops": roof.get("flops"), "bound": roof.get("bound"),
               "bandwidth_gbs": (roof.get("bandwidth_bytes_per_s") or 0) / 1e9 or None,
               "fraction": roof.get("fraction"), "unavailable": roof.get("unavailable"),
               "seconds": round(time.perf_counter() - t0, 1)}
        rows.append(row)
        print(_line(row), flush=True)
    fractions = [r["fraction"] for r in rows if isinstance(r["fraction"], float)]
    if fractions:
        q = statistics.quantiles(fractions, n=4) if len(fractions) > 1 else [fractions[0]] * 3
        median = statistics.median(fractions)
        print(f"\nroofline fraction over {len(fractions)} kernels: median {median:.3f}, "
              f"quartiles {q[0]:.3f}-{q[2]:.3f}, range {min(fractions):.3f}-{max(fractions):.3f}")
    levels = ", ".join(f"{s / 2**20:.3g} MiB {b / 1e9:.1f} GB/s" for s, b in peaks.bandwidth_by_working_set)
    print(f"peaks ({peaks.device}, one thread): triad {levels}; FMA {peaks.flops_per_s['float32'] / 1e9:.1f} "
          "GFLOP/s (float32)")
    if args.json:
        args.json.write_text(json.dumps({"peaks": peaks.to_dict(), "baseline": args.baseline, "rows": rows},
                                        indent=2), encoding="utf-8")
    return 0 if all(r["stage"] == "ok" for r in rows) else 1


def _line(r: dict[str, object]) -> str:
    def num(key: str, fmt: str) -> str:
        value = r.get(key)
        return format(value, fmt) if isinstance(value, (int, float)) else "-"

    return (f"{r['task']:<24} {r['stage']:<8} speedup {num('speedup', '.2f')} [{num('low', '.2f')}, "
            f"{num('high', '.2f')}]  {num('bytes', ',')} B  {num('flops', ',')} FLOP  "
            f"{r.get('bound') or '-':<7} "
            f"at {num('bandwidth_gbs', '.0f')} GB/s  fraction {num('fraction', '.3f')}  ({r['seconds']} s)"
            + (f"  [{r['unavailable']}]" if r.get("unavailable") else ""))


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))
    raise SystemExit(main())
