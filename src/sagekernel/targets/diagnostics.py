"""The diagnostics seam records, where targets have always imported them from (they live in
sagekernel.diagnostics_seam, below both harness and targets)."""

from sagekernel.diagnostics_seam import (
    MAX_LOG_BYTES,
    DiagnosticProbe,
    DiagnosticSection,
    ProbeTensor,
    SourceLocation,
    TargetDiagnostics,
    read_log,
)

__all__ = [
    "MAX_LOG_BYTES",
    "DiagnosticProbe",
    "DiagnosticSection",
    "ProbeTensor",
    "SourceLocation",
    "TargetDiagnostics",
    "read_log",
]
