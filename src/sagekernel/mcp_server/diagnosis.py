"""The `diagnose` tool's result: the harness's DiagnosticReport as plain JSON, and what each
target's diagnostics offer (open_operator tells the agent; the skills point there).

The report keeps the raw output bytes of the debug run (the harness compares them with the
reference); they are never part of the tool's result: the agent gets the located mismatch
instead. Non-finite numbers (a kernel that wrote NaN) are given as text ("nan", "inf").
"""

from __future__ import annotations

import math
from typing import Any

from sagekernel.harness.diagnose import DiagnosticReport

#: What `diagnose` runs per target (targets without a `diagnose` method get the evaluate feedback only).
DIAGNOSTICS_BY_TARGET: dict[str, list[str]] = {
    "cpu": [
        "gcc -Wall -Wextra warnings on the kernel",
        "AddressSanitizer/UBSan: the faulting kernel line and the buffer it touched",
        "the kernel's own printf output",
        "the first mismatching element against the reference (index, expected, got, neighbourhood)",
    ],
    "triton": [
        "one call on the Triton interpreter (TRITON_INTERPRET=1): the traceback with the kernel line",
        "tl.device_print / print output",
        "the first mismatching element against the reference (index, expected, got, neighbourhood)",
    ],
}


def diagnostics_offered(target: Any) -> list[str]:
    """What `diagnose` gives on `target` (empty: no debug run, the evaluate feedback only)."""
    if getattr(target, "diagnose", None) is None:
        return []
    offered = getattr(target, "diagnostic_tools", None)  # a target may describe its own
    if offered:
        return [str(t) for t in offered]
    return list(DIAGNOSTICS_BY_TARGET.get(target.name, ["the target's debug run and the first mismatch"]))


def _number(value: float) -> float | str:
    return value if math.isfinite(value) else str(value)


def diagnosis_result(report: DiagnosticReport) -> dict[str, Any]:
    """The report's fields an agent reads, JSON-clean (no raw output bytes, no NaN)."""
    d = report.diagnostics
    diagnostics = None
    if d is not None:
        fault = d.fault
        diagnostics = {
            "tools": list(d.tools),
            "sections": [{"title": s.title, "text": s.text} for s in d.sections],
            "fault": None
            if fault is None
            else {"path": fault.path, "line": fault.line, "function": fault.function},
            "fault_kind": d.fault_kind,
            "fault_buffer": d.fault_buffer,
            "ran": d.ran,
        }
    m = report.mismatch
    mismatch = None
    if m is not None:
        mismatch = {
            "output": m.output,
            "index": [int(i) for i in m.index],
            "flat_index": int(m.flat_index),
            "expected": m.expected,
            "got": m.got,
            "detail": m.detail,
            "wrong": int(m.wrong),
            "total": int(m.total),
            "neighbourhood": [[int(i), _number(float(e)), _number(float(g))] for i, e, g in m.neighbourhood],
        }
    return {
        "operator": report.operator,
        "target": report.target,
        "available": report.available,
        "message": report.message,
        "text": report.text(),
        "shape": {str(k): int(v) for k, v in report.shape.items()},
        "diagnostics": diagnostics,
        "mismatch": mismatch,
        "seconds": round(float(report.seconds), 3),
    }
