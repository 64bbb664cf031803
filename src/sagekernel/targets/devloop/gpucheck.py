"""The GPU check (scripts/gpu_check.sh): one table of what only an NVIDIA GPU can show.

Sections: the selfcheck of every hand-written Triton and CUDA kernel on the GPU (correct at two
shapes, timed against the reference in the same process); timing sanity (a streaming copy must
reach at least half the memory bandwidth, a deliberately slow kernel must be well below 1x); the
adversarial kernels whose defence is at run time (inputs written, guards broken, caches, stale
outputs, replaced torch functions, threads, tensor subclasses, aliases, and side streams, whose
work must land inside the timed window). Sections stop when the time budget runs out.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sagekernel.candidate import Candidate
from sagekernel.targets import get_target
from sagekernel.targets.devloop import evidence, selfcheck
from sagekernel.targets.devloop.direct import build_request, run_runtime
from sagekernel.tasks.loader import load_task
from sagekernel.tasks.task import Task

ROOT = Path(__file__).resolve().parents[4]
SCRIPTS = ROOT / "scripts" / "gpu_check"
SUITE = ROOT / "src" / "sagekernel" / "tasks" / "suite"
TRITON_ADV = ROOT / "tests" / "targets_triton" / "adversarial"
CUDA_ADV = ROOT / "tests" / "targets_cuda" / "adversarial"
#: HBM bandwidth by GPU name, GB/s (vendor figures); the copy must reach half of it.
PEAK_GBPS = {"H200": 4800.0, "H100": 3350.0, "A100": 2039.0, "L40": 864.0, "A10": 600.0}


@dataclass
class Check:
    section: str
    name: str
    result: str  # PASS | FAIL | SKIP
    detail: str


def _bench(target: str, task: Task, kernel: Path, sizes: dict[str, int], calls: int = 40) -> tuple[Any, str]:
    """(selfcheck-style row values, error) for one kernel timed against the reference."""
    tgt = get_target(target)
    cand = Candidate.single(tgt.files(task)[0].path, kernel.read_text())
    with tempfile.TemporaryDirectory() as tmp:
        built = tgt.build(cand, task, Path(tmp), device="cuda", sandbox_kind="auto", timeout_s=180)
        if not built.ok:
            return None, built.message.splitlines()[0]
        data, meta = selfcheck.artifact_of(target, built)
    req = build_request(
        task,
        data,
        meta,
        sizes=sizes,
        seeds=(1, 2),
        key=selfcheck.ARTIFACT_KEY[target],
        launcher_abi=target == "cuda",
        reference=True,
        rounds=selfcheck.timed_rounds(calls),
        warmup=5,
    )
    frames, _, err = run_runtime(selfcheck.RUNTIMES[target], "cuda", req, timeout_s=240)
    verdict = selfcheck.check_outputs(task, frames, req, sizes)
    cand_ms, ref_ms, wall = selfcheck.timing_of(frames)
    if cand_ms is None:
        return None, f"{verdict}; no timing ({err.strip().splitlines()[-1][:120] if err.strip() else ''})"
    return (cand_ms, ref_ms, wall, verdict), ""


def sanity(checks: list[Check], gpu_name: str) -> None:
    copy_task = load_task(SCRIPTS / "copy_large.py")
    n = copy_task.sizes["N"]
    peak = next((v for k, v in PEAK_GBPS.items() if k in gpu_name), None)
    for target, kernel in (("triton", "copy_large.triton.py"), ("cuda", "copy_large.cuda.cu")):
        got, err = _bench(target, copy_task, SCRIPTS / kernel, copy_task.sizes)
        if got is None:
            checks.append(Check("timing sanity", f"{target} copy 256 MiB", "FAIL", err))
            continue
        cand_ms, ref_ms, wall, verdict = got
        gbps = 2 * n * 4 / (cand_ms * 1e6)
        ok = verdict == "ok" and (peak is None or gbps >= 0.5 * peak)
        checks.append(
            Check(
                "timing sanity",
                f"{target} copy 256 MiB",
                "PASS" if ok else "FAIL",
                f"{gbps:.0f} GB/s ({'peak ' + str(int(peak)) if peak else 'peak unknown'}), "
                f"{cand_ms:.3f} ms vs torch clone {ref_ms:.3f} ms, wall/event {wall:.2f}, {verdict}",
            )
        )
    softmax = load_task(SUITE / "level2" / "softmax.py")
    for target, kernel in (("triton", "slow_softmax.triton.py"), ("cuda", "slow_softmax.cuda.cu")):
        got, err = _bench(target, softmax, SCRIPTS / kernel, softmax.sizes, calls=20)
        if got is None:
            checks.append(Check("timing sanity", f"{target} slow softmax", "FAIL", err))
            continue
        cand_ms, ref_ms, _, verdict = got
        speedup = ref_ms / cand_ms
        ok = verdict == "ok" and speedup < 0.5
        checks.append(
            Check(
                "timing sanity",
                f"{target} slow softmax",
                "PASS" if ok else "FAIL",
                f"speedup {speedup:.3f}x (must be < 0.5x), {cand_ms:.3f} ms vs {ref_ms:.3f} ms, {verdict}",
            )
        )


def _expect(path: Path) -> list[str]:
    m = re.search(r"EXPECT: (.*)", path.read_text())
    text = m.group(1) if m else ""
    for part in text.replace('"""', "").split(";"):
        kind, _, rest = part.strip().partition(" ")
        if kind == "runtime":
            return [
                r.strip().split(" ")[0] for r in rest.split(",") if r.strip().split(" ")[0] in evidence.CHECKS
            ]
    return []


