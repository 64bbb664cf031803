"""The object-level checks of a built CPU kernel: allowed undefined symbols, no shadowed libc
function, no load-time constructors or destructors beyond an empty kernel's (see build.py)."""

from __future__ import annotations

import ctypes
import re
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path

from sagekernel.seam import LintFinding
from sagekernel.targets.cpu import elf
from sagekernel.targets.cpu.contract import KERNEL_SYMBOL
from sagekernel.targets.cpu.flags import LINK_LIBS, compiler_command

_LIBM = [
    "sin",
    "cos",
    "tan",
    "asin",
    "acos",
    "atan",
    "atan2",
    "sinh",
    "cosh",
    "tanh",
    "asinh",
    "acosh",
    "atanh",
    "exp",
    "exp2",
    "exp10",
    "expm1",
    "log",
    "log2",
    "log10",
    "log1p",
    "pow",
    "sqrt",
    "cbrt",
    "hypot",
    "erf",
    "erfc",
    "tgamma",
    "lgamma",
    "ceil",
    "floor",
    "trunc",
    "round",
    "lround",
    "llround",
    "nearbyint",
    "rint",
    "lrint",
    "llrint",
    "fmod",
    "remainder",
    "remquo",
    "fma",
    "fmax",
    "fmin",
    "fdim",
    "fabs",
    "copysign",
    "nextafter",
    "frexp",
    "ldexp",
    "modf",
    "scalbn",
    "scalbln",
    "ilogb",
    "logb",
    "sincos",
    "nan",
]
ALLOWED_UNDEFINED = frozenset(
    [n + s for n in _LIBM for s in ("", "f", "l")]
    + [f"__{n}{s}_finite" for n in _LIBM for s in ("", "f")]
    + [
        "memset",
        "memcpy",
        "memmove",
        "memcmp",
        "malloc",
        "calloc",
        "realloc",
        "free",
        "aligned_alloc",
        "posix_memalign",
        "abort",
        "__assert_fail",
        "__stack_chk_fail",
        "__cxa_finalize",
        "__gmon_start__",
        "_ITM_registerTMCloneTable",
        "_ITM_deregisterTMCloneTable",
        "printf",
        "puts",
        "putchar",
        "fputs",
        "fputc",
        "fprintf",
        "fwrite",
        "fflush",
        "snprintf",
        "sprintf",
        "stderr",
        "stdout",
        "strlen",
        "strcmp",
        "strncmp",
        "qsort",
        "bsearch",
        "abs",
        "labs",
        "llabs",
        "__printf_chk",
        "__fprintf_chk",
        "__sprintf_chk",
        "__snprintf_chk",
        "__memcpy_chk",
        "__memset_chk",
        "__memmove_chk",
        "__cxa_begin_catch",
        "__cxa_end_catch",
        "__cxa_rethrow",
        "__cxa_allocate_exception",
        "__cxa_free_exception",
        "__cxa_throw",
        "__cxa_guard_acquire",
        "__cxa_guard_release",
        "__cxa_guard_abort",
        "__cxa_atexit",
        "__cxa_pure_virtual",
        "__gxx_personality_v0",
        "_Unwind_Resume",
        "__dso_handle",
        "_ZSt7nothrow",
        "__errno_location",
    ]
)
_ALLOWED_PATTERNS = re.compile(
    r"^(?:GOMP_\w+|omp_(?!get_wtime|get_wtick|set_(?!lock$|nest_lock$)|init_allocator|pause_resource)\w+|_ZGV\w+|_Znw\w*|_Zna\w*|_ZdlPv\w*|_ZdaPv\w*|"
    r"_ZSt\d+__throw_\w+|_ZTVN10__cxxabiv\w+|_ZTI\w+|_ZTS\w+)$"
)

