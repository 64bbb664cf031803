"""Why the rebuilt harness reports other speedups than the old one: warm versus cold inputs.

    python3 benchmarks/speedup_shift.py [--calls 200] [--json] [TASK_FILE ...]

The old harness timed each side on a small pool of input sets that it reused call after call, so
both sides read inputs already in the cache. The rebuilt harness gives every timed call inputs
it has never seen (harness/timing.py), as a kernel in a model reads what the previous layer
wrote. This benchmark isolates that one difference, outside any harness: each hand-written CPU
kernel (loaded with ctypes, built with the CPU target's own flags) and its PyTorch reference
(one thread) are timed in one process, call by call interleaved, on (a) one input set reused
every call ("warm", the old harness's condition) and (b) a ring of input sets larger than the
last-level cache ("cold", the new harness's condition). Medians of per-call latency; the speedup
is reference / kernel under each condition.
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from sagekernel.targets.cpu.flags import LINK_LIBS, compiler_command, is_cxx  # noqa: E402
from sagekernel.tasks.inputs import assemble_call, bound_sizes, instantiate, task_module  # noqa: E402
from sagekernel.tasks.loader import build_inputs, load_task  # noqa: E402
from sagekernel.tasks.task import Task  # noqa: E402

DEFAULT_TASKS = [
    ROOT / "src/sagekernel/tasks/suite/level1/abs.py",
    ROOT / "src/sagekernel/tasks/suite/level1/sqrt.py",
    ROOT / "tests/fixtures/tasks/relu_rows.py",
    ROOT / "tests/fixtures/tasks/matmul_small.py",
    ROOT / "src/sagekernel/tasks/suite/level2/softmax.py",
]
COLD_RING_BYTES = 96 << 20  # well past any last-level cache of the machines this runs on


def build(task: Task, workdir: Path) -> ctypes.CDLL:
    source = task.reference_kernels["cpu"].read_text()
    src = workdir / ("k.cpp" if is_cxx(source) else "k.c")
    src.write_text(source)
    lib = workdir / f"{task.name}.so"
    cmd = [*compiler_command("c++" if is_cxx(source) else "c"), str(src), "-o", str(lib), *LINK_LIBS]
    subprocess.run(cmd, check=True, capture_output=True)
    return ctypes.CDLL(str(lib))


def input_set(task: Task, sizes: dict[str, int], seed: int) -> list[torch.Tensor]:
    """The task's own inputs (its get_inputs), as the harness draws them for timing."""
    return build_inputs(task, sizes, seed, "default")


def measure(task: Task, lib: ctypes.CDLL, calls: int) -> dict[str, float]:
    sizes = dict(task.sizes)
    module = task_module(task)
    with bound_sizes(module, task.binding(sizes)):
        model = instantiate(module, task.source_path, 0).eval()
    per_set = sum(t.numel() * t.element_size() for t in input_set(task, sizes, 0))
    ring = [input_set(task, sizes, 1 + i) for i in range(max(3, COLD_RING_BYTES // max(1, per_set)))]
    warm = ring[0]
    with torch.no_grad():
        outs = [torch.empty_like(o) for o in _as_list(model(*assemble_call(task, warm)))]
    scalars = [ctypes.c_int64(int(sizes[s])) for s in task.sizes] + [
        ctypes.c_float(v) if isinstance(v, float) else ctypes.c_int64(int(v)) for v in task.attrs.values()
    ]

    def kernel(inputs: list[torch.Tensor]) -> None:
        ptrs = [ctypes.c_void_p(t.data_ptr()) for t in [*inputs, *outs]]
        lib.sage_kernel(*ptrs, *scalars)

    def reference(inputs: list[torch.Tensor]) -> None:
        model(*assemble_call(task, inputs))

    samples: dict[str, list[float]] = {k: [] for k in ("warm_kernel", "warm_ref", "cold_kernel", "cold_ref")}
    with torch.no_grad():
        for i in range(calls):
            # each side reads its own never-recently-touched set; the order alternates per call
            cold_k, cold_r = ring[1 + (2 * i) % (len(ring) - 1)], ring[1 + (2 * i + 1) % (len(ring) - 1)]
            order = [("warm_kernel", kernel, warm), ("warm_ref", reference, warm),
                     ("cold_kernel", kernel, cold_k), ("cold_ref", reference, cold_r)]
            for name, fn, inputs in order if i % 2 else order[::-1]:
                t0 = time.perf_counter_ns()
                fn(inputs)
                samples[name].append((time.perf_counter_ns() - t0) / 1e6)
    med = {k: statistics.median(v) for k, v in samples.items()}
    med["warm_speedup"] = med["warm_ref"] / med["warm_kernel"]
    med["cold_speedup"] = med["cold_ref"] / med["cold_kernel"]
    return med


def _as_list(out: object) -> list[torch.Tensor]:
    return list(out) if isinstance(out, (tuple, list)) else [out]  # type: ignore[list-item]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tasks", nargs="*", type=Path, default=DEFAULT_TASKS)
    ap.add_argument("--calls", type=int, default=200, help="timed calls per side and condition")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = ap.parse_args()
    torch.set_num_threads(1)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for path in args.tasks:
            task = load_task(path)
            rows.append({"task": task.name, **measure(task, build(task, Path(tmp)), args.calls)})
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"python3 benchmarks/speedup_shift.py --calls {args.calls}   (medians of per-call ms, one thread)")
    print(f"{'task':14s} {'kernel warm':>11s} {'ref warm':>9s} {'speedup':>8s} | "
          f"{'kernel cold':>11s} {'ref cold':>9s} {'speedup':>8s}")
    for r in rows:
        print(f"{r['task']:14s} {r['warm_kernel']:11.4f} {r['warm_ref']:9.4f} {r['warm_speedup']:7.2f}x | "
              f"{r['cold_kernel']:11.4f} {r['cold_ref']:9.4f} {r['cold_speedup']:7.2f}x")


if __name__ == "__main__":
    main()
