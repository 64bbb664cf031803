"""scripts/gpu_check.sh without a GPU must fail clearly (exit 2, a reason) and check nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_gpu_check_refuses_without_a_gpu() -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the script would run the check")
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu_check.sh")], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2
    assert "nothing was checked" in done.stderr


def test_gpu_check_script_refuses_without_a_gpu() -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_check.py")], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2 and "nothing was checked" in done.stderr
