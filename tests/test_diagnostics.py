"""Diagnostics (harness/diagnose.py and each target's tools): real debug builds and runs in the
sandbox, the first mismatch located against the reference, and the built-in loop attaching the
report to its feedback after a wrong result."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from sagekernel.candidate import Candidate
from sagekernel.harness.diagnose import diagnose, smallest_shape
from sagekernel.models.scripted import ScriptedModel
from sagekernel.runner.config import RunConfig
from sagekernel.runner.run import run
from sagekernel.targets import get_target
from sagekernel.tasks.loader import load_task

E2E = Path(__file__).parent / "e2e_tasks"
DOUBLE = load_task(E2E / "e2e_double.py")
HEAD = "#include <stdint.h>\n#include <stdio.h>\n"
SIG = "void sage_kernel(const float* restrict x, float* restrict out, int64_t N) {\n"


def cpu(body: str) -> Candidate:
    return Candidate.single("kernel.c", HEAD + SIG + body + "}\n")


def test_the_probe_is_the_smallest_shape() -> None:
    assert smallest_shape(DOUBLE) == {"N": 1531}


def test_a_heap_overflow_names_the_line_the_buffer_and_keeps_the_printf_output() -> None:
    report = diagnose(
        DOUBLE,
        cpu(
            '  printf("rows %lld\\n", (long long)N);\n'
            "  for (int64_t i = 0; i <= N; ++i)\n"
            "    out[i] = 2.0f * x[i];\n"
        ),
        get_target("cpu"),
    )
    d = report.diagnostics
    assert d is not None and d.fault is not None
    assert (d.fault.path, d.fault.line, d.fault_kind) == ("kernel.c", 6, "heap-buffer-overflow")
    assert d.fault_buffer == "x"  # x[N] is read before out[N] is written
    text = report.text() or ""
    assert "FAULT: heap-buffer-overflow at kernel.c line 6" in text and "rows 1531" in text
    assert report.mismatch is None and not d.ran


def test_undefined_behaviour_names_its_line() -> None:
    body = (
        "  int shift = (int)N;\n"
        "  for (int64_t i = 0; i < N; ++i) out[i] = 2.0f * x[i];\n"
        "  out[0] = (float)(1 << shift);\n"
    )
    d = diagnose(DOUBLE, cpu(body), get_target("cpu")).diagnostics
    assert d is not None and d.fault is not None and d.fault.line == 6
    assert d.fault_kind.startswith("undefined behaviour: shift exponent 1531")


def test_a_wrong_element_is_located_with_its_neighbourhood_and_warnings_are_shown() -> None:
    body = (
        "  int unused_counter;\n"
        "  for (int64_t i = 0; i < N; ++i) out[i] = (i == 700) ? -1.0f : 2.0f * x[i];\n"
    )
    report = diagnose(DOUBLE, cpu(body), get_target("cpu"))
    m = report.mismatch
    assert m is not None and m.output == "out" and m.flat_index == 700 and m.index == (700,)
    assert m.got == "-1" and m.wrong == 1 and m.total == 1531
    assert [i for i, _, _ in m.neighbourhood] == list(range(697, 704))
    assert all(e == g for i, e, g in m.neighbourhood if i != 700)
    assert "unused variable 'unused_counter'" in (report.text() or "")


def test_a_correct_kernel_is_said_to_match() -> None:
    report = diagnose(
        DOUBLE, cpu("  for (int64_t i = 0; i < N; ++i) out[i] = 2.0f * x[i];\n"), get_target("cpu")
    )
    assert report.diagnostics is not None and report.diagnostics.ran and report.mismatch is None
    assert "match the reference" in (report.text() or "")


def test_a_kernel_that_does_not_build_reports_the_compiler() -> None:
    report = diagnose(DOUBLE, cpu("  this is not C;\n"), get_target("cpu"))
    assert report.diagnostics is not None and not report.diagnostics.ran
    assert "debug build failed" in (report.text() or "")


TRITON_OOB = """import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def double(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.device_print("x", x)
    tl.store(out_ptr + offs, x * 2, mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        double[(triton.cdiv(x.numel(), 512),)](x, out, x.numel(), BLOCK=512)
        return out[: x.numel() // 2].contiguous()
"""


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton is not installed")
def test_triton_traceback_and_device_print() -> None:
    target = get_target("triton")
    broken = TRITON_OOB.replace("x * 2, mask", "x * undefined_name, mask")
    report = diagnose(DOUBLE, Candidate.single("kernel.py", broken), target)
    d = report.diagnostics
    assert d is not None and d.fault is not None
    assert (d.fault.path, d.fault.line, d.fault.function) == ("kernel.py", 12, "double")  # the tl.store line
    assert "undefined_name" in d.fault_kind
    assert "FAULT: " in (report.text() or "") and "Python traceback" in (report.text() or "")
    shrunk = diagnose(DOUBLE, Candidate.single("kernel.py", TRITON_OOB), target)
    assert shrunk.diagnostics is not None and shrunk.diagnostics.ran
    printed = shrunk.diagnostics.sections[0]
    assert printed.title.startswith("device_print") and printed.text.startswith("(0, 0, 0)  x:  [")
    assert shrunk.mismatch is not None and "element count" in shrunk.mismatch.detail


def test_the_builtin_loop_attaches_the_diagnostic_to_the_next_prompt(tmp_path: Path) -> None:
    wrong = HEAD + SIG + "  for (int64_t i = 0; i < N; ++i) out[i] = (i == 5) ? 0.0f : 2.0f * x[i];\n}\n"
    right = HEAD + SIG + "  for (int64_t i = 0; i < N; ++i) out[i] = 2.0f * x[i];\n}\n"
    model = ScriptedModel(
        [
            f"DIAGNOSIS: x\nRULES USED: NONE\n```c\n{wrong}```\n",
            f"DIAGNOSIS: x\nRULES USED: NONE\n```c\n{right}```\n",
        ]
    )
    ws = tmp_path / "ws"
    ws.mkdir()
    cfg = RunConfig(
        workspace=ws,
        suite=str(E2E),
        model="scripted:unused",
        method="refinement",
        limit=1,
        schedule="by-level",
        budget=2,
        embedder="none",
        progress=False,
        harness={
            "skip_timing": True,
            "held_out_shape": False,
            "canaries": False,
            "trials": 1,
            "variant_trials": 1,
        },
    )
    summary = run(cfg, model=model)
    assert summary.results[0]["operator"] == "e2e_double" and summary.correct == 1
    second = model.prompts[1][-1].content
    assert "DIAGNOSTICS (debug run on the small shape N=1531" in second
    assert "first mismatch in output 'out' at index [5]" in second
    off = run(
        cfg.model_copy(update={"diagnostics": False, "new": True}),
        model=ScriptedModel([f"```c\n{wrong}```\n", f"```c\n{right}```\n"]),
    )
    assert off.correct == 1


def test_a_kernel_that_prints_without_end_is_cut_and_still_judged() -> None:
    body = (
        '  for (int64_t r = 0; r < 20000; ++r) printf("line %lld of a flood of output\\n", (long long)r);\n'
        "  for (int64_t i = 0; i < N; ++i) out[i] = 2.0f * x[i];\n"
    )
    report = diagnose(DOUBLE, cpu(body), get_target("cpu"))
    assert report.diagnostics is not None and report.diagnostics.ran and report.mismatch is None
    text = report.text() or ""
    assert "line 0 of a flood" in text and len(text) < 4000  # the printf section is capped