SYMBOL_RULES: tuple[tuple[str, re.Pattern[str], str], ...] = (
    (
        "symbol_timer",
        re.compile(
            r"^(?:clock_gettime|gettimeofday|time|clock|times|timespec_get|getrusage|"
            r"omp_get_wtime|omp_get_wtick|_ZNSt6chrono\w*)$"
        ),
        "the library calls a clock; timing belongs to the harness",
    ),
    (
        "symbol_omp_state",
        re.compile(r"^omp_(?:set_\w+|init_allocator|pause_resource\w*)$"),
        "the library changes OpenMP settings, which persist between calls; the harness fixes the threads",
    ),
    (
        "symbol_library_op",
        re.compile(
            r"^(?:cblas_\w+|\w*gemm_?|\w*gemv_?|LAPACKE_\w+|mkl_\w+|openblas_\w+|"
            r"dnnl_\w+|fftw\w*)$"
        ),
        "the library calls a routine that does the operator's work; compute it in the kernel",
    ),
    (
        "symbol_threads",
        re.compile(r"^(?:pthread_\w+|thrd_\w+|_ZNSt6thread\w*)$"),
        "the library creates threads outside OpenMP",
    ),
    (
        "symbol_os_access",
        re.compile(
            r"^(?:f?open\w*|creat|socket|connect|fork|vfork|clone\w*|exec\w*|system|"
            r"popen|dlopen|dlsym|dlmopen|syscall|ptrace|mmap\w*|mprotect|getenv|read|"
            r"write|pread\w*|pwrite\w*|kill|raise|signal|sigaction|setjmp|longjmp|"
            r"_setjmp|__sigsetjmp|unlink|remove|fread|fwrite_unlocked|fscanf|"
            r"__isoc99_fscanf|process_vm_\w+|memfd_create|ioctl)$"
        ),
        "the library uses files, processes, signals or dynamic loading",
    ),
)
NOT_ALLOWED_REASON = (
    "the library calls a function outside the allow-list (libc memory functions, libm maths, "
    "OpenMP, the C++ runtime's allocation and exceptions)"
)


def _nm(library: Path, *flags: str) -> list[tuple[str, str]]:
    nm = shutil.which("nm") or "nm"
    out = subprocess.run([nm, "-D", *flags, str(library)], capture_output=True, text=True, timeout=30).stdout
    rows = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            rows.append((parts[-2], parts[-1].split("@")[0]))
    return rows


#: `nm` type letters of the defined symbols that are checked against libc names.
DEFINED_KINDS = "TtWwDdBbVviIuG"


def _is_libc_symbol(name: str) -> bool:
    if name.startswith("_Z"):
        return False
    try:
        return hasattr(_libc(), name) or hasattr(_libm(), name)
    except OSError:
        return False


@lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None)


@lru_cache(maxsize=1)
def _libm() -> ctypes.CDLL:
    return ctypes.CDLL("libm.so.6")


def _symbols(library: Path) -> tuple[list[str], list[str], int]:
    """(undefined names, defined names, constructor-section bytes): parsed in-process (elf.py),
    falling back to `nm -D` / `readelf -SW` for objects the parser does not handle."""
    parsed = elf.read(library)
    if parsed is not None:
        defined = [name for kind, name in parsed.defined if kind in DEFINED_KINDS]
        return parsed.undefined, defined, parsed.constructor_bytes
    undefined = [name for _, name in _nm(library, "--undefined-only")]
    defined = [name for kind, name in _nm(library, "--defined-only") if kind in DEFINED_KINDS]
    return undefined, defined, _init_array_size(library)


def check_library(library: Path, language: str) -> tuple[list[LintFinding], str]:
    """(findings, load problem). Findings reject the object; a load problem means it is unusable."""
    findings: list[LintFinding] = []
    undefined, defined, ctor_bytes = _symbols(library)
    for name in undefined:
        if name in ALLOWED_UNDEFINED or _ALLOWED_PATTERNS.match(name):
            continue
        for rule, pattern, reason in SYMBOL_RULES:
            if pattern.match(name):
                findings.append(LintFinding(rule, f"{reason} (symbol {name})", None, name))
                break
        else:
            findings.append(
                LintFinding("symbol_not_allowed", f"{NOT_ALLOWED_REASON} (symbol {name})", None, name)
            )
    if KERNEL_SYMBOL not in defined:
        hint = ' (in C++, declare it extern "C")' if language == "c++" else ""
        return findings, f"the library does not export `{KERNEL_SYMBOL}`{hint}"
    for name in defined:
        if name not in (KERNEL_SYMBOL, "_init", "_fini") and _is_libc_symbol(name):
            findings.append(
                LintFinding(
                    "defines_library_symbol",
                    f"the library defines `{name}`, a C library function: replacing library "
                    "functions (e.g. the clock) is not allowed",
                    None,
                    name,
                )
            )
    findings += _layout_findings(library, language, ctor_bytes)
    return findings, ""


