"""Diagnostics run in every sandbox layer, not only under bubblewrap: without it the debug build
once failed with "cc1: diag_main.c: No such file or directory" (the weaker layers start the command
in a private temporary folder, and only /box paths are rewritten to the host folder)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sagekernel import sandbox
from sagekernel.candidate import Candidate
from sagekernel.harness.config import HarnessConfig
from sagekernel.harness.diagnose import diagnose
from sagekernel.targets import get_target
from sagekernel.tasks.loader import load_task

DOUBLE = load_task(Path(__file__).parent / "e2e_tasks" / "e2e_double.py")
OVERFLOW = Candidate.single(
    "kernel.c",
    (
        "#include <stdint.h>\n#include <stdio.h>\n"
        "void sage_kernel(const float* restrict x, float* restrict out, int64_t N) {\n"
        '  printf("rows %lld\\n", (long long)N);\n'
        "  for (int64_t i = 0; i <= N; ++i)\n"
        "    out[i] = 2.0f * x[i];\n}\n"
    ),
)


def _usable(kind: str) -> bool:
    return {"bwrap": sandbox.bwrap_works, "unshare": sandbox.unshare_net_works}.get(kind, lambda: True)()


@pytest.mark.parametrize("kind", sandbox.SANDBOX_KINDS)
def test_diagnostics_run_in_every_sandbox_layer(kind: str) -> None:
    if not _usable(kind):
        pytest.skip(f"the {kind} layer is not available here")
    report = diagnose(DOUBLE, OVERFLOW, get_target("cpu"), HarnessConfig(sandbox=kind, skip_timing=True))
    d = report.diagnostics
    text = report.text() or ""
    assert "No such file" not in text, text
    assert d is not None and d.fault is not None, text
    assert (d.fault.path, d.fault.line, d.fault_kind) == ("kernel.c", 6, "heap-buffer-overflow")
    assert "rows 1531" in text
