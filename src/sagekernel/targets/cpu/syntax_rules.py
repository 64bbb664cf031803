"""CPU source rules on the parse tree (syntax.py, syntax_names.py): names, attributes, pragmas and
line markers. This module holds the tables (what is forbidden and why); the front end reads.

Rules look at tokens the parser produced, never at raw text, so comments and literals never fire
them and spacing, parentheses or attribute order cannot hide a name:
- names: an identifier is flagged wherever it stands (a call, `(f)(x)`, `(*&f)(x)`, `&f`, a
  function-pointer initialiser, a declaration). Names that are ordinary words (`time`, `open`,
  `signal`, ...) are flagged as a callee, a declared function or a value, but not where the kernel
  declares a variable or parameter of that name in the same function or at file scope.
- attributes: every name inside `__attribute__((...))`, `__attribute((...))`, `__declspec(...)`
  and `[[...]]` (any prefix: `gnu::`, `using gnu:`), with `__x__` read as `x`, in any position.
- pragmas: `#pragma` lines, `_Pragma("...")` operators (their string is parsed as the pragma).
- line markers: `#line` and GNU `# N "file"` in the candidate's own text.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from functools import lru_cache

from sagekernel.seam import LintFinding
from sagekernel.targets.cpu import syntax
from sagekernel.targets.cpu import syntax_names as names
from sagekernel.targets.cpu.contract import KERNEL_SYMBOL
from sagekernel.targets.cpu.syntax import Token, Unit

FAST_MATH_REASON = (
    "relaxes floating-point semantics (fast-math / optimize pragmas or attributes); results "
    "must keep IEEE semantics, so NaN/Inf and rounding stay comparable"
)
FP_ENV_REASON = (
    "changes the floating-point environment (rounding mode, flush-to-zero, exception masks); "
    "the setting outlives the call and changes later results and the reference's arithmetic"
)
CONSTRUCTOR_REASON = "code that runs when the library is loaded or unloaded runs outside the harness's view"
TARGET_REASON = (
    "per-function target options compile code for other instruction sets or options than the "
    "harness's fixed flags"
)
SYMBOL_REASON = (
    "changes how the linker or loader sees a symbol; the library exports only sage_kernel and may "
    "not replace, alias or hide other code"
)
LINE_MARKER_REASON = (
    "line markers rewrite where code appears to come from (the preprocessed-unit check would read "
    "the kernel's own code as a system header's)"
)
LIBRARY_SYMBOL_REASON = (
    "a C library function: replacing library functions (e.g. the clock) is not allowed"
)


NAME_RULES: tuple[names.NameRule, ...] = (
    names.NameRule(
        "library_op",
        "calls a library routine (BLAS/LAPACK/MKL/oneDNN/Eigen/FFTW) that does the operator's "
        "work; the kernel must compute it itself",
        names.whole(r"cblas_\w+|LAPACKE_\w+|mkl_\w+|openblas_\w+|dnnl_\w+|fftwf?l?_\w+|[sdcz]ge(?:mm|mv)_|Eigen"),
    ),
    names.NameRule(
        "timer",
        "reads or defines a clock; timing belongs to the harness and a kernel must not observe or replace it",
        names.whole(
            r"clock_gettime|clock_getres|gettimeofday|timespec_get|omp_get_wtime|omp_get_wtick|getrusage|"
            r"_?_rdtscp?|__builtin_ia32_rdtscp?|__rdpmc|__builtin_ia32_rdpmc|__builtin_readcyclecounter|chrono"
        ),
    ),
    names.NameRule(
        "timer",
        "reads or defines a clock; timing belongs to the harness and a kernel must not observe or replace it",
        names.whole(r"clock|time|times|rdtsc"),
        word=True,
    ),
    names.NameRule(
        "os_access",
        "file, network, process or dynamic-loading calls are not allowed in a kernel: it may "
        "only read its inputs and write its outputs",
        names.whole(
            r"fopen|freopen|fdopen|openat|open64|creat64|execl|execlp|execle|execv|execvp|execvpe|execve|popen|"
            r"dlopen|dlsym|dlvsym|dlmopen|ptrace|mmap64|mprotect|getenv|secure_getenv|process_vm_readv|"
            r"process_vm_writev|memfd_create|vfork|posix_spawnp?"
        ),
    ),
    names.NameRule(
        "os_access",
        "file, network, process or dynamic-loading calls are not allowed in a kernel: it may "
        "only read its inputs and write its outputs",
        names.whole(r"open|creat|socket|connect|fork|clone|system|syscall|mmap"),
        word=True,
    ),
    names.NameRule(
        "threads",
        "threads outside OpenMP are not allowed: their work escapes the timer and the thread budget",
        names.whole(r"pthread_create|thrd_create|std::j?thread|std::async"),
    ),
    names.NameRule("fp_environment", FP_ENV_REASON, names.whole(
        r"_?_?fe(?:set\w*|updateenv|holdexcept|enableexcept|disableexcept|raiseexcept|clearexcept)|"
        r"_mm_setcsr|_MM_SET_\w+|__builtin_ia32_\w*csr\w*|__builtin_ia32_(?:fldenv|fnclex|frstor|fxrstor\w*|"
        r"xrstor\w*)|_fxrstor\w*|_xrstor\w*|__builtin_(?:aarch64|arm)_set_fp\w*|__builtin_set_fpscr\w*|"
        r"_controlfp\w*|_control87|__control87_2|_FPU_SETCW|__setfpucw"
    )),
    names.NameRule(
        "omp_state",
        "changes OpenMP settings (omp_set_*): they persist between calls (hidden state) and the "
        "thread count is fixed by the harness; use a num_threads clause or the defaults instead",
        names.whole(r"omp_set_(?!(?:lock|nest_lock)\Z)\w+|omp_init_allocator|omp_pause_resource\w*"),
    ),
    names.NameRule(
        "fallback",
        "signal handlers and non-local jumps hide crashes and route around the kernel",
        names.whole(r"setjmp|longjmp|sigsetjmp|siglongjmp|_setjmp|_longjmp|__builtin_setjmp|__builtin_longjmp|"
               r"sigaction|sigsetjmp"),
    ),
    names.NameRule(
        "fallback",
        "signal handlers and non-local jumps hide crashes and route around the kernel",
        names.whole(r"signal"),
        word=True,
    ),
)

INLINE_ASM_REASON = "inline assembly is not allowed; use SIMD intrinsics, which the compiler checks"
_ASM_WORDS = frozenset({"asm", "__asm__", "__asm"})

#: attribute name (with `__x__` read as `x`) -> (rule, reason with the attribute's own why).
ATTRIBUTES: dict[str, tuple[str, str]] = {
    "optimize": ("fast_math", FAST_MATH_REASON + " (attribute 'optimize' compiles the function with other "
                 "options, e.g. fast-math or -Ofast)"),
    "target": ("target_attribute", TARGET_REASON + " (attribute 'target' can enable ISA or FP options the "
               "build did not choose)"),
    "target_clones": ("target_attribute", TARGET_REASON + " (attribute 'target_clones' also dispatches "
                      "through an ifunc resolver that runs at load time)"),
    "ifunc": ("constructor", CONSTRUCTOR_REASON + " (attribute 'ifunc': its resolver runs when the library "
              "is loaded, before the harness locks the process down)"),
    "constructor": ("constructor", CONSTRUCTOR_REASON + " (attribute 'constructor' runs the function "
                    "when the library is loaded)"),
    "destructor": ("constructor", CONSTRUCTOR_REASON + " (attribute 'destructor' runs the function when the "
                   "library is unloaded)"),
    "init_priority": ("constructor", CONSTRUCTOR_REASON + " (attribute 'init_priority' orders a static "
                      "constructor)"),
    "section": ("constructor", CONSTRUCTOR_REASON + " (attribute 'section' can place code or data in "
                ".init_array/.fini_array, which the loader runs, or in writable sections that keep state)"),
    "weak": ("symbol_attribute", SYMBOL_REASON + " (attribute 'weak': a weak definition can replace, or be "
             "replaced by, another definition at load time)"),
    "weakref": ("symbol_attribute", SYMBOL_REASON + " (attribute 'weakref' makes a name refer to another "
                "symbol, so the name the rules read is not the code that runs)"),
    "alias": ("symbol_attribute", SYMBOL_REASON + " (attribute 'alias' makes a name refer to another "
              "symbol, so the name the rules read is not the code that runs)"),
    "visibility": ("symbol_attribute", SYMBOL_REASON + " (attribute 'visibility' changes which symbols the "
                   "library exports, and so which it can interpose)"),
    "externally_visible": ("symbol_attribute", SYMBOL_REASON + " (attribute 'externally_visible' exports a "
                           "symbol)"),
    "used": ("symbol_attribute", SYMBOL_REASON + " (attribute 'used' keeps code or data the kernel never "
             "visibly uses: a place to hide state or load-time code)"),
    "retain": ("symbol_attribute", SYMBOL_REASON + " (attribute 'retain' keeps code or data the kernel never "
               "visibly uses: a place to hide state or load-time code)"),
    "symver": ("symbol_attribute", SYMBOL_REASON + " (attribute 'symver' binds a definition to another "
               "symbol's version)"),
    "copy": ("symbol_attribute", SYMBOL_REASON + " (attribute 'copy' copies another declaration's "
             "attributes, which can carry any of the ones above)"),
}


def check(unit: Unit, *, library_names: bool = True) -> list[LintFinding]:
    """Every tree rule's findings in `unit`, in source order (duplicates per rule and line removed)."""
    lines = unit.text.split("\n")
    findings: list[LintFinding] = []
    seen: set[tuple[str, int]] = set()

    def add(rule: str, reason: str, row: int) -> None:
        line = unit.line(row)
        if (rule, line) not in seen:
            seen.add((rule, line))
            excerpt = lines[row].strip()[:160] if 0 <= row < len(lines) else ""
            findings.append(LintFinding(rule=rule, reason=reason, line=line, excerpt=excerpt))

    tokens = unit.tokens
    variables = syntax.variables_by_scope(tokens)
    for rule, reason, row in _token_findings(tokens, unit.cxx, variables):
        add(rule, reason, row)
    for d in unit.directives:
        if d.name == "line" or d.name[:1].isdigit():
            add("line_marker", LINE_MARKER_REASON + f" (found #{d.name} {d.rest[:60]})".rstrip(), d.row)
        elif d.name == "pragma":
            words = syntax.fragment_tokens(d.rest, d.row, unit.cxx)
            for rule, reason in _pragma_findings(words, unit.cxx):
                add(rule, reason, d.row)
    if library_names:
        for name, row in _library_definitions(tokens):
            add("defines_library_symbol", f"the kernel defines `{name}`, {LIBRARY_SYMBOL_REASON}", row)
    findings.sort(key=lambda f: (f.line or 0, f.rule))
    return findings


