"""Lint time per kernel on the built-in suite's hand-written kernels (C for the CPU target, CUDA),
warm: the best of 5 passes (process CPU time, steadier than wall time on a shared machine), so a
cold start (grammar load) is not counted. The lint runs once per
round per candidate, so this is what a round pays for reading the source.

    PYTHONPATH=src python3 scripts/lint_timing.py
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from sagekernel.targets.cpu.lint import lint_source as cpu_lint
from sagekernel.targets.cuda.lint import lint_source as cuda_lint

SUITE = Path(__file__).resolve().parents[1] / "src" / "sagekernel" / "tasks" / "suite"


def best_of(passes: int, lint: Callable[[str], object], sources: list[str]) -> float:
    """Seconds per kernel: the fastest of `passes` passes over `sources`."""
    best = float("inf")
    for _ in range(passes):
        start = time.process_time()
        for source in sources:
            lint(source)
        best = min(best, time.process_time() - start)
    return best / max(len(sources), 1)


def main() -> None:
    for name, lint, pattern in (("cpu", cpu_lint, "*.c"), ("cuda", cuda_lint, "*.cu")):
        sources = [p.read_text() for p in sorted(SUITE.rglob(pattern))]
        print(f"{name}: {len(sources)} kernels, {1000 * best_of(5, lint, sources):.2f} ms per kernel")


if __name__ == "__main__":
    main()
