"""Static rules for CPU C/C++ kernels, each with the one-line reason the model is shown.

Every rule reads the one C-family parse (syntax.py, tree-sitter, and its queries in
syntax_names.py, syntax_query.py; the token rules are in syntax_rules.py): names, attributes, pragmas, inline
assembly, line markers, directives, string literals, mutable state (`Source.mutable_state`) and
the kernel's parameters. Symbol-level checks on the built library live in build.py; these rules
catch the same things earlier and with a line number.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from sagekernel.seam import LintFinding
from sagekernel.targets.cpu import syntax, syntax_rules
from sagekernel.targets.cpu.contract import KERNEL_SYMBOL
from sagekernel.targets.cpu.flags import is_cxx
from sagekernel.targets.cpu.syntax_names import string_runs
from sagekernel.targets.cpu.syntax_query import Source, line_excerpt, one_per_rule_and_line
from sagekernel.tasks.task import Task

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
MACRO_BEFORE_INCLUDE_REASON = (
    "a macro defined before an #include rewrites the header's code, which the rules read as the "
    "header's; put every #include first (feature-test macros such as _GNU_SOURCE excepted)"
)
_FEATURE_MACRO = re.compile(
    r"(?:_GNU_SOURCE|_DEFAULT_SOURCE|_POSIX_C_SOURCE|_XOPEN_SOURCE\w*|_ISOC\w+_SOURCE|_USE_MATH_DEFINES|"
    r"__STDC_\w+)\Z"
)
_PATH = re.compile(r"\s*/(?:proc|dev|sys|tmp|etc|home|root|var|usr|box|work|run)\b|\s*\.\.?/")
PATH_REASON = "file paths in a kernel mean it reads or writes files, which it may not"
GLOBAL_STATE_REASON = (
    "mutable state that outlives a call (static or global variables) can carry results "
    "between calls; keep all state in locals or in memory allocated per call"
)
HARDCODED_REASON = (
    "a size the contract passes at run time is ignored and its example value is written as a "
    "literal; test shapes differ from the example, so read the size parameter"
)


def excerpt(text: str, line: int) -> str:
    """Line `line` of `text`, stripped and capped (for a finding)."""
    return line_excerpt(text.splitlines(), line)


def lint_source(source: str, task: Task | None = None, *, check_strings: bool = True) -> list[LintFinding]:
    """Every rule violation in `source`, at most one finding per (rule, line).

    `check_strings=False` skips the file-path check of string literals (for preprocessed text,
    where `assert` brings in `__FILE__`)."""
    unit = syntax.parse(source, is_cxx(source))
    return one_per_rule_and_line(source, _findings(source, unit, task, check_strings))


def _findings(
    source: str, unit: syntax.Unit, task: Task | None, check_strings: bool
) -> Iterator[tuple[str, str, int]]:
    for f in syntax_rules.check(unit):
        yield f.rule, f.reason, f.line or 0
    yield from include_findings(unit)
    if check_strings:
        for line in path_literal_lines(unit):
            yield "filesystem_path", PATH_REASON, line
    src = Source(source, unit=unit)
    for state in src.mutable_state():
        yield "global_state", GLOBAL_STATE_REASON, state.line
    if task is not None:
        for line, msg in _hardcoded_sizes(src, task):
            yield "hardcoded_shape", f"{HARDCODED_REASON} ({msg})", line


def include_findings(unit: syntax.Unit) -> Iterator[tuple[str, str, int]]:
    """Includes outside the allow-list, every other directive that pulls in a file, and macros
    defined before an include (they rewrite the header's code, which is read as the header's)."""
    defined: list[tuple[int, str]] = []
    for d in unit.directives:
        if d.name in ("define", "undef") and not _FEATURE_MACRO.match(d.macro):
            defined.append((unit.line(d.row), d.macro))
        if d.name not in syntax.FILE_DIRECTIVES:
            continue
        for line, macro in defined:
            yield "macro_before_include", f"{MACRO_BEFORE_INCLUDE_REASON} (found {macro})", line
        defined.clear()
        line = unit.line(d.row)
        header = d.header if d.name == "include" else None
        if header is None:
            yield "include", (f"{INCLUDE_REASON}; write #include <header> (found a computed or non-standard "
                              f"directive: #{d.name} {d.rest[:80]})"), line
        elif header[0] == '"' or not (header[1] in ALLOWED_HEADERS or _INTRIN_HEADER.match(header[1])):
            yield "include", f"{INCLUDE_REASON} (found {header[0]}{header[1]})", line


def path_literal_lines(unit: syntax.Unit) -> Iterator[int]:
    """Lines of string literals that name a file path (adjacent literals read as one string)."""
    return (unit.line(first.row) for first, value in string_runs(unit.tokens) if _PATH.match(value))


def _hardcoded_sizes(src: Source, task: Task) -> Iterator[tuple[int, str]]:
    names = next((params for _node, params in src.definitions_of(KERNEL_SYMBOL)), [])
    first_size = len(task.inputs) + len(task.outputs)
    for k, (symbol, value) in enumerate(task.sizes.items()):
        if value < 3 or first_size + k >= len(names):
            continue
        param = names[first_size + k]
        if src.identifier_count(param) > 1:
            continue  # the size parameter is read somewhere
        line = next((line for v, line, _text in src.number_literals() if v == value), None)
        if line is not None:
            yield line, f"{symbol} (parameter '{param}') is never read; literal {value} used"
