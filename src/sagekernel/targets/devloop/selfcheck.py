"""Self-check of a device target's hand-written kernels, through its own lint, build and runtime.

    python -m sagekernel.targets.devloop.selfcheck --target triton --device interpreter [--json]
    python -m sagekernel.targets.devloop.selfcheck --target cuda --device cuda [--only softmax,abs]

For every built-in task with a `<stem>.<target>.*` kernel: the lint must be clean, the build must
pass (Triton: the sm_90 compile gate; CUDA: nvcc and the symbol checks), and the runtime's outputs
must match the task's torch reference at the task's tolerance, at the default sizes and at the
first variant. On a timed device the default-size run also times the kernel against the reference
in the same process (5 warm-up, 100 timed calls, interleaved rounds) and reports medians.

This drives the runtime directly (devloop/direct.py), not through the harness's sandbox: it is a
check of the kernels and the runtimes, used by the tests and scripts/gpu_check.sh, until
`sage selfcheck --target T` is wired to the harness.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sagekernel.candidate import Candidate
from sagekernel.harness.compare import compare
from sagekernel.targets import get_target
from sagekernel.targets.devloop.direct import Request, build_request, outputs_of, run_runtime
from sagekernel.tasks.inputs import reference_outputs
from sagekernel.tasks.suites import suite_report
from sagekernel.tasks.task import Task

TARGETS = Path(__file__).resolve().parent.parent
RUNTIMES = {"triton": TARGETS / "triton" / "runtime.py", "cuda": TARGETS / "cuda" / "runtime.py"}
ARTIFACT_KEY = {"triton": "module", "cuda": "lib"}


@dataclass
class Row:
    task: str
    lint: str = "-"
    build: str = "-"
    correct: str = "-"
    candidate_ms: float | None = None
    reference_ms: float | None = None
    speedup: float | None = None
    wall_over_event: float | None = None
    seconds: float = 0.0
    note: str = ""
    shapes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.lint == "ok" and self.build == "ok" and self.correct == "ok"


def artifact_of(target: str, built: Any) -> tuple[bytes, dict[str, Any]]:
    if target == "triton":
        return built.artifacts["module"].read_bytes(), {"file": "kernel.py"}
    return built.library.read_bytes(), {"symbol": "sage_launch"}


def check_outputs(task: Task, frames: list, req: Request, sizes: dict[str, int]) -> str:
    """ "ok" or why not (the first failing call's mismatch, an error frame, missing outputs)."""
    for f, _ in frames:
        if f["kind"] in ("load_error", "call_error"):
            return f"{f['kind']}: {f['error'].strip().splitlines()[-1][:200]}"
        if f["kind"] == "done" and f.get("status"):
            return f"launcher returned status {f['status']}"
        if f["kind"] == "done" and not (all(f["guards"]) and all(c == -1 for c in f["inputs_changed"])):
            return f"guards {f['guards']} inputs_changed {f['inputs_changed']}"
    decoded = outputs_of(frames, task, sizes)
    if not decoded:
        return "no outputs came back: " + ", ".join(f["kind"] for f, _ in frames)
    for call, tensors in decoded.items():
        s = next(f["set"] for f, _ in frames if f["kind"] == "outputs" and f["call"] == call)
        expected = reference_outputs(task, req.inputs[s], sizes)
        for spec, got, ref in zip(task.outputs, tensors, expected, strict=True):
            bad = compare(got, ref, task.atol, task.rtol, spec.dtype)
            if bad is not None:
                return f"{spec.name} at {sizes}: {bad}"
    return "ok"


def timing_of(frames: list) -> tuple[float | None, float | None, float | None]:
    cand = [f["ns"] for f, _ in frames if f["kind"] == "done" and f.get("ns") is not None]
    ref = [f["ns"] for f, _ in frames if f["kind"] == "ref_done" and f.get("ns") is not None]
    wall = [f["wall_ns"] / f["ns"] for f, _ in frames if f["kind"] == "done" and f.get("ns")]
    if not cand:
        return None, None, None
    c = statistics.median(cand) / 1e6
    r = statistics.median(ref) / 1e6 if ref else None
    return c, r, statistics.median(wall) if wall else None


def timed_rounds(calls: int) -> list[dict[str, Any]]:
    half = max(1, calls // 2)
    return [
        {"calls": [i % 2 for i in range(half)], "return": 1},
        {"calls": [(i + 1) % 2 for i in range(half)], "return": 1},
    ]


def check_task(
    target_name: str, device: str, task: Task, *, timed_calls: int = 100, runtime_timeout_s: float = 300.0
) -> Row:
    t0 = time.perf_counter()
    row = Row(task.name)
    target = get_target(target_name)
    path = task.reference_kernels[target_name]
    cand = Candidate.single(target.files(task)[0].path, path.read_text())
    findings = target.lint(cand, task)
    row.lint = "ok" if not findings else f"{findings[0].rule} (line {findings[0].line})"
    with tempfile.TemporaryDirectory(prefix=f"sage-selfcheck-{task.name}-") as tmp:
        built = target.build(cand, task, Path(tmp), device=device, sandbox_kind="auto", timeout_s=180)
        row.build = "ok" if built.ok else built.message.splitlines()[0][:200]
        if not built.ok:
            row.seconds = round(time.perf_counter() - t0, 2)
            return row
        data, meta = artifact_of(target_name, built)
    timed = next(d for d in target.devices() if d.name == device).timed
    runtime = RUNTIMES[target_name]
    shapes = task.all_shapes()[:2]
    results = []
    for n, sizes in enumerate(shapes):
        with_timing = timed and n == 0
        req = build_request(
            task,
            data,
            meta,
            sizes=sizes,
            seeds=(11, 12),
            key=ARTIFACT_KEY[target_name],
            launcher_abi=target_name == "cuda",
            reference=with_timing,
            rounds=timed_rounds(timed_calls) if with_timing else None,
            warmup=5 if with_timing else 0,
        )
        frames, rc, err = run_runtime(runtime, device, req, timeout_s=runtime_timeout_s)
        verdict = check_outputs(task, frames, req, sizes)
        if verdict != "ok" and rc not in (0, None):
            verdict += f" (exit {rc}: {err.strip().splitlines()[-1][:160] if err.strip() else ''})"
        results.append(verdict)
        row.shapes.append(",".join(f"{k}={v}" for k, v in sizes.items()))
        if with_timing:
            row.candidate_ms, row.reference_ms, row.wall_over_event = timing_of(frames)
            if row.candidate_ms and row.reference_ms:
                row.speedup = round(row.reference_ms / row.candidate_ms, 3)
    row.correct = next((r for r in results if r != "ok"), "ok")
    if not timed:
        row.note = "not timed (emulated)"
    row.seconds = round(time.perf_counter() - t0, 2)
    return row


def tasks_for(target: str, only: list[str] | None = None) -> list[Task]:
    tasks = [t for t in suite_report("builtin").tasks if target in t.reference_kernels]
    return [t for t in tasks if not only or t.name in only]


def run(
    target: str, device: str, *, only: list[str] | None = None, jobs: int = 1, timed_calls: int = 100
) -> list[Row]:
    tasks = tasks_for(target, only)
    timed = next(d for d in get_target(target).devices() if d.name == device).timed
    if timed or jobs <= 1:  # timing runs one at a time: concurrent kernels would share the device
        return [check_task(target, device, t, timed_calls=timed_calls) for t in tasks]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(lambda t: check_task(target, device, t, timed_calls=timed_calls), tasks))


def _fmt(v: float | None, digits: int = 4) -> str:
    return "-" if v is None else f"{v:.{digits}g}"


def table(rows: list[Row], title: str) -> str:
    head = (
        f"{'task':<16} {'lint':<6} {'build':<6} {'correct':<8} {'cand_ms':>9} {'ref_ms':>9} {'speedup':>8} "
        f"{'wall/ev':>7} {'s':>6}  note"
    )
    lines = [title, head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r.task:<16} {r.lint[:6]:<6} {r.build[:6]:<6} {r.correct[:8]:<8} {_fmt(r.candidate_ms):>9} "
            f"{_fmt(r.reference_ms):>9} {_fmt(r.speedup, 3):>8} {_fmt(r.wall_over_event, 3):>7} "
            f"{r.seconds:>6.1f}  {r.note}"
        )
        for what, text in (("lint", r.lint), ("build", r.build), ("correct", r.correct)):
            if text not in ("ok", "-"):
                lines.append(f"    {what}: {text}")
    passed = sum(r.ok for r in rows)
    lines.append(f"{passed}/{len(rows)} passed")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", required=True, choices=sorted(RUNTIMES))
    parser.add_argument("--device", required=True)
    parser.add_argument("--only", default="", help="comma-separated task names")
    parser.add_argument("--jobs", type=int, default=1, help="parallel tasks on untimed devices")
    parser.add_argument("--timed-calls", type=int, default=100)
    parser.add_argument("--json", action="store_true")
    opts = parser.parse_args(argv)
    ok, reason = get_target(opts.target).available(opts.device)
    if not ok:
        print(f"selfcheck: {opts.target} on {opts.device} is not available here: {reason}", file=sys.stderr)
        return 2
    rows = run(
        opts.target,
        opts.device,
        only=[s for s in opts.only.split(",") if s] or None,
        jobs=opts.jobs,
        timed_calls=opts.timed_calls,
    )
    if opts.json:
        print(
            json.dumps(
                {
                    "target": opts.target,
                    "device": opts.device,
                    "rows": [asdict(r) for r in rows],
                    "passed": sum(r.ok for r in rows),
                    "total": len(rows),
                },
                indent=1,
            )
        )
    else:
        print(table(rows, f"selfcheck: {opts.target} on {opts.device}"))
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
