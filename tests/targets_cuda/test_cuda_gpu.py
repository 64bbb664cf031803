"""CUDA kernels on a real GPU through the production path (marked gpu: excluded from the default
run, skipped without one)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sagekernel.harness.config import HarnessConfig
from sagekernel.harness.evaluate import evaluate
from sagekernel.targets import get_target
from sagekernel.targets.cuda.build import nvcc_path
from sagekernel.tasks.loader import load_task

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU (torch.cuda.is_available())"),
    pytest.mark.skipif(nvcc_path() is None, reason="nvcc is not installed"),
]
ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "src" / "sagekernel" / "tasks" / "suite"


@pytest.mark.parametrize("name", ["level1/abs", "level2/softmax", "level2/layer_norm", "level1/eye"])
def test_kernel_correct_and_timed_on_cuda(name: str) -> None:
    task = load_task(SUITE / f"{name}.py")
    source = (SUITE / f"{name}.cuda.cu").read_text()
    verdict = evaluate(task, source, get_target("cuda"), HarnessConfig(iters=40, rounds=4), device="cuda")
    assert verdict.ok, verdict.message
    assert verdict.candidate_ms and verdict.reference_ms


@pytest.mark.parametrize("path", sorted((Path(__file__).parent / "adversarial").glob("*.cu")),
                         ids=lambda p: p.stem)
def test_adversarial_never_counts_as_success(path: Path) -> None:
    """The run-time defences alone (static checks off) keep each hack from succeeding."""
    task = load_task(SUITE / "level2" / "softmax.py")
    cfg = HarnessConfig(static_checks=False, iters=20, rounds=4)
    verdict = evaluate(task, path.read_text(), get_target("cuda"), cfg, device="cuda")
    assert not verdict.counts_as_success, (verdict.stage, verdict.message)
