"""The seam records, where targets have always imported them from (they live in sagekernel.seam,
below both harness and targets)."""

from sagekernel.seam import (
    BuildResult,
    DeviceInfo,
    Evidence,
    FileSpec,
    Knowledge,
    RuntimeSpec,
    load_knowledge,
)

__all__ = ["BuildResult", "DeviceInfo", "Evidence", "FileSpec", "Knowledge", "RuntimeSpec", "load_knowledge"]
