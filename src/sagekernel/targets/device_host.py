"""Host-side helpers shared by the device targets (not imported inside the sandbox): the staged
runtime folder, which device nodes a run binds, whether a device is usable here."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

TARGETS = Path(__file__).resolve().parent
CHILDREN = TARGETS.parent / "harness" / "children"
LOOP_DIR = TARGETS / "devloop"
#: What every device runtime runs beside its own files: the shared loop and the harness's stdlib
#: side of the wire and seccomp guard. Nothing else of sagekernel is ever bound into a runtime.
SHARED_RUNTIME_FILES = (
    LOOP_DIR / "loop.py",
    LOOP_DIR / "devices.py",
    LOOP_DIR / "hostguard.py",
    CHILDREN / "wire_child.py",
    CHILDREN / "guard.py",
)
#: Where a runtime's folder appears inside the sandbox.
RUNTIME_MOUNT = "/box/rt"


def stage_runtime(own_files: tuple[Path, ...]) -> Path:
    """A folder holding exactly `own_files` and SHARED_RUNTIME_FILES: a device runtime's folder."""
    return stage_folder((*own_files, *SHARED_RUNTIME_FILES))


def stage_folder(files: tuple[Path, ...]) -> Path:
    """A folder holding exactly `files` (flat), named by their content hash, for the sandbox to bind
    read-only: a candidate's process then sees no other sagekernel source (no reference runner, no
    lint tables, no harness). Made once per content, atomically."""
    names = [f.name for f in files]
    if len(set(names)) != len(names):
        raise ValueError(f"runtime files must have distinct names: {names}")
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    root = Path(tempfile.gettempdir()) / f"sage-runtime-{os.getuid()}"
    folder = root / digest.hexdigest()[:24]
    if folder.is_dir():
        return folder
    root.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=".staging-", dir=root))
    for f in files:
        shutil.copyfile(f, partial / f.name)
    try:
        partial.rename(folder)
    except OSError:  # another process staged the same content first
        shutil.rmtree(partial, ignore_errors=True)
    return folder


def find_module(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


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


#: The evidence the shared device loop (devloop/loop.py) reports, which the harness then requires
#: in every run of a device runtime (RuntimeSpec.reports; harness/runs.py judges it).
DEVICE_LOOP_EVIDENCE = frozenset({"integrity", "threads", "out_meta"})
