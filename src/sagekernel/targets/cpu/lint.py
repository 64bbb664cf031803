"""Static rules for CPU C/C++ kernels, each with the one-line reason the model is shown.

Most rules run on a real parse (syntax.py, tree-sitter; the rules themselves are in
syntax_rules.py): names, attributes, pragmas, inline assembly, line markers, directives and string
literals are read as the parser's tokens. Two rules still read text: mutable state that outlives a
call (`global_state_lines`, on the source with comments and literals blanked) and sizes written as
literals (`_hardcoded_sizes`). Symbol-level checks on the built library live in build.py; these
rules catch the same things earlier and with a line number.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from sagekernel.seam import LintFinding
from sagekernel.targets.cpu import syntax, syntax_rules
from sagekernel.targets.cpu.contract import KERNEL_SYMBOL
from sagekernel.targets.cpu.flags import is_cxx
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
_INCLUDE_DIRECTIVES = frozenset({"include", "include_next", "import", "embed", "__include_macros"})
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


def excerpt(text: str, line: int) -> str:
    """Line `line` of `text`, stripped and capped (for a finding)."""
    return _excerpt(text.splitlines(), line)


def _excerpt(source_lines: list[str], line: int) -> str:
    return source_lines[line - 1].strip()[:160] if 0 < line <= len(source_lines) else ""


def lint_source(source: str, task: Task | None = None, *, check_strings: bool = True) -> list[LintFinding]:
    """Every rule violation in `source`, at most one finding per (rule, line).

    `check_strings=False` skips the file-path check of string literals (for preprocessed text,
    where `assert` brings in `__FILE__`)."""
    unit = syntax.parse(source, is_cxx(source))
    lines = source.splitlines()
    findings: list[LintFinding] = []
    seen: set[tuple[str, int]] = set()

    def add(rule: str, reason: str, line: int, excerpt: str | None = None) -> None:
        if (rule, line) not in seen:
            seen.add((rule, line))
            findings.append(LintFinding(rule=rule, reason=reason, line=line,
                                        excerpt=_excerpt(lines, line) if excerpt is None else excerpt))

    for f in syntax_rules.check(unit):
        add(f.rule, f.reason, f.line or 0, _excerpt(lines, f.line or 0))
    for rule, reason, line in include_findings(unit):
        add(rule, reason, line)
    if check_strings:
        for line in path_literal_lines(unit):
            add("filesystem_path", PATH_REASON, line)
    code, _strings = strip_source(source)
    for line in global_state_lines(code):
        add("global_state", GLOBAL_STATE_REASON, line)
    if task is not None:
        for line, msg in _hardcoded_sizes(code, task):
            add("hardcoded_shape", f"{HARDCODED_REASON} ({msg})", line)
    findings.sort(key=lambda f: (f.line or 0, f.rule))
    return findings


def include_findings(unit: syntax.Unit) -> Iterator[tuple[str, str, int]]:
    """Includes outside the allow-list, every other directive that pulls in a file, and macros
    defined before an include (they rewrite the header's code, which is read as the header's)."""
    defined: list[tuple[int, str]] = []
    for d in unit.directives:
        if d.name in ("define", "undef"):
            macro = re.match(r"\w*", d.rest).group()  # type: ignore[union-attr]
            if not _FEATURE_MACRO.match(macro):
                defined.append((unit.line(d.row), macro))
        if d.name not in _INCLUDE_DIRECTIVES:
            continue
        for line, macro in defined:
            yield "macro_before_include", f"{MACRO_BEFORE_INCLUDE_REASON} (found {macro})", line
        defined.clear()
        line = unit.line(d.row)
        m = re.match(r'<([^>\n]*)>|"([^"\n]*)"', d.rest) if d.name == "include" else None
        if m is None:
            yield "include", (f"{INCLUDE_REASON}; write #include <header> (found a computed or non-standard "
                              f"directive: #{d.name} {d.rest[:80]})"), line
        elif m.group(2) is not None or not (m.group(1).strip() in ALLOWED_HEADERS
                                             or _INTRIN_HEADER.match(m.group(1).strip())):
            opener = "<" if m.group(1) is not None else '"'
            header = (m.group(1) if m.group(1) is not None else m.group(2)).strip()
            yield "include", f"{INCLUDE_REASON} (found {opener}{header})", line


def path_literal_lines(unit: syntax.Unit) -> Iterator[int]:
    """Lines of string literals that name a file path (adjacent literals read as one string)."""
    tokens = unit.tokens
    i = 0
    while i < len(tokens):
        if tokens[i].kind not in ("string_literal", "raw_string_literal"):
            i += 1
            continue
        j, value = i, ""
        while j < len(tokens) and tokens[j].kind in ("string_literal", "raw_string_literal"):
            value += syntax.string_value(tokens[j].text)
            j += 1
        if _PATH.match(value):
            yield unit.line(tokens[i].row)
        i = j


_TYPE_ONLY = re.compile(
    r"^(?:typedef\b|using\b|template\b|extern\b|static_assert\b|_Static_assert\b|"
    r"namespace\b|friend\b|#)"
)
_TYPE_DEF = re.compile(r"^(?:struct|union|enum|class)\b[^=]*\{\}\s*$|^(?:struct|union|enum|class)\s+\w+\s*$")


def global_state_lines(code: str) -> Iterator[int]:
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
