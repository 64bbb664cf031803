"""Per-candidate cost of issue 21's coverage trials, before and after, side by side in one run.

    python3 benchmarks/bench_coverage.py [--target cpu|triton] [--repeats 3] [--baseline REV] [--json]
                                         [TASK_FILE ...]

For each task's hand-written kernel of the target (CPU: native driver, timed; Triton: the
interpreter, which is never timed), one run evaluates, alternating over repeats so drift on a
shared machine hits every column alike:

- ``before``: the harness at git revision REV (default: the commit this work started from);
- ``after``: this checkout, every trial on;
- ``after`` with one feature off at a time (``-coverage``: special values, ties, edge cases and
  drawn attributes; ``-held_out``: the two held-out shapes, and their timing; ``-timed_held_out``:
  only the held-out timing), so each feature's cost is ``after - after(-feature)``.

The table gives medians of per-candidate wall time (the verdict's total), the ratio after/before,
and each feature's cost in seconds. Warm servers are started by one excluded warm-up evaluation per
tree. The baseline runs from a `git archive` of REV in a subprocess; nothing of it is kept.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_harness import export  # one home for exporting a revision

ROOT = Path(__file__).resolve().parents[1]
BASELINE = "12827b4"  # main when issue 21's work started
SUITE = ROOT / "src/sagekernel/tasks/suite"
DEFAULT_TASKS = {
    "cpu": ["level1/abs", "level1/clip_by_value", "level2/reduce_max", "level2/layer_norm",
            "level3/grouped_matmul"],
    "triton": ["level1/clip_by_value", "level2/reduce_max"],
}
#: Columns: (name, tree, HarnessConfig overrides). Overrides unknown to the baseline are never sent to it.
VARIANTS = [
    ("before", "before", {}),
    ("after", "after", {}),
    ("-coverage", "after", {"coverage_trials": False}),
    ("-held_out", "after", {"held_out_shape": False, "timed_held_out": False}),
    ("-timed_held_out", "after", {"timed_held_out": False}),
]

#: Runs in a subprocess with PYTHONPATH set to one tree's src/: one evaluation per task (after a
#: warm-up), printed as JSON. argv: target, device or "", JSON overrides, task files.
MEASURE = r"""
import json, sys
from pathlib import Path
from sagekernel.harness.config import HarnessConfig
from sagekernel.harness.evaluate import evaluate
from sagekernel.targets import get_target
from sagekernel.tasks.loader import load_task
target_name, device, overrides = sys.argv[1], sys.argv[2] or None, json.loads(sys.argv[3])
paths = [Path(p) for p in sys.argv[4:]]
target, config = get_target(target_name), HarnessConfig(**overrides)
rows = []
for i, path in enumerate([paths[0]] + paths):
    task = load_task(path)
    source = task.reference_kernels[target_name].read_text()
    v = evaluate(task, source, target, config, device)
    if i == 0:
        continue  # the warm-up: starts the servers
    d = v.durations_s
    rows.append({"task": task.name, "ok": v.stage.value == "ok", "message": v.message[:300],
                 "correctness": d.get("correctness", 0.0) + d.get("reference", 0.0),
                 "timing": d.get("timing", 0.0), "total": d.get("total", 0.0), "speedup": v.speedup,
                 "trials": len(v.checks.get("trials", [])) or sum(len(g.get("trials", []))
                                                                  for g in v.checks.get("groups", []))})
print(json.dumps(rows))
"""


def measure(src: Path, target: str, device: str, overrides: dict[str, object],
            tasks: list[Path]) -> list[dict[str, object]]:
    env = {"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin:/usr/local/bin", "HOME": str(Path.home()),
           "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-c", MEASURE, target, device, json.dumps(overrides), *map(str, tasks)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    if proc.returncode != 0:
        raise SystemExit(f"measurement in {src} failed:\n{proc.stderr[-2000:]}")
    rows: list[dict[str, object]] = json.loads(proc.stdout.strip().splitlines()[-1])
    return rows


def median(values: list[float]) -> float | None:
    return round(statistics.median(values), 3) if values else None


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("tasks", nargs="*", type=Path)
    parser.add_argument("--target", choices=("cpu", "triton"), default="cpu")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--baseline", default=BASELINE, help="git revision of the 'before' harness")
    parser.add_argument("--json", action="store_true")
    ns = parser.parse_args()
    tasks = ns.tasks or [SUITE / f"{t}.py" for t in DEFAULT_TASKS[ns.target]]
    device = "interpreter" if ns.target == "triton" else ""
    variants = VARIANTS if ns.target == "cpu" else VARIANTS[:4]  # the interpreter is never timed
    samples: dict[str, dict[str, list[dict[str, object]]]] = {name: {} for name, _, _ in variants}
    with tempfile.TemporaryDirectory(prefix="sage-bench-") as tmp:
        trees = {"before": export(ns.baseline, Path(tmp)), "after": ROOT / "src"}
        for r in range(ns.repeats):
            order = variants if r % 2 == 0 else list(reversed(variants))
            for name, tree, overrides in order:
                # each tree judges its own copy of the task files (the baseline cannot read the
                # new declarations), the same kernels where they did not change
                mine = [trees[tree] / p.resolve().relative_to(ROOT / "src") for p in tasks]
                for row in measure(trees[tree], ns.target, device, overrides, mine):
                    if not row["ok"]:
                        print(f"{name} {row['task']}: {row['message']}", file=sys.stderr)
                    samples[name].setdefault(str(row["task"]), []).append(row)
    rows = []
    for task in samples["after"]:
        out: dict[str, object] = {"task": task}
        for name, _, _ in variants:
            got = samples[name].get(task, [])
            out[f"{name}_s"] = median([float(g["total"]) for g in got])  # type: ignore[arg-type]
            out[f"{name}_trials"] = got[0]["trials"] if got else None
            speeds = [float(g["speedup"]) for g in got if g.get("speedup")]  # type: ignore[arg-type]
            out[f"{name}_speedup"] = round(statistics.median(speeds), 2) if speeds else None
        after, before = out["after_s"], out["before_s"]
        out["ratio"] = round(float(after) / float(before), 2) if after and before else None  # type: ignore[arg-type]
        for name, _, _ in variants[2:]:
            off = out[f"{name}_s"]
            out[f"cost{name.replace('-', '_')}_s"] = (
                round(float(after) - float(off), 3) if after is not None and off is not None else None  # type: ignore[arg-type]
            )
        rows.append(out)
    command = "python3 benchmarks/bench_coverage.py " + " ".join(sys.argv[1:])
    if ns.json:
        print(json.dumps({"command": command, "target": ns.target, "repeats": ns.repeats,
                          "baseline": ns.baseline, "rows": rows}, indent=2))
        return 0
    cols = ["task", "before_s", "after_s", "ratio", "before_trials", "after_trials"]
    cols += [f"cost{name.replace('-', '_')}_s" for name, _, _ in variants[2:]]
    if ns.target == "cpu":
        cols += ["before_speedup", "after_speedup"]
    print(f"$ {command}\n(target {ns.target}{' interpreter' if device else ''}; medians of {ns.repeats} "
          f"alternating repeats; before = {ns.baseline}; seconds per candidate; cost_X = after - after "
          "with X off)")
    print(" | ".join(cols))
    for r in rows:
        print(" | ".join(str(r[c]) for c in cols))
    return 0


if __name__ == "__main__":
    sys.exit(main())
