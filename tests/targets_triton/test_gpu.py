"""Triton on a real GPU through the production path (marked gpu: excluded from the default run,
skipped without a CUDA device). scripts/gpu_check.sh runs the full set."""

from __future__ import annotations

from pathlib import Path

import pytest

from sagekernel.harness.config import HarnessConfig
from sagekernel.harness.evaluate import evaluate
from sagekernel.targets import get_target
from sagekernel.tasks.loader import load_task

torch = pytest.importorskip("torch")
pytest.importorskip("triton")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU (torch.cuda.is_available())"),
]
SUITE = Path(__file__).resolve().parents[2] / "src" / "sagekernel" / "tasks" / "suite"
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", ["level2/softmax", "level2/rms_norm", "level2/reduce_sum", "level1/arange"])
def test_kernel_correct_and_timed_on_cuda(name: str) -> None:
    task = load_task(SUITE / f"{name}.py")
    source = (SUITE / f"{name}.triton.py").read_text()
    verdict = evaluate(task, source, get_target("triton"), HarnessConfig(iters=40, rounds=4), device="cuda")
    assert verdict.ok, verdict.message
    assert verdict.candidate_ms and verdict.reference_ms and verdict.candidate_ms > 0


def test_gpu_check_sections_pass() -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_check.py"), "--sections",
                           "sanity,adversarial"], timeout=1800)
    assert done.returncode == 0
