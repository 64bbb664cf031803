"""How far published KernelBench files get: loaded, and judged to a verdict on the CPU target.

    python3 benchmarks/kernelbench_reach.py KERNELBENCH_DIR/level1 [KERNELBENCH_DIR/level2 ...] [--json]

For every file: does it load (with the size policy's sizes), and does a kernel written against its
contract get a verdict from the full harness (correctness only)? Two kinds of kernel are judged:
the zero-fill null kernel of every task (it must be *rejected as wrong*: a verdict of
`correctness` shows the whole pipeline ran; `broken_task` means the null kernel passes the task),
and, where the operator is a plain elementwise activation, an honest hand-written kernel (it must
pass). Nothing from KernelBench is stored; the directory is the user's checkout.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path

from sagekernel.harness.config import HarnessConfig
from sagekernel.harness.evaluate import evaluate
from sagekernel.targets import get_target
from sagekernel.targets.cpu.canaries import canary_sources
from sagekernel.targets.cpu.contract import c_parameters
from sagekernel.tasks.loader import load_dir

#: Elementwise activations by KernelBench file stem: the C expression of `v` (a float input value).
ELEMENTWISE = {
    "19_ReLU": "v > 0.0f ? v : 0.0f",
    "20_LeakyReLU": "v > 0.0f ? v : 0.01f * v",
    "21_Sigmoid": "(float)(1.0 / (1.0 + exp(-(double)v)))",
    "22_Tanh": "(float)tanh((double)v)",
    "26_GELU_": "(float)(0.5 * (double)v * (1.0 + erf((double)v / sqrt(2.0))))",
    "27_SELU_": "(float)(v > 0.0f ? 1.0507009873554805 * v "
                ": 1.0507009873554805 * 1.6732632423543772 * expm1((double)v))",
    "29_Softplus": "(float)(v > 20.0f ? (double)v : log1p(exp((double)v)))",
    "30_Softsign": "v / (1.0f + fabsf(v))",
    "31_ELU": "(float)(v > 0.0f ? (double)v : expm1((double)v))",
    "32_HardTanh": "v < -1.0f ? -1.0f : (v > 1.0f ? 1.0f : v)",
}


def elementwise_kernel(task: object, expr: str) -> str | None:
    t = task  # a sagekernel Task
    if len(t.inputs) != 1 or len(t.outputs) != 1:  # type: ignore[attr-defined]
        return None
    if t.inputs[0].dtype != "float32":  # type: ignore[attr-defined]
        return None
    x, out = t.inputs[0].name, t.outputs[0].name  # type: ignore[attr-defined]
    dims = " * ".join(t.outputs[0].dims) or "1"  # type: ignore[attr-defined]
    params = ", ".join(c_parameters(t))  # type: ignore[arg-type]
    return (f"#include <stdint.h>\n#include <math.h>\nvoid sage_kernel({params}) {{\n"
            f"  int64_t n = {dims};\n"
            f"  for (int64_t i = 0; i < n; ++i) {{ float v = {x}[i]; {out}[i] = {expr}; }}\n}}\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("dirs", nargs="+", type=Path)
    parser.add_argument("--json", action="store_true")
    ns = parser.parse_args()
    target = get_target("cpu")
    config = HarnessConfig(skip_timing=True, call_timeout_s=20.0)
    command = "python3 benchmarks/kernelbench_reach.py " + " ".join(sys.argv[1:])
    report: dict[str, object] = {"command": command}
    levels = []
    for directory in ns.dirs:
        t0 = time.perf_counter()
        loaded = load_dir(directory, isolate=True)
        tasks = list(loaded.tasks)
        problems = [{"file": str(p.path), "reason": str(getattr(p, "message", None) or p)}
                    for p in loaded.problems]
        null_stages: collections.Counter[str] = collections.Counter()
        honest: dict[str, str] = {}
        details = []
        for task in tasks:
            zeros = canary_sources(task).get("zeros")
            v = evaluate(task, zeros, target, config) if zeros else None
            stage = v.stage.value if v else "no contract"
            null_stages[stage] += 1
            if v is not None and stage != "correctness":
                details.append({"task": task.name, "stage": stage, "message": v.message[:240]})
            stem = Path(task.source_path).stem
            if stem in ELEMENTWISE:
                source = elementwise_kernel(task, ELEMENTWISE[stem])
                if source:
                    hv = evaluate(task, source, target, config)
                    honest[stem] = hv.stage.value + ("" if hv.ok else f": {hv.message[:160]}")
        levels.append({
            "dir": str(directory), "files": len(tasks) + len(problems), "loaded": len(tasks),
            "rejected": problems, "null_kernel_verdicts": dict(null_stages), "unexpected": details,
            "honest_elementwise": honest, "seconds": round(time.perf_counter() - t0, 1),
        })
    report["levels"] = levels
    if ns.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"$ {report['command']}")
    print("dir | files | loaded | null kernel: verdicts by stage | honest elementwise kernels passing | s")
    for lv in levels:
        passing = sum(1 for s in lv["honest_elementwise"].values() if s == "ok")  # type: ignore[union-attr]
        print(f"{lv['dir']} | {lv['files']} | {lv['loaded']} | {lv['null_kernel_verdicts']} | "
              f"{passing}/{len(lv['honest_elementwise'])} | {lv['seconds']}")  # type: ignore[arg-type]
        for r in lv["rejected"]:  # type: ignore[union-attr]
            print(f"  rejected: {r['file']}: {r['reason'][:200]}")
        for d in lv["unexpected"]:  # type: ignore[union-attr]
            print(f"  {d['task']}: {d['stage']}: {d['message']}")
        for k, s in lv["honest_elementwise"].items():  # type: ignore[union-attr]
            if s != "ok":
                print(f"  honest {k}: {s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
