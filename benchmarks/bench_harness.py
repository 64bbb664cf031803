"""Per-candidate cost and speedups of the harness, before and after a change, side by side, and the
bare protocol it wraps.

    python3 benchmarks/bench_harness.py [--repeats 5] [--baseline REV] [--json] [TASK_FILE ...]

For each task's hand-written CPU kernel, in one run: the current harness (this checkout) and the
harness at git revision REV (default: the commit before issue 20's supervised driver), each
evaluating the same kernels the way the agent uses them (warm servers started by one excluded
warm-up evaluation), and the **bare protocol**: the same work with no sandbox, no processes and
no supervision -- compile once, the same correctness trials (planned by the harness's own
planner, references included) called through ctypes and compared, then the same timed calls
(warm-up, rounds, a fresh input set per call, the same rechecks against fresh references) and the
same reference calls timed in the same process. Repeats alternate between the sides, so drift on
a shared machine hits all alike. The table gives medians: the totals, the cost ratio after/before,
the overhead ratio after/bare, and the measured speedups. The baseline runs from a `git archive`
of REV in a subprocess; nothing of it is kept.
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
BASELINE = "12827b4"  # the branch point of issue 20 (the driver before supervision)
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
name, paths = sys.argv[1], [Path(p) for p in sys.argv[2:]]
target, config = get_target(name), HarnessConfig()
device = "interpreter" if name == "triton" else None
rows = []
for i, path in enumerate([paths[0]] + paths):
    task = load_task(path)
    source = task.reference_kernels[name].read_text()
    v = evaluate(task, source, target, config, device)
    if i == 0:
        continue  # the warm-up: starts the servers
    d = v.durations_s
    rows.append({"task": task.name, "ok": v.stage.value == "ok", "message": v.message[:200],
                 "build": d.get("build", 0.0),
                 "correctness": d.get("correctness", 0.0) + d.get("reference", 0.0),
                 "timing": d.get("timing", 0.0), "total": d.get("total", 0.0), "speedup": v.speedup})
print(json.dumps(rows))
"""


#: The bare protocol (see the module docstring), in a subprocess with the current tree's src/.
BARE = r"""
import ctypes, json, secrets, statistics, subprocess, sys, tempfile, time
from pathlib import Path
import torch
from sagekernel.harness.compare import compare
from sagekernel.harness.config import HarnessConfig
from sagekernel.harness.timing import call_budget, param_seed
from sagekernel.harness.trials import kernel_args, plan_trials, raw_bytes, trial_atol
from sagekernel.targets.cpu.flags import LINK_LIBS, compiler_command, is_cxx
from sagekernel.tasks.inputs import build_inputs
from sagekernel.tasks.loader import load_task
from sagekernel.tasks.reference import make_model, param_tensors, reference_outputs

CT = {"in": ctypes.c_void_p, "out": ctypes.c_void_p, "i64": ctypes.c_int64, "f32": ctypes.c_float,
      "f64": ctypes.c_double}

def call(fn, args, tensors, outs):
    vals, ti, to = [], 0, 0
    for a in args:
        if a.kind == "in":
            vals.append(tensors[ti].data_ptr()); ti += 1
        elif a.kind == "out":
            vals.append(outs[to].data_ptr()); to += 1
        else:
            vals.append(a.value)
    t0 = time.perf_counter_ns()
    fn(*vals)
    return time.perf_counter_ns() - t0

def check(task, outs, expected, atol):
    for k, spec in enumerate(task.outputs):
        assert compare(outs[k], expected[k], atol, task.rtol, spec.dtype, raw_bytes(outs[k])) is None

def bare(path):
    task, config = load_task(Path(path)), HarnessConfig()
    t_start = time.perf_counter()
    source = task.reference_kernels["cpu"].read_text()
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / ("k.cc" if is_cxx(source) else "k.c")
        src.write_text(source)
        subprocess.run([*compiler_command("c++" if is_cxx(source) else "c"), str(src), "-o",
                        str(Path(tmp) / "k.so"), *LINK_LIBS], check=True)
        lib = ctypes.CDLL(str(Path(tmp) / "k.so"))
        t_build = time.perf_counter()
        trials = plan_trials(task, config)  # the same trials, references computed the same way
        fn = lib.sage_kernel
        fn.argtypes = [CT[a.kind] for a in kernel_args(task, trials[0])]
        for t in trials:
            args = kernel_args(task, t)
            outs = [torch.empty_like(e) for e in t.expected]
            call(fn, args, [x.contiguous() for x in t.tensors], outs)
            check(task, outs, t.expected, t.atol)
        t_correct = time.perf_counter()
        sizes = dict(task.sizes)
        def fresh():
            seed = secrets.randbits(62)
            params = param_tensors(task, sizes, param_seed(seed)) if task.params else []
            return seed, [*build_inputs(task, sizes, seed, "default"), *params]
        probe = fresh()[1]
        warmup, rounds, per_round = call_budget(config, sum(len(raw_bytes(x)) for x in probe))
        args = kernel_args(task, [t for t in trials if t.shape_label == "default"][0])
        model = make_model(task, sizes)
        n_in = len(task.inputs)
        outs = [torch.empty_like(e) for e in reference_outputs(task, probe[:n_in], sizes)]
        with torch.no_grad():
            for _ in range(1 + config.calibration_rounds):  # the reference alone, as the harness does
                for _ in range(warmup):
                    model(*fresh()[1][:n_in])
            for _ in range(warmup):
                call(fn, args, fresh()[1], outs)
            cand, ref = [], []
            for _ in range(rounds):
                sets = [fresh() for _ in range(per_round)]
                c_ns, r_ns, picked = 0, 0, set(secrets.SystemRandom().sample(range(per_round),
                                                  min(config.recheck_per_round, per_round)))
                for i, (seed, tensors) in enumerate(sets):
                    c_ns += call(fn, args, tensors, outs)
                    if i in picked:
                        ps = param_seed(seed)
                        exp = reference_outputs(task, tensors[:n_in], sizes, seed=ps)
                        check(task, outs, exp, trial_atol(task, tensors[:n_in], exp, sizes, seed=ps))
                for seed, tensors in sets:
                    t0 = time.perf_counter_ns(); model(*tensors[:n_in]); r_ns += time.perf_counter_ns() - t0
                cand.append(c_ns); ref.append(r_ns)
    end = time.perf_counter()
    return {"task": task.name, "bare_total": end - t_start, "bare_build": t_build - t_start,
            "bare_correctness": t_correct - t_build, "bare_timing": end - t_correct,
            "bare_speedup": statistics.median(r / c for r, c in zip(ref, cand))}

paths = sys.argv[1:]
bare(paths[0])  # warm-up: imports, first compile
print(json.dumps([bare(p) for p in paths]))
"""