def _token_findings(
    tokens: list[Token], cxx: bool, variables: dict[int | None, set[str]]
) -> Iterator[tuple[str, str, int]]:
    for i, tok in enumerate(tokens):
        if tok.kind == "preproc_arg":  # a macro body or directive argument: its own tokens
            parent = tok.node.parent if tok.node is not None else None
            if parent is not None and parent.type == "preproc_call":
                continue  # a directive's argument: read by `Unit.directives` (pragmas) instead
            yield from _token_findings(syntax.fragment_tokens(tok.text, tok.row, cxx), cxx, {})
            continue
        if tok.text in _ASM_WORDS:
            yield "inline_asm", INLINE_ASM_REASON, tok.row
        elif names.attribute_opens(tokens, i):
            for name_tok in names.attribute_group(tokens, i):
                attribute = ATTRIBUTES.get(names.attribute_name(name_tok.text))
                if attribute is not None:
                    yield attribute[0], attribute[1], name_tok.row
        elif tok.text in ("_Pragma", "__pragma"):
            for literal in names.pragma_operator_strings(tokens, i):
                words = syntax.fragment_tokens(syntax.string_value(literal.text), tok.row, cxx)
                for rule, reason in _pragma_findings(words, cxx):
                    yield rule, reason, tok.row
        elif (hit := names.name_rule(tok, NAME_RULES, variables)) is not None:
            yield hit.rule, hit.reason, tok.row


