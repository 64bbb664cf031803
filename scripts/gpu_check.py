"""The GPU check (scripts/gpu_check.sh): one table of what only an NVIDIA GPU can show, every row
judged by the production path (`harness.evaluate`), never a side path.

Sections: `sage selfcheck --target triton|cuda --device cuda` (every hand-written kernel correct
and timed against the reference); timing sanity (a streaming copy must reach half the memory
bandwidth, a deliberately slow softmax must stay below 0.5x); the adversarial kernels of
tests/targets_{triton,cuda}/adversarial with the static checks off: the run-time defences alone
must keep every one from counting as a success.

    python scripts/gpu_check.py [--sections sanity,adversarial,triton,cuda] [--json]

Exit status: 0 all passed, 1 a check failed, 2 no GPU (nothing was checked).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts" / "gpu_check"
SUITE = ROOT / "src" / "sagekernel" / "tasks" / "suite"
ADVERSARIAL = {
    "triton": ROOT / "tests" / "targets_triton" / "adversarial",
    "cuda": ROOT / "tests" / "targets_cuda" / "adversarial",
}
#: HBM bandwidth by GPU name, GB/s (vendor figures); the copy must reach half of it.
PEAK_GBPS = {"H200": 4800.0, "H100": 3350.0, "A100": 2039.0, "L40": 864.0, "A10": 600.0}


@dataclass
class Check:
    section: str
    name: str
    result: str  # PASS | FAIL | SKIP
    detail: str


def _evaluate(target: str, task_path: Path, kernel: Path, **config: object) -> object:
    from sagekernel.harness.config import HarnessConfig
    from sagekernel.harness.evaluate import evaluate
    from sagekernel.targets import get_target
    from sagekernel.tasks.loader import load_task

    cfg = HarnessConfig(**config)  # type: ignore[arg-type]
    return evaluate(load_task(task_path), kernel.read_text(), get_target(target), cfg, device="cuda")


def sanity(checks: list[Check], gpu_name: str) -> None:
    peak = next((v for k, v in PEAK_GBPS.items() if k in gpu_name), None)
    n = 64 << 20  # copy_large.py: N float32
    for target, kernel in (("triton", "copy_large.triton.py"), ("cuda", "copy_large.cuda.cu")):
        v = _evaluate(target, SCRIPTS / "copy_large.py", SCRIPTS / kernel, iters=40, rounds=4)
        ms = getattr(v, "candidate_ms", None)
        if not getattr(v, "ok", False) or not ms:
            checks.append(Check("timing sanity", f"{target} copy", "FAIL", getattr(v, "message", "")[:200]))
            continue
        gbps = 2 * n * 4 / (ms * 1e6)
        ok = peak is None or gbps >= 0.5 * peak
        checks.append(
            Check(
                "timing sanity",
                f"{target} copy",
                "PASS" if ok else "FAIL",
                f"{gbps:.0f} GB/s (peak {peak or 'unknown'}), {ms:.3f} ms",
            )
        )
    for target, kernel in (("triton", "slow_softmax.triton.py"), ("cuda", "slow_softmax.cuda.cu")):
        v = _evaluate(target, SUITE / "level2" / "softmax.py", SCRIPTS / kernel, iters=20, rounds=4)
        speedup = getattr(v, "speedup", None)
        ok = bool(getattr(v, "ok", False)) and speedup is not None and speedup < 0.5
        checks.append(
            Check(
                "timing sanity",
                f"{target} slow softmax",
                "PASS" if ok else "FAIL",
                f"speedup {speedup}x (must be < 0.5x); {getattr(v, 'message', '')[:120]}",
            )
        )


def adversarial(checks: list[Check]) -> None:
    softmax = SUITE / "level2" / "softmax.py"
    for target, folder in ADVERSARIAL.items():
        for path in sorted(folder.glob("*.py" if target == "triton" else "*.cu")):
            v = _evaluate(target, softmax, path, static_checks=False, iters=20, rounds=4)
            rejected = not getattr(v, "counts_as_success", False)
            checks.append(
                Check(
                    f"adversarial ({target})",
                    path.stem,
                    "PASS" if rejected else "FAIL",
                    f"{getattr(v, 'stage', '?')}: {getattr(v, 'message', '')[:160]}",
                )
            )


def selfcheck(checks: list[Check], target: str) -> None:
    done = subprocess.run(
        ["sage", "selfcheck", "--target", target, "--device", "cuda"],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    checks.append(
        Check(
            f"selfcheck ({target})",
            "sage selfcheck",
            "PASS" if done.returncode == 0 else "FAIL",
            (done.stdout + done.stderr).strip()[-400:],
        )
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="GPU check through harness.evaluate")
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
    checks: list[Check] = []
    sections = opts.sections.split(",")
    if "sanity" in sections:
        sanity(checks, torch.cuda.get_device_name(0))
    if "adversarial" in sections:
        adversarial(checks)
    for target in ("triton", "cuda"):
        if target in sections:
            selfcheck(checks, target)
    failed = [c for c in checks if c.result == "FAIL"]
    if opts.json:
        print(
            json.dumps(
                {
                    "seconds": round(time.monotonic() - t0, 1),
                    "checks": [asdict(c) for c in checks],
                    "failed": len(failed),
                },
                indent=1,
            )
        )
    else:
        for c in checks:
            print(f"{c.section:<22} {c.name:<28} {c.result:<4} {c.detail}")
        print(f"{len(checks) - len(failed)}/{len(checks)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
