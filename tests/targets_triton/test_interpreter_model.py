"""The Triton runtime's model of a GPU on the interpreter (targets/triton/interpreter_model.py), in a
fresh process: TF32 `tl.dot` rounds float32 operands (the GPU default), `ieee` stays exact, fp8
products (accumulated imprecisely on sm_90) are refused, and a kernel body runs with the builtin
allow-list (a `hasattr` branch never runs). The same paths run end to end through
`harness.evaluate` in test_runtime.py and test_adversarial.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")
HERE = Path(__file__).resolve().parent
TRITON_DIR = HERE.parents[1] / "src" / "sagekernel" / "targets" / "triton"


def test_precision_and_builtins_on_the_interpreter() -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(HERE / "scripts" / "interpreter_model_checks.py"),
            str(TRITON_DIR),
            str(HERE / "scripts" / "interpreter_model_kernels.py"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["tf32"] == 16.0  # 16 x (1 + 2^-12) with the operand rounded to 1.0
    assert got["ieee"] == pytest.approx(16 * (1 + 2.0**-12), rel=0, abs=1e-6)
    assert "not modelled by the interpreter" in got["fp8"]
    assert got["hasattr"] != "ran" and "hasattr" in got["hasattr"]
    assert any("TF32" in n for n in got["notes"])
