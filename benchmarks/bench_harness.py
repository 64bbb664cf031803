"""Per-candidate cost of the harness next to the bare minimum (compiler alone + timed loop alone).

    python3 benchmarks/bench_harness.py [--repeats 5] [--json] [TASK_FILE ...]

For each task's hand-written CPU kernel: the harness's build / correctness / timing / total time
(warm timing server and correctness zygote, as the agent uses them; the first call that starts them
is excluded; `--cold-correctness` starts a fresh sandboxed process per correctness run), and
the bare minimum: the same gcc command run directly, plus the same number of timed candidate and
reference calls in this process (no sandbox, no checks). Medians over repeats; ratio = total / bare.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from sagekernel.harness.config import HarnessConfig
from sagekernel.harness.evaluate import evaluate
from sagekernel.targets import get_target
from sagekernel.targets.cpu.flags import LINK_LIBS, compiler_command
from sagekernel.tasks.loader import build_inputs, load_task, make_model

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TASKS = [
    ROOT / "src/sagekernel/tasks/suite/level1/abs.py",
    ROOT / "src/sagekernel/tasks/suite/level1/sqrt.py",
    ROOT / "tests/fixtures/tasks/relu_rows.py",
    ROOT / "tests/fixtures/tasks/matmul_small.py",
]


def bare(task_path: Path, config: HarnessConfig) -> tuple[float, float]:
    task = load_task(task_path)
    src = task.reference_kernels["cpu"]
    with tempfile.TemporaryDirectory() as tmp:
        so = Path(tmp) / "k.so"
        t0 = time.perf_counter()
        subprocess.run([*compiler_command("c"), str(src), "-o", str(so), *LINK_LIBS], check=True)
        compile_s = time.perf_counter() - t0
        lib = ctypes.CDLL(str(so))
        inputs = build_inputs(task, None, 1, "default")
        outputs = [
            torch.empty(tuple(task.sizes[d] for d in o.dims), dtype=getattr(torch, o.dtype))
            for o in task.outputs
        ]
        args: list[object] = [ctypes.c_void_p(t.data_ptr()) for t in inputs + outputs]
        args += [ctypes.c_int64(task.sizes[s]) for s in task.sizes]
        args += [
            ctypes.c_float(v) if isinstance(v, float) else ctypes.c_int64(v) for v in task.attrs.values()
        ]
        model = make_model(task)
        torch.set_num_threads(config.threads)
        t0 = time.perf_counter()
        with torch.no_grad():
            for _ in range(config.warmup + config.iters):
                lib.sage_kernel(*args)
                model(*inputs)
        loop_s = time.perf_counter() - t0
    return compile_s, loop_s


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tasks", nargs="*", type=Path)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--cold-correctness", action="store_true", help="a fresh sandboxed process per correctness run"
    )
    ns = parser.parse_args()
    tasks = ns.tasks or DEFAULT_TASKS
    config = HarnessConfig(warm_correctness=not ns.cold_correctness)
    target = get_target("cpu")
    rows = []
    warm = load_task(tasks[0])
    evaluate(warm, warm.reference_kernels["cpu"].read_text(), target, config)  # start the timing server
    for path in tasks:
        task = load_task(path)
        source = task.reference_kernels["cpu"].read_text()
        h: dict[str, list[float]] = {"build": [], "correctness": [], "timing": [], "total": []}
        b_compile, b_loop = [], []
        for _ in range(ns.repeats):
            v = evaluate(task, source, target, config)
            if not v.ok:
                print(f"{task.name}: {v.stage.value}: {v.message}", file=sys.stderr)
                return 1
            for key in h:
                h[key].append(
                    v.durations_s.get(key, 0.0)
                    + (v.durations_s.get("reference", 0.0) if key == "correctness" else 0.0)
                )
            c, lp = bare(path, config)
            b_compile.append(c)
            b_loop.append(lp)
        med = {k: statistics.median(v) for k, v in h.items()}
        bare_total = statistics.median(b_compile) + statistics.median(b_loop)
        rows.append(
            {
                "task": task.name,
                **{f"harness_{k}_s": round(v, 4) for k, v in med.items()},
                "bare_compile_s": round(statistics.median(b_compile), 4),
                "bare_loop_s": round(statistics.median(b_loop), 4),
                "bare_total_s": round(bare_total, 4),
                "ratio": round(med["total"] / bare_total, 2),
            }
        )
    command = "python3 benchmarks/bench_harness.py " + " ".join(sys.argv[1:])
    if ns.json:
        print(json.dumps({"command": command, "repeats": ns.repeats, "rows": rows}, indent=2))
        return 0
    cols = [
        "task",
        "harness_build_s",
        "harness_correctness_s",
        "harness_timing_s",
        "harness_total_s",
        "bare_compile_s",
        "bare_loop_s",
        "bare_total_s",
        "ratio",
    ]
    print(
        f"$ {command}\n(medians of {ns.repeats} repeats; "
        "correctness includes the parent's reference computation)"
    )
    print(" | ".join(cols))
    for r in rows:
        print(" | ".join(str(r[c]) for c in cols))
    return 0


if __name__ == "__main__":
    sys.exit(main())