def measure_bare(src: Path, tasks: list[Path]) -> list[dict[str, object]]:
    env = {"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin:/usr/local/bin", "HOME": str(Path.home()),
           "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", BARE, *map(str, tasks)], capture_output=True, text=True,
                          env=env, timeout=1800)
    if proc.returncode != 0:
        raise SystemExit(f"the bare protocol failed:\n{proc.stderr[-2000:]}")
    rows: list[dict[str, object]] = json.loads(proc.stdout.strip().splitlines()[-1])
    return rows


def export(rev: str, into: Path) -> Path:
    cmd = ["git", "-C", str(ROOT), "archive", rev, "src"]
    data = subprocess.run(cmd, capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def measure(src: Path, tasks: list[Path], target: str = "cpu") -> list[dict[str, object]]:
    env = {"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin:/usr/local/bin", "HOME": str(Path.home()),
           "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", MEASURE, target, *map(str, tasks)], capture_output=True,
                          text=True, env=env, timeout=1800)
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
    parser.add_argument("--target", choices=("cpu", "triton"), default="cpu",
                        help="triton: the interpreter (not timed: correctness cost only, no bare side)")
    ns = parser.parse_args()
    tasks = ns.tasks or DEFAULT_TASKS
    if ns.target != "cpu":
        from sagekernel.tasks.loader import find_reference_kernels

        tasks = [t for t in tasks if ns.target in find_reference_kernels(t)]
    sides = ("before", "after", "bare") if ns.target == "cpu" else ("before", "after")
    samples: dict[str, dict[str, list[dict[str, object]]]] = {"before": {}, "after": {}, "bare": {}}
    with tempfile.TemporaryDirectory(prefix="sage-bench-") as tmp:
        trees = {"before": export(ns.baseline, Path(tmp)), "after": ROOT / "src"}
        for r in range(ns.repeats):
            for side in sides if r % 2 == 0 else sides[::-1]:
                if side == "bare":
                    got = measure_bare(trees["after"], tasks)
                else:
                    got = measure(trees[side], tasks, ns.target)
                for row in got:
                    if side != "bare" and not row["ok"]:
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
        bare = samples["bare"].get(name, [])
        for key in ("total", "build", "correctness", "timing", "speedup"):
            values = [float(g[f"bare_{key}"]) for g in bare]  # type: ignore[arg-type]
            out[f"bare_{key}" + ("" if key == "speedup" else "_s")] = (
                round(statistics.median(values), 4) if values else None
            )
        b, a, z = out["before_total_s"], out["after_total_s"], out["bare_total_s"]
        out["cost_ratio"] = round(float(a) / float(b), 2) if a and b else None  # type: ignore[arg-type]
        out["overhead_after"] = round(float(a) / float(z), 2) if a and z else None  # type: ignore[arg-type]
        out["overhead_before"] = round(float(b) / float(z), 2) if b and z else None  # type: ignore[arg-type]
        rows.append(out)
    command = "python3 benchmarks/bench_harness.py " + " ".join(sys.argv[1:])
    if ns.json:
        print(json.dumps({"command": command, "repeats": ns.repeats, "baseline": ns.baseline, "rows": rows},
                         indent=2))
        return 0
    cols = ["task", "before_total_s", "after_total_s", "bare_total_s", "cost_ratio", "overhead_before",
            "overhead_after", "after_correctness_s", "after_timing_s", "bare_timing_s", "before_speedup",
            "after_speedup", "bare_speedup"]
    print(f"$ {command}\n(target {ns.target}; medians of {ns.repeats} alternating repeats; before = "
          f"{ns.baseline}; correctness includes the parent's reference computation; overhead = harness "
          "total / bare total)")
    print(" | ".join(cols))
    for r in rows:
        print(" | ".join(str(r.get(c)) for c in cols))
    return 0


if __name__ == "__main__":
    sys.exit(main())
