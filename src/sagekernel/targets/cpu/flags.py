"""Compiler and flags of the CPU target (fixed: never -ffast-math), and C/C++ detection."""

from __future__ import annotations

import re
import subprocess
from functools import lru_cache

COMMON_FLAGS = (
    "-O3",
    "-march=native",
    "-fPIC",
    "-shared",
    "-fopenmp",
    "-fno-fast-math",
    "-Wl,--no-undefined",
    # No start files: the object then has no _init/_fini, no frame_dummy and no __dso_handle, so
    # any load-time code or static destructor in it is the candidate's (and is rejected).
    "-nostartfiles",
    # Full RELRO: the GOT and relocated data become read-only once loaded (no state there).
    "-Wl,-z,relro,-z,now",
)
C_FLAGS = ("-std=gnu11", "-Werror=implicit-function-declaration", "-Werror=incompatible-pointer-types")
CXX_FLAGS = ("-std=c++17", "-Drestrict=__restrict__")
LINK_LIBS = ("-lm",)

_CXX_MARKERS = re.compile(
    r"extern\s+\"C\"|\bstd::|\btemplate\s*<|\bnamespace\b|\bconstexpr\b|"
    r"#\s*include\s*<(?:vector|algorithm|cmath|cstdint|cstddef|cstdlib|cstring|array|"
    r"numeric|limits|utility|type_traits|memory|climits|cfloat|cassert|cstdio)>"
)


def is_cxx(source: str) -> bool:
    return _CXX_MARKERS.search(source) is not None


def compiler_command(language: str) -> list[str]:
    exe = "g++" if language == "c++" else "gcc"
    return [exe, *COMMON_FLAGS, *(CXX_FLAGS if language == "c++" else C_FLAGS)]


@lru_cache(maxsize=4)
def compiler_version(exe: str) -> str:
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return out.splitlines()[0] if out else "unknown"
