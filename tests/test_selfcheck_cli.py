"""`sage selfcheck` on a suite with a broken hand-written kernel: the command fails, and the failing
row is the last thing it prints (CI shows a log's tail)."""

from __future__ import annotations

import shutil
from pathlib import Path

from typer.testing import CliRunner

from sagekernel.cli import app

SUITE = Path(__file__).resolve().parents[1] / "src/sagekernel/tasks/suite/level1"


def test_a_failing_reference_is_listed_at_the_end(tmp_path: Path) -> None:
    shutil.copy(SUITE / "abs.py", tmp_path / "abs.py")
    # a "hand-written" kernel that copies instead of taking the absolute value
    (tmp_path / "abs.cpu.c").write_text(
        "#include <stdint.h>\n"
        "void sage_kernel(const float* restrict x, float* restrict out, int64_t B, int64_t D) {\n"
        "    for (int64_t i = 0; i < B * D; ++i) out[i] = x[i];\n}\n"
    )
    result = CliRunner().invoke(app, ["selfcheck", "--suite", str(tmp_path), "--skip-timing"])
    assert result.exit_code == 1, result.output
    tail = result.output.strip().splitlines()[-3:]
    failed = "FAILED abs reference (expected pass, stage correctness)"
    assert any(line.startswith(failed) for line in tail), tail
    assert tail[-1] == "3 of 4 checks as expected"