def _pragma_findings(words: list[Token], cxx: bool) -> Iterator[tuple[str, str]]:
    """Rule hits of one pragma, given its tokens (`GCC`, `optimize`, `(`, ...)."""
    w = [t.text for t in words] + ["", ""]
    head = (w[0], w[1])
    if head[0] == "GCC" and head[1] in ("optimize", "push_options"):
        yield "fast_math", FAST_MATH_REASON + f" (#pragma GCC {head[1]})"
    elif head == ("GCC", "target"):
        yield "target_attribute", TARGET_REASON + " (#pragma GCC target)"
    elif head == ("GCC", "visibility") or head[0] in ("weak", "redefine_extname"):
        yield "symbol_attribute", SYMBOL_REASON + f" (#pragma {' '.join(x for x in head if x)})"
    elif head == ("GCC", "system_header"):
        yield "line_marker", LINE_MARKER_REASON + " (#pragma GCC system_header)"
    elif (head[0] == "clang" and head[1] in ("fp", "optimize")) or head[0] in ("float_control", "fp_contract",
                                                                               "optimize"):
        yield "fast_math", FAST_MATH_REASON + f" (#pragma {' '.join(x for x in head if x)})"
    elif head[0] == "STDC" and head[1] in ("FP_CONTRACT", "CX_LIMITED_RANGE"):
        yield "fast_math", FAST_MATH_REASON + f" (#pragma STDC {head[1]})"
    elif (head[0] == "STDC" and head[1].startswith("FENV")) or head[0] == "fenv_access":
        yield "fp_environment", FP_ENV_REASON + f" (#pragma {' '.join(x for x in head if x)})"
    elif head[0] in ("init", "fini"):
        yield "constructor", CONSTRUCTOR_REASON + f" (#pragma {head[0]})"
    # Whatever the pragma, code in it is code (`omp ... if(fesetround(0))`, `clang attribute ...`).
    for rule, reason, _row in _token_findings(words, cxx, {}):
        yield rule, reason


# ---- definitions of C library functions ---------------------------------------------------------------


def _library_definitions(tokens: list[Token]) -> Iterator[tuple[str, int]]:
    """Exported (not `static`) function definitions named like a C library function."""
    for tok in tokens:
        node = tok.node
        if tok.kind != "identifier" or node is None or tok.text == KERNEL_SYMBOL:
            continue
        if syntax.declarator_role(node) != "function" or not syntax.exported_definition(node):
            continue
        if _is_libc_name(tok.text):
            yield tok.text, tok.row


@lru_cache(maxsize=4096)
def _is_libc_name(name: str) -> bool:
    try:
        return hasattr(_c_library(), name) or hasattr(_m_library(), name)
    except OSError:
        return False


@lru_cache(maxsize=1)
def _c_library() -> ctypes.CDLL:
    return ctypes.CDLL(None)


@lru_cache(maxsize=1)
def _m_library() -> ctypes.CDLL:
    return ctypes.CDLL("libm.so.6")
