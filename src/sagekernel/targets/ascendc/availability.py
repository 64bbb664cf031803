"""What this machine has for Ascend C: the CANN toolkit, torch_npu, an NPU. Never raises.

torch_npu is probed in a subprocess with TORCH_DEVICE_BACKEND_AUTOLOAD=0: importing torch_npu
without CANN fails on libhccl.so, and once torch_npu is installed torch's device-backend
autoload makes a plain `import torch` fail the same way (targets.md §1.1), so this process
never imports it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from sagekernel.devices import npu_device_nodes

DEFAULT_CANN_HOMES = ("/usr/local/Ascend/ascend-toolkit/latest", "/usr/local/Ascend/cann")
SET_ENV_HINT = "source /usr/local/Ascend/ascend-toolkit/set_env.sh"
#: Where CANN releases keep the kernel CMake module (it moved between versions).
KERNEL_CMAKE_DIRS = (
    "tools/tikcpp/ascendc_kernel_cmake",
    "compiler/tikcpp/ascendc_kernel_cmake",
    "ascendc_devkit/tikcpp/samples/cmake",
)
#: Host files the NPU runtime reads at initialisation, bound read-only into the runtime's sandbox
#: when they exist (every public CANN / torch_npu container recipe mounts them).
NPU_HOST_FILES = (
    "/etc/ascend_install.info",
    "/usr/local/Ascend/driver",
    "/usr/local/dcmi",
    "/usr/local/bin/npu-smi",
    "/etc/hccn.conf",
)
#: Where CANN installs keep each tool besides PATH, relative to the toolkit root (H1: set_env.sh
#: does not always put msopgen on PATH; the CANN docs call it by the first path).
TOOL_PATHS: dict[str, tuple[str, ...]] = {
    "msopgen": ("python/site-packages/bin/msopgen", "bin/msopgen", "tools/msopgen/bin/msopgen"),
    "bisheng": ("bin/bisheng", "compiler/ccec_compiler/bin/bisheng", "tools/bisheng_compiler/bin/bisheng"),
    "mssanitizer": ("tools/mssanitizer/bin/mssanitizer", "bin/mssanitizer"),
    "msprof": ("tools/profiler/bin/msprof", "bin/msprof"),
    "cmake": (),
    "ccache": (),
}


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


def resolve_tool(name: str, home: Path | None = None) -> str | None:
    """The absolute path of a CANN (or build) tool: PATH first, then the toolkit's own places."""
    found = shutil.which(name)
    if found:
        return str(Path(found).resolve())
    home = home if home is not None else cann_home()
    if home is None:
        return None
    for rel in TOOL_PATHS.get(name, ()):
        candidate = home / rel
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
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
        missing = [tool for tool in ("bisheng", "msopgen") if resolve_tool(tool, home) is None]
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


def host_binds() -> list[str]:
    """The NPU host files present here (NPU_HOST_FILES), for read-only binds into the sandbox."""
    return [p for p in NPU_HOST_FILES if os.path.exists(p)]


_SOC_IN_TEXT = re.compile(r"\b(?:Ascend)?(910B[1-4](?:C|-1)?|910_93[0-9]{2}|310P[1357])\b", re.I)


@lru_cache(maxsize=1)
def detect_soc(timeout_s: float = 60.0) -> str | None:
    """The SoC this machine's NPU reports, or None (no NPU device node, or nothing readable).

    torch_npu's `torch.npu.get_device_name(0)` first (it is `aclrtGetSocName`), then `npu-smi info`
    (its Name column, e.g. `910B2`). Probed only where /dev/davinci<N> exists, so a CPU-only
    machine never starts a subprocess for it."""
    if not probe_npu().ok:
        return None
    env = {**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    attempts = (
        [sys.executable, "-c", "import torch, torch_npu; print(torch.npu.get_device_name(0))"],
        [resolve_tool("npu-smi") or "npu-smi", "info"],
    )
    for argv in attempts:
        try:
            out = subprocess.run(
                argv, capture_output=True, text=True, env=env, timeout=timeout_s, check=False
            )
        except (OSError, subprocess.SubprocessError):
            continue
        m = _SOC_IN_TEXT.search(out.stdout)
        if out.returncode == 0 and m:
            return "Ascend" + m.group(1).upper()
    return None


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
    for tool in ("msopgen", "bisheng", "mssanitizer", "msprof", "ccache"):
        where = resolve_tool(tool)
        rows.append(
            (f"tool {tool}", where is not None, where or "not found (PATH, then the toolkit's own places)")
        )
    detected = detect_soc()
    try:
        from sagekernel.targets.ascendc.config import AscendConfig

        config = AscendConfig.from_env()
        rows.append(
            ("SoC", True, f"configured {config.soc} ({config.soc_source}); detected {detected or 'none'}")
        )
    except ValueError as exc:
        rows.append(("SoC", False, f"{exc}; detected {detected or 'none'}"))
    for device in ("npu", "cpu-twin"):
        ok, why = available(device)
        rows.append((f"device {device}", ok, why))
    return rows


__all__ = [
    "Probe",
    "available",
    "cann_home",
    "detect_soc",
    "doctor",
    "host_binds",
    "npu_device_nodes",
    "probe_cann",
    "probe_npu",
    "probe_torch_npu",
    "probe_twin_library",
    "resolve_tool",
]