def _run_adversarial(target: str, path: Path, task: Task, sizes: dict[str, int]) -> tuple[list, Any]:
    tgt = get_target(target)
    cand = Candidate.single(tgt.files(task)[0].path, path.read_text())
    with tempfile.TemporaryDirectory() as tmp:
        if target == "cuda":  # the lint is skipped on purpose: the runtime defence is what is checked
            from sagekernel.targets.cuda import build as cuda_build

            built = cuda_build.build(cand.main, Path(tmp))
            if not built.ok:
                raise RuntimeError(built.message.splitlines()[0])
            data, meta = built.library.read_bytes(), {"symbol": "sage_launch"}  # type: ignore[union-attr]
        else:
            data, meta = cand.main.encode(), {"file": "kernel.py"}
    req = build_request(
        task,
        data,
        meta,
        sizes=sizes,
        seeds=(5, 6),
        key=selfcheck.ARTIFACT_KEY[target],
        launcher_abi=target == "cuda",
        warmup=2,
        rounds=[{"calls": [0, 1, 0, 1], "return": "all"}],
    )
    frames, _, _ = run_runtime(selfcheck.RUNTIMES[target], "cuda", req, timeout_s=180)
    return frames, req


def _median_ns(frames: list) -> float:
    ns = [f["ns"] for f, _ in frames if f["kind"] == "done" and f.get("ns")]
    return statistics.median(ns) if ns else 0.0


def adversarial(checks: list[Check]) -> None:
    softmax = load_task(SUITE / "level2" / "softmax.py")
    small = {"B": 64, "D": 256}
    for path in sorted(TRITON_ADV.glob("*.py")):
        wanted = _expect(path)
        if not wanted:
            continue
        try:
            frames, req = _run_adversarial("triton", path, softmax, small)
            missing = [c for c in wanted if not evidence.present(c, frames, softmax, req, small)]
        except Exception as exc:
            checks.append(Check("adversarial (triton)", path.stem, "FAIL", f"{type(exc).__name__}: {exc}"))
            continue
        checks.append(
            Check(
                "adversarial (triton)",
                path.stem,
                "FAIL" if missing else "PASS",
                f"missing evidence: {missing}" if missing else f"evidence: {', '.join(wanted)}",
            )
        )
    big = {"B": 2048, "D": 2048}
    honest, _ = _run_adversarial("triton", SUITE / "level2" / "softmax.triton.py", softmax, big)
    side, _ = _run_adversarial("triton", TRITON_ADV / "side_stream.py", softmax, big)
    h, s = _median_ns(honest), _median_ns(side)
    checks.append(
        Check(
            "adversarial (triton)",
            "side_stream (timed)",
            "PASS" if h and s >= 0.5 * h else "FAIL",
            f"side-stream event time {s / 1e3:.1f} us vs same kernel on the given stream "
            f"{h / 1e3:.1f} us (the device-wide synchronise puts side work inside the window)",
        )
    )
    absk = load_task(SUITE / "level1" / "abs.py")
    for name in ("writes_inputs", "out_of_bounds_write"):
        path = CUDA_ADV / f"{name}.cu"
        try:
            frames, req = _run_adversarial("cuda", path, absk, {"B": 64, "D": 1000})
            wanted = _expect(path)
            missing = [c for c in wanted if not evidence.present(c, frames, absk, req, {"B": 64, "D": 1000})]
            checks.append(
                Check(
                    "adversarial (cuda)",
                    name,
                    "FAIL" if missing else "PASS",
                    f"missing evidence: {missing}" if missing else f"evidence: {', '.join(wanted)}",
                )
            )
        except Exception as exc:
            checks.append(Check("adversarial (cuda)", name, "FAIL", f"{type(exc).__name__}: {exc}"))
    try:
        big_abs = {"B": 4096, "D": 4096}
        honest, _ = _run_adversarial("cuda", SUITE / "level1" / "abs.cuda.cu", absk, big_abs)
        side, _ = _run_adversarial("cuda", CUDA_ADV / "side_stream.cu", absk, big_abs)
        h, s = _median_ns(honest), _median_ns(side)
        checks.append(
            Check(
                "adversarial (cuda)",
                "side_stream (timed)",
                "PASS" if h and s >= 0.5 * h else "FAIL",
                f"side-stream event time {s / 1e3:.1f} us vs abs on the given stream {h / 1e3:.1f} us",
            )
        )
        frames, req = _run_adversarial("cuda", CUDA_ADV / "pointer_cache.cu", absk, {"B": 64, "D": 1000})
        stale = evidence.present("stale_outputs", frames, absk, req, {"B": 64, "D": 1000})
        # pointer_cache computes relu, not abs: with fresh buffers every call it must compute every
        # time, so its outputs are relu's (wrong for abs) and never the sentinel.
        unwritten = any(b"\xff\xff\xff\xff" in p for f, p in frames if f["kind"] == "outputs")
        checks.append(
            Check(
                "adversarial (cuda)",
                "pointer_cache",
                "PASS" if stale and not unwritten else "FAIL",
                "fresh buffers every call: the cache never hit (every output written)"
                if not unwritten
                else "some output kept the sentinel: the cache hit",
            )
        )
    except Exception as exc:
        checks.append(
            Check("adversarial (cuda)", "side_stream/pointer_cache", "FAIL", f"{type(exc).__name__}: {exc}")
        )


