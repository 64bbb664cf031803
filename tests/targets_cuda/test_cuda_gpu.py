"""CUDA kernels on a real GPU (marked gpu: excluded from the default run, skipped without one)."""

from __future__ import annotations

import pytest

from sagekernel.targets.cuda.build import nvcc_path
from sagekernel.targets.devloop import selfcheck

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU (torch.cuda.is_available())"),
    pytest.mark.skipif(nvcc_path() is None, reason="nvcc is not installed"),
]


@pytest.mark.parametrize("name", ["abs", "softmax", "layer_norm", "eye"])
def test_kernel_correct_and_timed_on_cuda(name: str) -> None:
    (task,) = selfcheck.tasks_for("cuda", [name])
    row = selfcheck.check_task("cuda", "cuda", task, timed_calls=40)
    assert row.ok, row
    assert row.candidate_ms and row.reference_ms
