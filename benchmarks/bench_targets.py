"""Per-candidate evaluation time, correctness only: the Triton interpreter path next to the CPU path.

    PYTHONPATH=src python3 benchmarks/bench_targets.py [--repeats 3] [--json] [TASK ...]

For each built-in task with both a hand-written CPU and Triton kernel:
- CPU: `harness.evaluate` with the CPU target, correctness only (`skip_timing=True`), the
  harness's sandbox and warm servers (the first call, which starts them, is excluded);
- Triton (interpreter): the same `harness.evaluate`, correctness only, on the `interpreter`
  device: the target's lint, its build (parse + the sm_90 AOT gate in the build sandbox) and the
  sandboxed runtime under TRITON_INTERPRET=1 over every trial; the stages are the verdict's own
  durations (`durations_s`).
Medians over repeats, in seconds. Neither path is timed on the device here: these are the costs of
judging one candidate, which bound how many candidates a run can afford.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from sagekernel.harness.config import HarnessConfig
from sagekernel.harness.evaluate import evaluate
from sagekernel.targets import get_target
from sagekernel.tasks.suites import suite_report

DEFAULT = ["abs", "sqrt", "softmax", "rms_norm", "layer_norm"]


def cpu_seconds(task, repeats: int) -> tuple[float, bool]:  # type: ignore[no-untyped-def]
    source = task.reference_kernels["cpu"].read_text()
    cfg = HarnessConfig(skip_timing=True)
    target = get_target("cpu")
    evaluate(task, source, target, cfg)  # starts the warm servers
    times, ok = [], True
    for _ in range(repeats):
        t0 = time.perf_counter()
        verdict = evaluate(task, source, target, cfg)
        times.append(time.perf_counter() - t0)
        ok &= verdict.correct
    return statistics.median(times), ok


def triton_seconds(task, repeats: int) -> tuple[dict[str, float], bool]:  # type: ignore[no-untyped-def]
    """`harness.evaluate` on the interpreter, as production judges a Triton candidate."""
    target = get_target("triton")
    source = task.reference_kernels["triton"].read_text()
    cfg = HarnessConfig(skip_timing=True)
    stages: dict[str, list[float]] = {"build": [], "run": [], "total": []}
    ok = True
    for _ in range(repeats):
        t0 = time.perf_counter()
        verdict = evaluate(task, source, target, cfg, device="interpreter")
        total = time.perf_counter() - t0
        ok &= verdict.correct
        build = verdict.durations_s.get("build", 0.0)
        stages["build"].append(build)
        stages["run"].append(verdict.durations_s.get("correctness", 0.0))
        stages["total"].append(total)
    return {k: statistics.median(v) for k, v in stages.items()}, ok


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("tasks", nargs="*", default=DEFAULT)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    opts = parser.parse_args()
    by_name = {t.name: t for t in suite_report("builtin").tasks}
    rows = []
    for name in opts.tasks:
        task = by_name[name]
        cpu_s, cpu_ok = cpu_seconds(task, opts.repeats)
        tri, tri_ok = triton_seconds(task, opts.repeats)
        rows.append({"task": name, "cpu_s": round(cpu_s, 3), "cpu_correct": cpu_ok,
                     **{f"triton_{k}_s": round(v, 3) for k, v in tri.items()}, "triton_correct": tri_ok,
                     "ratio": round(tri["total"] / cpu_s, 1)})
    if opts.json:
        print(json.dumps({"repeats": opts.repeats, "rows": rows}, indent=1))
        return 0
    print(f"{'task':<12} {'cpu total':>9} {'triton build':>12} {'correctness':>11} {'total':>7} "
          f"{'ratio':>6}  correct(cpu/triton)")
    for r in rows:
        print(f"{r['task']:<12} {r['cpu_s']:>9.3f} {r['triton_build_s']:>12.3f} "
              f"{r['triton_run_s']:>11.3f} {r['triton_total_s']:>7.3f} {r['ratio']:>6.1f}  "
              f"{r['cpu_correct']}/{r['triton_correct']}")
    cpu_med = statistics.median(r["cpu_s"] for r in rows)
    tri_med = statistics.median(r["triton_total_s"] for r in rows)
    print(f"median per candidate: cpu {cpu_med:.3f} s, triton interpreter {tri_med:.3f} s "
          f"(medians of {opts.repeats} repeats per task)")
    print(f"command: PYTHONPATH=src python3 benchmarks/bench_targets.py --repeats {opts.repeats} "
          + " ".join(opts.tasks))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