def _init_array_size(library: Path) -> int:
    readelf = shutil.which("readelf") or "readelf"
    out = subprocess.run([readelf, "-SW", str(library)], capture_output=True, text=True, timeout=30).stdout
    total = 0
    for line in out.splitlines():
        m = re.search(r"\]\s+\.(init_array|preinit_array|ctors)\s+\S+\s+\S+\s+\S+\s+([0-9a-f]+)", line)
        if m:
            total += int(m.group(2), 16)
    return total


def _layout_findings(library: Path, language: str, ctor_bytes: int) -> list[LintFinding]:
    """Load-time code, ifuncs, writable data and TLS, judged on the built object (elf.layout)."""
    found = elf.layout(library)
    base = _baseline(language)
    if found is None or base is None:  # not ELF64-LE: fall back to the section-size rule
        extra = ctor_bytes - (_baseline_ctor_bytes(language))
        return [LintFinding("constructor", CONSTRUCTOR_REASON + f" ({extra // 8} extra entries)", None,
                            ".init_array")] if extra > 0 else []
    findings = []
    extra_code = sorted(set(found.load_code) - set(base.load_code))
    if extra_code:
        findings.append(LintFinding("constructor", CONSTRUCTOR_REASON + f" ({', '.join(extra_code)})", None,
                                    extra_code[0]))
    if found.ifuncs:
        findings.append(LintFinding(
            "ifunc", "the library has indirect functions (ifunc / target_clones: "
            f"{', '.join(found.ifuncs)}), whose resolvers run while it loads; a kernel may only run when "
            "called",
            None, found.ifuncs[0]))
    if found.writable_bytes > base.writable_bytes:
        findings.append(LintFinding(
            "global_state", f"the library has {found.writable_bytes - base.writable_bytes} bytes of writable "
            "global or static data beyond what an empty kernel has (static variables, file-scope compound "
            "literals, mutable members of const objects): a kernel keeps no state between calls; use locals "
            "or the output buffers", None, "writable data"))
    if found.tls_bytes > base.tls_bytes:
        findings.append(LintFinding(
            "global_state",
            f"the library has {found.tls_bytes} bytes of thread-local storage: a kernel keeps "
            "no state between calls", None, "TLS"))
    return findings


CONSTRUCTOR_REASON = (
    "the library runs code when it is loaded or unloaded (constructor / destructor, init/fini entries); "
    "a kernel may only run when called"
)


def _empty_kernel(language: str, tmp: str) -> Path:
    suffix = "cpp" if language == "c++" else "c"
    src = Path(tmp) / f"k.{suffix}"
    prefix = 'extern "C" ' if language == "c++" else ""
    src.write_text(f"{prefix}void {KERNEL_SYMBOL}(void) {{}}\n")
    out = Path(tmp) / "k.so"
    subprocess.run([*compiler_command(language), str(src), "-o", str(out), *LINK_LIBS],
                   capture_output=True, timeout=60, check=True)
    return out


@lru_cache(maxsize=2)
def _baseline(language: str) -> elf.Layout | None:
    """The layout of an empty kernel built with the same compiler and flags."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="sage-baseline-") as tmp:
        return elf.layout(_empty_kernel(language, tmp))


@lru_cache(maxsize=2)
def _baseline_ctor_bytes(language: str) -> int:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="sage-baseline-") as tmp:
        out = _empty_kernel(language, tmp)
        parsed = elf.read(out)
        return parsed.constructor_bytes if parsed is not None else _init_array_size(out)
