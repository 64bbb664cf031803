"""The CPU target's runtime: the native driver (driver/sage_driver.c), built once per kernel
signature and cached.

The driver calls the kernel through a generated trampoline with the exact C prototype of the
task's contract (pointers, int64 and float scalars in ABI order), so no libffi and no Python sit
between the candidate and the clock. The cache key is the driver's source, the signature and the
compiler version; a build is written to a temporary name and renamed into place, so concurrent
evaluations never see half a binary.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path

from platformdirs import user_cache_dir

from sagekernel.errors import SageError
from sagekernel.targets.base import RuntimeSpec
from sagekernel.targets.cpu.flags import compiler_version

DRIVER_SOURCE = Path(__file__).resolve().parent / "driver" / "sage_driver.c"
C_SCALAR = {"i64": "int64_t", "f32": "float", "f64": "double"}


class DriverBuildError(SageError):
    """The native driver could not be built (a broken toolchain, not the candidate's fault)."""


def trampoline(kinds: list[str]) -> str:
    """sage_call.h for argument kinds in ABI order ("in"/"out" pointers, "i64", "f32", "f64")."""
    params, actuals = [], []
    counts = {"ptr": 0, "i64": 0, "f32": 0, "f64": 0}
    arrays = {"ptr": "p", "i64": "i", "f32": "f", "f64": "d"}
    for kind in kinds:
        key = "ptr" if kind in ("in", "out") else kind
        params.append("void *" if key == "ptr" else C_SCALAR[key])
        actuals.append(f"{arrays[key]}[{counts[key]}]")
        counts[key] += 1
    proto = ", ".join(params) or "void"
    lines = [f"#define SAGE_N_{k.upper()} {v}" for k, v in counts.items()]
    lines += [
        "static void sage_call_kernel(void *fn, void **p, const int64_t *i, const float *f,",
        "                             const double *d) {",
        "    (void)p; (void)i; (void)f; (void)d;",
        f"    ((void (*)({proto}))fn)({', '.join(actuals)});",
        "}",
    ]
    return "\n".join(lines) + "\n"


def cache_root() -> Path:
    return Path(os.environ.get("SAGE_CACHE_DIR") or user_cache_dir("sagekernel")) / "drivers"


@lru_cache(maxsize=64)
def driver_for(kinds: tuple[str, ...]) -> Path:
    """The driver binary for this signature, built on first use."""
    header = trampoline(list(kinds))
    key = hashlib.sha256(
        DRIVER_SOURCE.read_bytes() + header.encode() + compiler_version("gcc").encode()
    ).hexdigest()[:20]
    target = cache_root() / key / "sage_driver"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        (Path(tmp) / "sage_call.h").write_text(header, encoding="utf-8")
        out = Path(tmp) / "sage_driver"
        # Full RELRO: the GOT is read-only before the candidate is mapped, so a kernel cannot swap
        # the driver's clock_gettime / getrandom / write for its own (tests/adversarial/kernels_v2).
        cmd = ["gcc", "-O2", "-fno-fast-math", "-Wall", "-Wl,-z,relro,-z,now", "-I", tmp, str(DRIVER_SOURCE),
               "-o", str(out), "-ldl"]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise DriverBuildError(f"building the CPU driver failed:\n{proc.stderr[-1500:]}")
        os.replace(out, target)
    return target


def runtime_spec(kinds: list[str]) -> RuntimeSpec:
    driver = driver_for(tuple(kinds))
    return RuntimeSpec(
        argv=["/box/driver/sage_driver"],
        ro_binds=[(str(driver.parent), "/box/driver")],
        python=False,
        address_space_bytes=4 << 30,
        reference_in_process=False,
        name="cpu-native-driver",
    )


__all__ = ["DriverBuildError", "driver_for", "runtime_spec", "trampoline"]
