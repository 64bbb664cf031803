"""Triton on a real GPU (marked gpu: excluded from the default run, skipped without a CUDA device).
scripts/gpu_check.sh runs the full set; these are the pytest entry points for the same paths."""

from __future__ import annotations

import pytest

from sagekernel.targets.devloop import gpucheck, selfcheck

torch = pytest.importorskip("torch")
pytest.importorskip("triton")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU (torch.cuda.is_available())"),
]


@pytest.mark.parametrize("name", ["softmax", "rms_norm", "reduce_sum", "arange"])
def test_kernel_correct_and_timed_on_cuda(name: str) -> None:
    (task,) = selfcheck.tasks_for("triton", [name])
    row = selfcheck.check_task("triton", "cuda", task, timed_calls=40)
    assert row.ok, row
    assert row.candidate_ms and row.reference_ms and row.candidate_ms > 0


def test_gpu_check_sections_pass() -> None:
    assert gpucheck.main(["--sections", "sanity,adversarial"]) == 0
