"""Static rules for CPU C/C++ kernels, each with the one-line reason the model is shown.

The source is scanned after comments and string/char literals are blanked out (line numbers are
kept), so a rule never fires on prose. String literals are checked separately for file paths.
Symbol-level checks on the built library live in build.py; these rules catch the same things
earlier and with a line number.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from sagekernel.harness.verdict import LintFinding
from sagekernel.targets.cpu.contract import KERNEL_SYMBOL
from sagekernel.tasks.task import Task


@dataclass(frozen=True)
class Rule:
    name: str
    reason: str
    pattern: re.Pattern[str]


def _rx(text: str) -> re.Pattern[str]:
    return re.compile(text, re.MULTILINE)


RULES: tuple[Rule, ...] = (
    Rule(
        "library_op",
        "calls a library routine (BLAS/LAPACK/MKL/oneDNN/Eigen/FFTW) that does the operator's "
        "work; the kernel must compute it itself",
        _rx(
            r"\b(?:cblas_\w+|LAPACKE_\w+|mkl_\w+|openblas_\w+|dnnl_\w+|fftwf?_\w+|[sdcz]ge(?:mm|mv)_)\s*\(|"
            r"\bEigen::"
        ),
    ),
    Rule(
        "timer",
        "reads or defines a clock; timing belongs to the harness and a kernel must not observe or replace it",
        _rx(
            r"\b(?:clock_gettime|gettimeofday|clock|time|times|timespec_get|omp_get_wtime|omp_get_wtick|"
            r"getrusage|__rdtsc|__rdtscp|__builtin_ia32_rdtsc|__builtin_ia32_rdtscp|rdtsc)\s*\(|"
            r"std::chrono\b|\b__rdtsc\b"
        ),
    ),
    Rule(
        "fast_math",
        "relaxes floating-point semantics (fast-math / optimize pragmas or attributes); results "
        "must keep IEEE semantics, so NaN/Inf and rounding stay comparable",
        _rx(
            r"#\s*pragma\s+GCC\s+optimize|#\s*pragma\s+clang\s+fp|#\s*pragma\s+float_control|"
            r"__attribute__\s*\(\(\s*(?:__)?optimize|\bfast-math\b|-Ofast\b|-ffast|"
            r"#\s*pragma\s+GCC\s+push_options|"
            # optimize(...) in any position of an attribute list, or as [[gnu::optimize(...)]]: its
            # string argument is blanked before matching, so the attribute itself is the finding
            r"\b(?:__)?optimize(?:__)?\s*\("
        ),
    ),
    Rule(
        "os_access",
        "file, network, process or dynamic-loading calls are not allowed in a kernel: it may "
        "only read its inputs and write its outputs",
        _rx(
            r"\b(?:fopen|freopen|fdopen|open|openat|creat|socket|connect|fork|vfork|clone|execl|execlp|"
            r"execle|execv|execvp|execvpe|execve|system|popen|dlopen|dlsym|dlmopen|syscall|ptrace|mmap|"
            r"mprotect|getenv|process_vm_readv|memfd_create)\s*\("
        ),
    ),
    Rule(
        "threads",
        "threads outside OpenMP are not allowed: their work escapes the timer and the thread budget",
        _rx(r"\bpthread_create\b|\bstd::(?:j?thread|async)\b|\bthrd_create\b"),
    ),
    Rule(
        "inline_asm",
        "inline assembly is not allowed; use SIMD intrinsics, which the compiler checks",
        _rx(r"\b(?:asm|__asm__|__asm)\b\s*(?:volatile|__volatile__|goto|inline)?\s*\(|\b__asm__\b"),
    ),
    Rule(
        "constructor",
        "code that runs when the library is loaded or unloaded runs outside the harness's view",
        _rx(
            r"__attribute__\s*\(\([^)]*\b(?:__)?(?:constructor|destructor|ifunc|section)(?:__)?\b|"
            r"#\s*pragma\s+init\b|#\s*pragma\s+fini\b"
        ),
    ),
    Rule(
        "fp_environment",
        "changes the floating-point environment (rounding mode, flush-to-zero, exception masks); "
        "the setting outlives the call and changes later results and the reference's arithmetic",
        _rx(
            r"\b(?:_mm_setcsr|__builtin_ia32_ldmxcsr|__builtin_aarch64_set_fp[cs]r\w*|fesetround|"
            r"fesetenv|feupdateenv|feholdexcept|fesetexceptflag|feenableexcept|fedisableexcept)\s*\(|"
            r"\b_MM_SET_\w+\s*\("
        ),
    ),
    Rule(
        "line_marker",
        "line markers (#line N \"file\" or # N \"file\") change which file the compiler attributes the "
        "following lines to, which hides them from the checks of the preprocessed unit; a kernel never "
        "needs one",
        _rx(r"^[ \t]*#[ \t]*(?:line\b|\d)"),
    ),
    Rule(
        "omp_state",
        "changes OpenMP settings (omp_set_*): they persist between calls (hidden state) and the "
        "thread count is fixed by the harness; use a num_threads clause or the defaults instead",
        _rx(r"\bomp_set_(?!lock\b|nest_lock\b)\w+\s*\(|\bomp_(?:init_allocator|pause_resource\w*)\s*\("),
    ),
    Rule(
        "fallback",
        "signal handlers and non-local jumps hide crashes and route around the kernel",
        _rx(r"\b(?:setjmp|longjmp|sigsetjmp|siglongjmp|_setjmp|signal|sigaction)\s*\("),
    ),
)

INCLUDE_REASON = (
    "only standard C/C++ headers, <omp.h> and SIMD intrinsic headers may be included; other "
    "headers bring in libraries or OS access"
)
ALLOWED_HEADERS = frozenset(
    {
        # C
        "assert.h",
        "complex.h",
        "float.h",
        "inttypes.h",
        "iso646.h",
        "limits.h",
        "math.h",
        "stdalign.h",
        "stdarg.h",
        "stdbool.h",
        "stddef.h",
        "stdint.h",
        "stdio.h",
        "stdlib.h",
        "string.h",
        "tgmath.h",
        # OpenMP and SIMD
        "omp.h",
        "arm_neon.h",
        "arm_sve.h",
        # C++
        "algorithm",
        "array",
        "bit",
        "cassert",
        "cfloat",
        "cinttypes",
        "climits",
        "cmath",
        "complex",
        "cstddef",
        "cstdint",
        "cstdio",
        "cstdlib",
        "cstring",
        "functional",
        "initializer_list",
        "iterator",
        "limits",
        "memory",
        "new",
        "numeric",
        "tuple",
        "type_traits",
        "utility",
        "vector",
    }
)
_INTRIN_HEADER = re.compile(r"^[a-z0-9_]*intrin\.h$")
#: Directives that pull in a file; only `#include <...>` / `#include "..."` may (then checked above).
_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*(include|include_next|import|embed)\b[ \t]*(.?)", re.MULTILINE)

PATH_REASON = "file paths in a kernel mean it reads or writes files, which it may not"
GLOBAL_STATE_REASON = (
    "mutable state that outlives a call (static or global variables) can carry results "
    "between calls; keep all state in locals or in memory allocated per call"
)
HARDCODED_REASON = (
    "a size the contract passes at run time is ignored and its example value is written as a "
    "literal; test shapes differ from the example, so read the size parameter"
)


def strip_source(source: str) -> tuple[str, list[tuple[int, str]]]:
    """Blank comments and string/char literal contents, keeping newlines.

    Returns the code and the string literals with their line numbers.
    """
    out: list[str] = []
    strings: list[tuple[int, str]] = []
    i, n, line = 0, len(source), 1
    while i < n:
        c = source[i]
        if source.startswith("//", i):
            j = source.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif source.startswith("/*", i):
            j = source.find("*/", i + 2)
            j = n if j < 0 else j + 2
            chunk = source[i:j]
            out.append(re.sub(r"[^\n]", " ", chunk))
            line += chunk.count("\n")
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and source[j] != c and source[j] != "\n":
                j += 2 if source[j] == "\\" else 1
            j = min(j + 1, n)
            if c == '"':
                strings.append((line, source[i + 1 : j - 1]))
            out.append(c + " " * max(0, j - i - 2) + (c if j - i >= 2 else ""))
            i = j
        else:
            if c == "\n":
                line += 1
            out.append(c)
            i += 1
    return "".join(out), strings


def _line_of(code: str, pos: int) -> int:
    return code.count("\n", 0, pos) + 1


def _excerpt(source_lines: list[str], line: int) -> str:
    return source_lines[line - 1].strip()[:160] if 0 < line <= len(source_lines) else ""


def lint_source(source: str, task: Task | None = None, *, check_strings: bool = True) -> list[LintFinding]:
    """Every rule violation in `source`, at most one finding per (rule, line).

    `check_strings=False` skips the file-path check of string literals (for preprocessed text,
    where `assert` brings in `__FILE__`)."""
    code, strings = strip_source(source)
    lines = source.splitlines()
    findings: list[LintFinding] = []
    seen: set[tuple[str, int]] = set()

    def add(rule: str, reason: str, line: int) -> None:
        if (rule, line) not in seen:
            seen.add((rule, line))
            findings.append(LintFinding(rule=rule, reason=reason, line=line, excerpt=_excerpt(lines, line)))

    for rule in RULES:
        for m in rule.pattern.finditer(code):
            add(rule.name, rule.reason, _line_of(code, m.start()))
    for m in re.finditer(r"^[ \t]*#[ \t]*include[ \t]*([<\"])([^>\"\n]*)", source, re.MULTILINE):
        header = m.group(2).strip()
        if m.group(1) == '"' or not (header in ALLOWED_HEADERS or _INTRIN_HEADER.match(header)):
            add("include", f"{INCLUDE_REASON} (found {m.group(1)}{header})", _line_of(source, m.start()))
    for m in _DIRECTIVE.finditer(code):
        if m.group(1) != "include" or m.group(2) not in ("<", '"'):
            line = _line_of(code, m.start())
            add("include", f"{INCLUDE_REASON}; write #include <header> (found a computed or non-standard "
                f"directive: {_excerpt(lines, line)})", line)
    for line, text in strings if check_strings else []:
        if re.match(r"\s*/(?:proc|dev|sys|tmp|etc|home|root|var|usr|box|work|run)\b|\s*\.\.?/", text):
            add("filesystem_path", PATH_REASON, line)
    for line in _global_state_lines(code):
        add("global_state", GLOBAL_STATE_REASON, line)
    if task is not None:
        for line, msg in _hardcoded_sizes(code, task):
            add("hardcoded_shape", f"{HARDCODED_REASON} ({msg})", line)
    findings.sort(key=lambda f: (f.line or 0, f.rule))
    return findings


_TYPE_ONLY = re.compile(
    r"^(?:typedef\b|using\b|template\b|extern\b|static_assert\b|_Static_assert\b|"
    r"namespace\b|friend\b|#)"
)
_TYPE_DEF = re.compile(r"^(?:struct|union|enum|class)\b[^=]*\{\}\s*$|^(?:struct|union|enum|class)\s+\w+\s*$")


def _global_state_lines(code: str) -> Iterator[int]:
    """Lines that define mutable variables at file/namespace scope, or `static` ones in functions."""
    # Blank preprocessor lines (keeping newlines) so macros don't look like statements.
    code = re.sub(r"^[ \t]*#.*$", lambda m: " " * len(m.group(0)), code, flags=re.MULTILINE)
    stack: list[str] = []  # "ns" for namespace / extern "C" braces, "fn" for function bodies, "blk" others
    stmt: list[str] = []
    stmt_start = -1  # -1 until the current statement has a visible character
    for pos, c in enumerate(code):
        in_scope = all(kind == "ns" for kind in stack)
        if c == "{":
            head = "".join(stmt).strip()
            if in_scope and re.search(r"(?:\bnamespace\b[\w\s:]*|\bextern\s*\"\s*\")$", head):
                stack.append("ns")
                stmt, stmt_start = [], -1
            elif (
                in_scope
                and re.search(r"\)\s*(?:const|noexcept|override|final|->[\w\s:<>*&]+)*\s*$", head)
                and "=" not in head.split("(")[0]
            ):
                stack.append("fn")
                stmt = []
            else:
                stack.append("blk")
                if in_scope:
                    stmt.append("{")
        elif c == "}":
            kind = stack.pop() if stack else "blk"
            if all(k == "ns" for k in stack):
                if kind in ("fn", "ns"):
                    stmt, stmt_start = [], -1
                else:
                    stmt.append("}")
        elif in_scope:
            if stmt_start < 0 and not c.isspace():
                stmt_start = pos  # the statement's first visible character (for its line number)
            if c == ";":
                text = re.sub(r"\s+", " ", "".join(stmt)).strip()
                if _is_mutable_definition(text):
                    yield _line_of(code, max(stmt_start, 0))
                stmt, stmt_start = [], -1
            else:
                stmt.append(c)
    for m in re.finditer(r"\b(?:static|thread_local|_Thread_local|__thread)\b(?!_)", code):
        depth_kind = _scope_at(code, m.start())
        if depth_kind == "fn":
            rest = code[m.end() : m.end() + 80]
            if not re.match(r"\s*(?:const\b|constexpr\b|inline\b|void\b[^;=]*\()", rest) and not re.match(
                r"[^;={]*\bconst\b[^;={*]*\w+\s*(?:\[|=)", rest
            ):
                yield _line_of(code, m.start())


def _is_mutable_definition(text: str) -> bool:
    if not text or _TYPE_ONLY.match(text) or _TYPE_DEF.match(text):
        return False
    before_eq = text.split("=", 1)[0]
    if re.search(r"\(\s*\*+\s*(?!const\b)\w+\s*(?:\[[^\]]*\]\s*)*\)\s*\(", before_eq):
        return True  # a function-pointer variable (not `* const`): mutable, can carry any pointer
    if "(" in before_eq:  # a prototype
        return False
    return not re.search(r"\bconst(?:expr)?\b", before_eq)


def _scope_at(code: str, pos: int) -> str:
    """'fn' if `pos` lies inside a function body, else 'file' (cheap: depth > 0 outside namespaces)."""
    depth = 0
    for c in code[:pos]:
        if c == "{":
            depth += 1
        elif c == "}":
            depth = max(0, depth - 1)
    if depth == 0:
        return "file"
    opens = [m.start() for m in re.finditer(r"\bnamespace\b[\w\s:]*\{|\bextern\s*\"\s*\"\s*\{", code[:pos])]
    return "fn" if depth > len(opens) else "file"


def kernel_parameter_names(code: str) -> list[str]:
    """Parameter names of `sage_kernel` in the (stripped) source, in order; [] if not found."""
    m = re.search(rf"\b{KERNEL_SYMBOL}\s*\(", code)
    if m is None:
        return []
    depth, i = 1, m.end()
    while i < len(code) and depth:
        depth += {"(": 1, ")": -1}.get(code[i], 0)
        i += 1
    params = code[m.end() : i - 1]
    names = []
    for part in params.split(","):
        ids = re.findall(r"[A-Za-z_]\w*", part.split("[")[0])
        if ids:
            names.append(ids[-1])
    return names


def _hardcoded_sizes(code: str, task: Task) -> Iterator[tuple[int, str]]:
    names = kernel_parameter_names(code)
    first_size = len(task.inputs) + len(task.outputs)
    for k, (symbol, value) in enumerate(task.sizes.items()):
        if value < 3 or first_size + k >= len(names):
            continue
        param = names[first_size + k]
        if len(re.findall(rf"\b{re.escape(param)}\b", code)) > 1:
            continue  # the size parameter is read somewhere
        m = re.search(rf"(?<![\w.]){value}(?:[uUlL]*)\b(?!\.)", code)
        if m is not None:
            yield (
                _line_of(code, m.start()),
                f"{symbol} (parameter '{param}') is never read; literal {value} used",
            )
