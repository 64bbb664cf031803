"""Building a CUDA candidate: nvcc in the build sandbox, then symbol checks on the candidate's object.

Two steps, each with the timeout: `nvcc -c` compiles kernel.cu for sm_90 into kernel.o, whose
symbols are the candidate's alone (`nm`): undefined ones must be CUDA runtime launch/memory
calls, the C++ runtime and maths; defined global ones must be `sage_launch` or C++-mangled
(kernels, device functions), so nothing shadows a libc or CUDA function. Then
`nvcc -shared -cudart static` links kernel.so, which needs only the driver (libcuda) at load time.
Errors are trimmed to the lines that matter, with the model's file name.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from sagekernel import sandbox
from sagekernel.seam import LintFinding
from sagekernel.targets.base import BuildResult
from sagekernel.targets.cuda.contract import KERNEL_FILE, LAUNCH_SYMBOL

ARCH = "sm_90"
MAX_MESSAGE_CHARS = 1800
COMPILE_FLAGS = ["-O3", "-std=c++17", f"-arch={ARCH}", "-Xcompiler", "-fPIC", "-lineinfo"]

#: `exit` and `abort`: nvcc's host-side stubs of non-inline __device__ functions call them.
ALLOWED_UNDEFINED = re.compile(
    r"^(?:__cuda\w+|cuda(?:GetLastError|PeekAtLastError|GetErrorString|GetErrorName|Malloc|MallocAsync|Free|"
    r"FreeAsync|Memset|MemsetAsync|Memset2DAsync|Memcpy|MemcpyAsync|Memcpy2DAsync|MemcpyToSymbol|"
    r"MemcpyToSymbolAsync|GetSymbolAddress|FuncSetAttribute|FuncGetAttributes|OccupancyMaxActiveBlocksPerMultiprocessor\w*|"
    r"OccupancyMaxPotentialBlockSize\w*|GetDevice|GetDeviceProperties\w*|DeviceGetAttribute|LaunchKernel\w*|"
    r"LaunchCooperativeKernel\w*|StreamSynchronize|DeviceSynchronize|StreamGetPriority|PointerGetAttributes)|"
    r"_Unwind_Resume|__cxa_(?:guard_\w+|atexit|begin_catch|end_catch|pure_virtual|throw_bad_array_new_length)|"
    r"__gxx_personality_v0|__stack_chk_fail|atexit|exit|abort|memcpy|memset|memmove|memcmp|"
    r"_Znwm|_Znam|_ZdlPv\w*|_ZdaPv\w*|_ZSt(?:9terminatev|17__throw_bad_alloc|20__throw_length_error\w*|"
    r"24__throw_out_of_range\w*|28__throw_bad_array_new_length)\w*|"
    r"(?:exp|exp2|expm1|log|log2|log10|log1p|sqrt|cbrt|pow|sin|cos|tan|sinh|cosh|tanh|asin|acos|atan|atan2|erf|"
    r"erfc|fabs|floor|ceil|round|lround|rint|nearbyint|trunc|fmax|fmin|fma|fmod|hypot|ldexp|frexp|copysign)[fl]?)$"
)
SYMBOL_REASON = (
    "the object calls a function outside the CUDA runtime's launch/memory API, the C++ runtime and "
    "maths (a library, the OS, threads, streams or clocks)"
)
EXPORT_REASON = (
    "the object defines an unmangled global symbol other than sage_launch; it could shadow a libc "
    "or CUDA function (make helpers static or __device__)"
)


def nvcc_path() -> str | None:
    found = shutil.which("nvcc")
    if found:
        return found
    default = Path("/usr/local/cuda/bin/nvcc")
    return str(default) if default.exists() else None


def nvcc_version(nvcc: str) -> str:
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    m = re.search(r"release [\d.]+, V[\d.]+", out)
    return m.group(0) if m else out.strip().splitlines()[-1] if out.strip() else "unknown"


def build(source: str, workdir: Path, *, sandbox_kind: str = "auto", timeout_s: float = 120.0) -> BuildResult:
    nvcc = nvcc_path()
    info: dict[str, Any] = {"language": "cuda", "arch": ARCH, "flags": COMPILE_FLAGS}
    if nvcc is None:
        return BuildResult(
            False,
            "nvcc is not installed here (CUDA toolkit); the CUDA target cannot build",
            {},
            info,
            stage="compile",
        )
    build_dir = workdir / "build"
    build_dir.mkdir(parents=True, exist_ok=True)
    (build_dir / KERNEL_FILE).write_text(source, encoding="utf-8")
    kind = sandbox.best_kind(sandbox_kind)
    info.update(compiler=nvcc_version(nvcc), sandbox=kind)
    toolkit = str(Path(nvcc).resolve().parent.parent)
    t0 = time.perf_counter()
    steps = [
        [nvcc, *COMPILE_FLAGS, "-c", f"/box/build/{KERNEL_FILE}", "-o", "/box/build/kernel.o"],
        [
            nvcc,
            "-shared",
            f"-arch={ARCH}",
            "-cudart",
            "static",
            "/box/build/kernel.o",
            "-o",
            "/box/build/kernel.so",
        ],
    ]
    for n, argv in enumerate(steps):
        cmd = sandbox.SandboxCommand(
            argv=argv,
            ro_binds=[(toolkit, toolkit)] if not toolkit.startswith("/usr") else [],
            rw_binds=[(str(build_dir), "/box/build")],
            workdir="/box/build",
            env={"PATH": f"{Path(nvcc).parent}:/usr/bin:/bin"},
        )
        scratch = workdir / f"nvcc{n}"
        scratch.mkdir(exist_ok=True)
        limits = sandbox.Limits(
            wall_s=timeout_s, cpu_s=int(timeout_s) + 1, address_space_bytes=None, file_size_bytes=512 << 20
        )
        result = sandbox.run(cmd, kind=kind, limits=limits, scratch_dir=scratch)
        info["seconds"] = round(time.perf_counter() - t0, 3)
        if result.timed_out:
            return BuildResult(False, f"nvcc did not finish within {timeout_s:.0f} s", {}, info)
        log = (scratch / "child.log").read_text("utf-8", "replace")
        if result.returncode != 0:
            return BuildResult(False, trim_nvcc_log(log), {}, info)
        if n == 0:
            findings = check_object(build_dir / "kernel.o")
            if findings:
                names = ", ".join(sorted({f.rule for f in findings}))
                return BuildResult(
                    False,
                    f"the compiled object was rejected ({names}): {findings[0].reason} "
                    f"({findings[0].excerpt})",
                    {},
                    info,
                    findings=findings,
                    stage="lint",
                )
    library = build_dir / "kernel.so"
    if not library.exists():
        return BuildResult(False, "nvcc reported success but wrote no kernel.so", {}, info)
    return BuildResult(True, "built", {"library": library}, info)


def object_symbols(obj: Path) -> tuple[list[str], list[tuple[str, str]]]:
    """(undefined names, [(type, name)] of defined global symbols) from `nm`."""
    nm = shutil.which("nm") or "nm"
    undefined = subprocess.run([nm, "-u", str(obj)], capture_output=True, text=True, timeout=30).stdout
    defined = subprocess.run(
        [nm, "-g", "--defined-only", str(obj)], capture_output=True, text=True, timeout=30
    ).stdout
    und = [ln.split()[-1].split("@")[0] for ln in undefined.splitlines() if ln.strip()]
    dfn = []
    for ln in defined.splitlines():
        parts = ln.split()
        if len(parts) >= 3:
            dfn.append((parts[1], parts[2]))
    return und, dfn


def check_object(obj: Path) -> list[LintFinding]:
    und, dfn = object_symbols(obj)
    findings = [
        LintFinding("symbols", SYMBOL_REASON, None, name) for name in und if not ALLOWED_UNDEFINED.match(name)
    ]
    names = {name for _, name in dfn}
    if LAUNCH_SYMBOL not in names:
        findings.append(
            LintFinding(
                "contract",
                f'kernel.cu defines no extern "C" {LAUNCH_SYMBOL} (see the contract\'s prototype)',
                None,
                "",
            )
        )
    for kind, name in dfn:
        if (
            name != LAUNCH_SYMBOL
            and not name.startswith("_Z")
            and kind not in ("V", "W", "u")
            and not name.startswith("DW.ref.")
        ):
            findings.append(LintFinding("symbols", EXPORT_REASON, None, name))
    return findings


def trim_nvcc_log(log: str) -> str:
    """The first errors and the lines right after each, with the model's file name."""
    log = log.replace(f"/box/build/{KERNEL_FILE}", KERNEL_FILE).replace("/box/build/", "")
    lines = log.splitlines()
    keep: list[str] = []
    for i, line in enumerate(lines):
        if re.search(r"\berror\b|undefined reference|ptxas fatal", line):
            keep.extend(lines[i : i + 3])
        if len("\n".join(keep)) > MAX_MESSAGE_CHARS:
            break
    text = "\n".join(dict.fromkeys(keep)) if keep else log.strip()
    return "nvcc failed:\n" + (text[:MAX_MESSAGE_CHARS] or "(nvcc printed nothing)")