def kernels(checks: list[Check], target: str, deadline: float) -> None:
    for task in selfcheck.tasks_for(target):
        if time.monotonic() > deadline:
            checks.append(Check(f"selfcheck ({target})", task.name, "SKIP", "time budget spent"))
            continue
        row = selfcheck.check_task(target, "cuda", task, timed_calls=100)
        detail = (
            f"{_f(row.candidate_ms)} ms vs {_f(row.reference_ms)} ms, speedup {_f(row.speedup)}x, "
            f"wall/event {_f(row.wall_over_event)}"
        )
        if not row.ok:
            detail = f"lint {row.lint}; build {row.build}; correct {row.correct}"
        checks.append(Check(f"selfcheck ({target})", task.name, "PASS" if row.ok else "FAIL", detail))


def _f(v: float | None) -> str:
    return "-" if v is None else f"{v:.4g}"


def environment() -> str:
    import torch

    lines = [f"torch {torch.__version__}, cuda {torch.version.cuda}, device {torch.cuda.get_device_name(0)}"]
    try:
        import triton

        lines.append(f"triton {triton.__version__}")
    except ImportError:
        lines.append("triton not installed")
    try:
        lines.append(
            subprocess.run(["nvcc", "--version"], capture_output=True, text=True, timeout=20)
            .stdout.strip()
            .splitlines()[-1]
        )
    except (OSError, subprocess.TimeoutExpired, IndexError):
        lines.append("nvcc not found")
    return "; ".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="GPU check: selfcheck, timing sanity, adversarial kernels")
    parser.add_argument("--budget-s", type=float, default=420.0)
    parser.add_argument("--sections", default="sanity,adversarial,triton,cuda")
    parser.add_argument("--json", action="store_true")
    opts = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print(
            "gpu_check: no CUDA GPU (torch.cuda.is_available() is False); nothing was checked",
            file=sys.stderr,
        )
        return 2
    t0 = time.monotonic()
    deadline = t0 + opts.budget_s
    checks: list[Check] = []
    env = environment()
    sections = opts.sections.split(",")
    if "sanity" in sections:
        sanity(checks, torch.cuda.get_device_name(0))
    if "adversarial" in sections:
        adversarial(checks)
    for target in ("triton", "cuda"):
        if target in sections:
            kernels(checks, target, deadline)
    elapsed = time.monotonic() - t0
    failed = [c for c in checks if c.result == "FAIL"]
    if opts.json:
        print(
            json.dumps(
                {
                    "environment": env,
                    "seconds": round(elapsed, 1),
                    "checks": [asdict(c) for c in checks],
                    "failed": len(failed),
                },
                indent=1,
            )
        )
    else:
        print(f"GPU check -- {env}")
        width = max((len(c.name) for c in checks), default=10)
        section = ""
        for c in checks:
            if c.section != section:
                section = c.section
                print(f"\n== {section}")
            print(f"  {c.name:<{width}}  {c.result:<4}  {c.detail}")
        print(
            f"\n{len(checks) - len(failed)}/{len(checks)} checks passed or skipped, {len(failed)} failed, "
            f"{elapsed:.0f} s"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
