"""Host-side helpers shared by the device targets (not imported inside the sandbox): where the
runtime pieces live, which device nodes a run binds, whether a device is usable here."""

from __future__ import annotations

import importlib.util
from pathlib import Path

TARGETS = Path(__file__).resolve().parent.parent
WIRE_DIR = TARGETS.parent / "harness" / "children"
LOOP_DIR = TARGETS / "devloop"


def find_module(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def gpu_device_nodes() -> list[str]:
    """/dev/nvidia* nodes to bind for a CUDA run (only then)."""
    dev = Path("/dev")
    return sorted(str(p) for p in dev.glob("nvidia*")) + (
        [str(dev / "nvidia-caps")] if (dev / "nvidia-caps").exists() else []
    )


def npu_device_nodes() -> list[str]:
    dev = Path("/dev")
    names = ("davinci*", "davinci_manager", "devmm_svm", "hisi_hdc")
    return sorted({str(p) for pattern in names for p in dev.glob(pattern)})


def cuda_available() -> tuple[bool, str]:
    try:
        import torch

        if not torch.cuda.is_available():
            return (
                False,
                f"torch {torch.__version__} sees no CUDA device (torch.cuda.is_available() is False)",
            )
        return True, f"CUDA device {torch.cuda.get_device_name(0)}"
    except Exception as exc:  # never raise from available()
        return False, f"torch.cuda unusable: {type(exc).__name__}: {exc}"


def npu_available() -> tuple[bool, str]:
    if not find_module("torch_npu"):
        return False, "torch_npu is not installed (Ascend NPU support for torch)"
    try:
        import torch
        import torch_npu  # noqa: F401

        if not torch.npu.is_available():  # type: ignore[attr-defined]
            return False, "torch_npu is installed but sees no NPU"
        return True, "Ascend NPU through torch_npu"
    except Exception as exc:
        return False, f"torch_npu unusable: {type(exc).__name__}: {exc}"
