"""What this machine has for Ascend C: the CANN toolkit, torch_npu, an NPU. Never raises.

torch_npu is probed in a subprocess with TORCH_DEVICE_BACKEND_AUTOLOAD=0: importing torch_npu
without CANN fails on libhccl.so, and once torch_npu is installed torch's device-backend
autoload makes a plain `import torch` fail the same way (targets.md §1.1), so this process
never imports it.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

DEFAULT_CANN_HOMES = ("/usr/local/Ascend/ascend-toolkit/latest", "/usr/local/Ascend/cann")
SET_ENV_HINT = "source /usr/local/Ascend/ascend-toolkit/set_env.sh"
#: Where CANN releases keep the kernel CMake module (it moved between versions).
KERNEL_CMAKE_DIRS = (
    "tools/tikcpp/ascendc_kernel_cmake",
    "compiler/tikcpp/ascendc_kernel_cmake",
    "ascendc_devkit/tikcpp/samples/cmake",
)
NPU_DEVICE_NODES = ("/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc")


@dataclass(frozen=True)
class Probe:
    ok: bool
    detail: str


def cann_home() -> Path | None:
    """The CANN toolkit root: ASCEND_HOME_PATH / ASCEND_TOOLKIT_HOME, else a documented default."""
    for var in ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME"):
        value = os.environ.get(var)
        if value and Path(value).is_dir():
            return Path(value)
    for home in DEFAULT_CANN_HOMES:
        if Path(home).is_dir():
            return Path(home)
    return None


def probe_cann() -> Probe:
    try:
        home = cann_home()
        if home is None:
            return Probe(
                False,
                "CANN toolkit not found: ASCEND_HOME_PATH is unset and none of "
                f"{', '.join(DEFAULT_CANN_HOMES)} exists (install the toolkit from hiascend.com, then "
                f"{SET_ENV_HINT})",
            )
        missing = []
        if not (home / "bin" / "bisheng").exists() and shutil.which("bisheng") is None:
            missing.append("bisheng")
        if (
            not (home / "python" / "site-packages" / "bin" / "msopgen").exists()
            and shutil.which("msopgen") is None
        ):
            missing.append("msopgen")
        if not any((home / d).is_dir() for d in KERNEL_CMAKE_DIRS):
            missing.append("ascendc_kernel_cmake (" + " | ".join(KERNEL_CMAKE_DIRS) + ")")
        if missing:
            return Probe(False, f"CANN toolkit at {home} lacks {', '.join(missing)} (run {SET_ENV_HINT})")
        return Probe(True, f"CANN toolkit at {home}")
    except OSError as exc:  # never raise: an unreadable mount reads as "missing"
        return Probe(False, f"CANN toolkit probe failed: {exc}")


def probe_twin_library() -> Probe:
    home = cann_home()
    if home is None:
        return Probe(False, "CANN toolkit not found (the CPU twin-debug library ships with it)")
    if not (home / "tools" / "tikicpulib").is_dir():
        return Probe(False, f"CANN CPU twin-debug library missing: {home}/tools/tikicpulib")
    return Probe(True, f"CPU twin-debug library at {home}/tools/tikicpulib")


@lru_cache(maxsize=4)
def probe_torch_npu(python: str = sys.executable, timeout_s: float = 60.0) -> Probe:
    code = (
        "import torch, torch_npu; print(torch_npu.__version__); "
        "print(int(torch.npu.is_available())); print(torch.npu.device_count())"
    )
    env = {**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    try:
        out = subprocess.run(
            [python, "-c", code], capture_output=True, text=True, env=env, timeout=timeout_s, check=False
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return Probe(False, f"torch_npu probe failed: {exc}")
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["(no output)"])[-1]
        if "No module named 'torch_npu'" in out.stderr:
            return Probe(False, "torch_npu is not installed (pip install torch-npu matching torch and CANN)")
        return Probe(False, f"torch_npu does not import: {last}")
    lines = out.stdout.split()
    version = lines[0] if lines else "?"
    if len(lines) < 3 or lines[1] != "1" or lines[2] == "0":
        return Probe(
            False, f"torch_npu {version} imports but sees no NPU (torch.npu.is_available() is false)"
        )
    return Probe(True, f"torch_npu {version}, {lines[2]} NPU(s)")


def npu_device_nodes() -> list[str]:
    return sorted(glob.glob("/dev/davinci[0-9]*")) + [p for p in NPU_DEVICE_NODES if os.path.exists(p)]


def probe_npu() -> Probe:
    nodes = npu_device_nodes()
    if not any(Path(p).name.startswith("davinci") and Path(p).name[7:].isdigit() for p in nodes):
        return Probe(False, "no Ascend NPU: no /dev/davinci<N> device node (driver not installed or no card)")
    return Probe(True, "NPU device nodes: " + ", ".join(nodes))


def available(device: str) -> tuple[bool, str]:
    """(usable, what is missing or what was found) for `npu` or `cpu-twin`. Never raises."""
    try:
        if device == "cpu-twin":
            probes = [probe_cann(), probe_twin_library()]
        elif device == "npu":
            probes = [probe_cann(), probe_npu()]
            if probes[0].ok and probes[1].ok:  # only then is the import worth a subprocess
                probes.append(probe_torch_npu())
            else:
                probes.append(Probe(False, "torch_npu not probed (needs CANN and an NPU first)"))
        else:
            return False, f"unknown device {device!r}: the ascendc target has npu and cpu-twin"
        missing = [p.detail for p in probes if not p.ok]
        if missing:
            return False, "; ".join(missing)
        return True, "; ".join(p.detail for p in probes)
    except Exception as exc:  # the contract: never raises
        return False, f"availability probe failed: {type(exc).__name__}: {exc}"


def doctor() -> list[tuple[str, bool, str]]:
    """(check, ok, detail) for `sage doctor`: every piece the Ascend C target can use."""
    cann, twin, npu = probe_cann(), probe_twin_library(), probe_npu()
    rows = [
        ("CANN toolkit", cann.ok, cann.detail),
        ("CANN CPU twin-debug library", twin.ok, twin.detail),
        ("Ascend NPU", npu.ok, npu.detail),
    ]
    torch_npu = probe_torch_npu() if cann.ok else Probe(False, "not probed: importing torch_npu needs CANN")
    rows.append(("torch_npu", torch_npu.ok, torch_npu.detail))
    for device in ("npu", "cpu-twin"):
        ok, why = available(device)
        rows.append((f"device {device}", ok, why))
    return rows


__all__ = [
    "Probe",
    "available",
    "cann_home",
    "doctor",
    "npu_device_nodes",
    "probe_cann",
    "probe_npu",
    "probe_torch_npu",
    "probe_twin_library",
]
