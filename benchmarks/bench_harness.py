"""Per-candidate cost and speedups of the harness, before and after the rebuild, side by side.

    python3 benchmarks/bench_harness.py [--repeats 5] [--baseline REV] [--json] [TASK_FILE ...]

For each task's hand-written CPU kernel, in one run: the current harness (this checkout) and the
harness at git revision REV (default: the last commit before the rebuild), each evaluating the
same kernels the way the agent uses them (warm servers started by one excluded warm-up evaluation).
Repeats alternate between the two, so drift on a shared machine hits both alike. The table gives
medians of the stage times, the total, the measured speedup, and the cost ratio after/before.
The baseline runs from a `git archive` of REV in a subprocess; nothing of it is kept.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE = "4df48f1"  # main before the harness rebuild (issue 9)
DEFAULT_TASKS = [
    ROOT / "src/sagekernel/tasks/suite/level1/abs.py",
    ROOT / "src/sagekernel/tasks/suite/level1/sqrt.py",
    ROOT / "tests/fixtures/tasks/relu_rows.py",
    ROOT / "tests/fixtures/tasks/matmul_small.py",
    ROOT / "src/sagekernel/tasks/suite/level2/softmax.py",
]

#: Runs in a subprocess with PYTHONPATH set to one tree's src/: one evaluation per task (after a
#: warm-up), printed as JSON. Only the API both trees share is used.
MEASURE = r"""
import json, sys
from pathlib import Path
from sagekernel.harness.config import HarnessConfig
from sagekernel.harness.evaluate import evaluate
from sagekernel.targets import get_target
from sagekernel.tasks.loader import load_task
paths = [Path(p) for p in sys.argv[1:]]
target, config = get_target("cpu"), HarnessConfig()
rows = []
for i, path in enumerate([paths[0]] + paths):
    task = load_task(path)
    source = task.reference_kernels["cpu"].read_text()
    v = evaluate(task, source, target, config)
    if i == 0:
        continue  # the warm-up: starts the servers
    d = v.durations_s
    rows.append({"task": task.name, "ok": v.stage.value == "ok", "message": v.message[:200],
                 "build": d.get("build", 0.0),
                 "correctness": d.get("correctness", 0.0) + d.get("reference", 0.0),
                 "timing": d.get("timing", 0.0), "total": d.get("total", 0.0), "speedup": v.speedup})
print(json.dumps(rows))
"""


def export(rev: str, into: Path) -> Path:
    cmd = ["git", "-C", str(ROOT), "archive", rev, "src"]
    data = subprocess.run(cmd, capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def measure(src: Path, tasks: list[Path]) -> list[dict[str, object]]:
    env = {"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin:/usr/local/bin", "HOME": str(Path.home()),
           "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", MEASURE, *map(str, tasks)], capture_output=True, text=True,
                          env=env, timeout=1800)
    if proc.returncode != 0:
        raise SystemExit(f"measurement in {src} failed:\n{proc.stderr[-2000:]}")
    rows: list[dict[str, object]] = json.loads(proc.stdout.strip().splitlines()[-1])
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("tasks", nargs="*", type=Path)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--baseline", default=BASELINE, help="git revision of the 'before' harness")
    parser.add_argument("--json", action="store_true")
    ns = parser.parse_args()
    tasks = ns.tasks or DEFAULT_TASKS
    samples: dict[str, dict[str, list[dict[str, object]]]] = {"before": {}, "after": {}}
    with tempfile.TemporaryDirectory(prefix="sage-bench-") as tmp:
        trees = {"before": export(ns.baseline, Path(tmp)), "after": ROOT / "src"}
        for r in range(ns.repeats):
            for side in ("before", "after") if r % 2 == 0 else ("after", "before"):
                for row in measure(trees[side], tasks):
                    if not row["ok"]:
                        print(f"{side} {row['task']}: {row['message']}", file=sys.stderr)
                    samples[side].setdefault(str(row["task"]), []).append(row)
    rows = []
    for name in samples["after"]:
        out: dict[str, object] = {"task": name}
        for side in ("before", "after"):
            got = samples[side].get(name, [])
            for key in ("build", "correctness", "timing", "total"):
                values = [float(g[key]) for g in got]  # type: ignore[arg-type]
                out[f"{side}_{key}_s"] = round(statistics.median(values), 4) if values else None
            speeds = [float(g["speedup"]) for g in got if g.get("speedup")]
            out[f"{side}_speedup"] = round(statistics.median(speeds), 2) if speeds else None
        b, a = out["before_total_s"], out["after_total_s"]
        out["cost_ratio"] = round(float(a) / float(b), 2) if a and b else None  # type: ignore[arg-type]
        rows.append(out)
    command = "python3 benchmarks/bench_harness.py " + " ".join(sys.argv[1:])
    if ns.json:
        print(json.dumps({"command": command, "repeats": ns.repeats, "baseline": ns.baseline, "rows": rows},
                         indent=2))
        return 0
    cols = ["task", "before_total_s", "after_total_s", "cost_ratio", "after_build_s", "after_correctness_s",
            "after_timing_s", "before_speedup", "after_speedup"]
    print(f"$ {command}\n(medians of {ns.repeats} alternating repeats; before = {ns.baseline}; correctness "
          "includes the parent's reference computation)")
    print(" | ".join(cols))
    for r in rows:
        print(" | ".join(str(r[c]) for c in cols))
    return 0


if __name__ == "__main__":
    sys.exit(main())
