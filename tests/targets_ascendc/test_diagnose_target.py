"""The Ascend C diagnostics (audit D1): which tools run, what reaches the model, and the parts that
run without CANN (a host-built stand-in for the CPU twin library exercises the probe round trip)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from sagekernel.harness.diagnose import diagnose as harness_diagnose
from sagekernel.sandbox import best_kind
from sagekernel.targets.ascendc import diagnose as diag
from sagekernel.targets.ascendc.config import AscendConfig
from sagekernel.targets.ascendc.target import AscendCTarget
from sagekernel.targets.diagnostics import DiagnosticProbe, ProbeTensor

from .conftest import edit, reference_candidate

TWIN_PRINTS = r"""
#include <stdint.h>
#include <stdio.h>
#include <math.h>
int sage_twin_run(uint8_t* const* buffers, const uint64_t* nbytes, const int64_t* sizes,
                  const double* attrs) {
    (void)attrs;
    const float* x = (const float*)buffers[0];
    float* y = (float*)buffers[1];
    printf("block 0 len %lld\n", (long long)(sizes[0] * sizes[1]));  /* what AscendC::printf shows */
    for (uint64_t i = 0; i < nbytes[1] / 4; ++i) y[i] = fabsf(x[i]);
    return 0;
}
"""


def test_tools_per_device():
    twin = diag.tool_runs("twin", ["py", "child"], "/w", profile=True)
    assert [t for t, _ in twin] == ["printf / DumpTensor output (CPU twin)"]
    npu = diag.tool_runs("npu", ["py", "child"], "/w", profile=False)
    assert [t for t, _ in npu] == [
        "printf / DumpTensor output and CANN log",
        "mssanitizer memcheck",
        "mssanitizer racecheck",
    ]
    assert npu[1][1][1:3] == ["--tool=memcheck", "--leak-check=no"] and npu[2][1][-2:] == ["py", "child"]
    prof = diag.tool_runs("npu", ["py", "child"], "/w", profile=True)
    assert prof[-1][0] == "msprof op" and prof[-1][1][1:3] == ["op", "--output=/w/msprof"]


def test_sanitizer_report_is_trimmed_to_findings_with_the_fault_line():
    log = "\n".join(
        ["[mssanitizer] start", "noise"] * 5
        + [
            "====== ERROR: illegal read of size 32",
            "======    at op_kernel/abs_custom.cpp:41",
            "summary: 1 error",
        ]
    )
    section, fault = diag.summarise("mssanitizer memcheck", log)
    assert "illegal read" in section.text and "noise" not in section.text
    assert fault is not None and (fault.path, fault.line) == ("op_kernel/abs_custom.cpp", 41)


def test_without_cann_the_report_says_so_and_carries_the_static_side(tasks):
    """On this machine (no CANN): nothing is built; the model still gets the static findings and
    the tiling function's plan on every evaluation shape."""
    target = AscendCTarget(AscendConfig(template="kernel-only"))
    bad = edit(reference_candidate("abs"), "op_kernel/abs_custom.cpp", "Abs(y, x,", "Abs(y, x ,")
    report = harness_diagnose(tasks["abs"], bad, target)
    text = report.text() or ""
    assert "not run here" in text and "npu is not available here" in text
    assert "tiling at {'B': 64, 'D': 1000}: usedCoreNum=" in text or "tiling function not run" in text


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")
def test_probe_round_trip_captures_prints_and_outputs(tmp_path, tasks):
    lib = tmp_path / "twin.so"
    (tmp_path / "twin.c").write_text(TWIN_PRINTS)
    subprocess.run(["gcc", "-shared", "-fPIC", str(tmp_path / "twin.c"), "-o", str(lib), "-lm"], check=True)
    x = [-1.5, 2.0, -3.25, 4.0, -0.5, 6.0]
    import struct

    probe = DiagnosticProbe(
        "default",
        {"B": 2, "D": 3},
        [
            ProbeTensor("x", "float32", (2, 3), struct.pack("<6f", *x), "input"),
            ProbeTensor("out", "float32", (2, 3), b"\xff" * 24, "output"),
        ],
        [("B", "i64", 2), ("D", "i64", 3)],
    )
    probe_dir = tmp_path / "probe"
    diag.write_probe(probe, probe_dir)
    runs = diag.tool_runs("twin", diag.child_argv("twin", str(lib), probe_dir), str(tmp_path), profile=False)
    binds = [(str(tmp_path), str(tmp_path)), (str(diag.CHILD.parent), str(diag.CHILD.parent))]
    found = diag.run_tools(runs, binds, {}, [], probe_dir, tmp_path / "w", best_kind("auto"), 120)
    assert found.ran, found.sections
    assert "block 0 len 6" in found.sections[0].text
    assert found.outputs is not None and struct.unpack("<6f", found.outputs[0]) == tuple(abs(v) for v in x)


def test_child_file_is_where_the_target_binds_it():
    assert diag.CHILD.is_file() and diag.CHILD.parent == Path(diag.__file__).parent / "runtime"
