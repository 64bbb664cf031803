"""Static rules applied to the candidate AFTER the preprocessor (the compiler's saved `.i` file).

The source lint (lint.py) reads what the model wrote; macros can hide every word it looks for:
`#define KEEP static`, a token-pasted `__as##m__` or `destruc##tor`, a `_Pragma("GCC optimize")`,
a computed `#include MACRO`. The build keeps the preprocessed translation unit (`-save-temps`),
and this module parses the lines that come from the candidate's own file (syntax.py, with their
original line numbers: code the candidate wrote and every macro expanded into it) and applies the
tree rules to them, and checks that every other file it pulled in is a system header under /usr.

Which file a line comes from is read from the line markers the preprocessor emitted. That is safe
because the source rules reject every marker the candidate writes (`#line`, `# N "file"`), and the
markers are checked here too: a file name may change only by entering an include (flag 1) or
returning to the file below it (flag 2); an entry from the candidate's file must happen at one of
its `#include` lines when the source is given.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from sagekernel.seam import LintFinding
from sagekernel.targets.cpu import lint, syntax, syntax_rules
from sagekernel.targets.cpu.syntax_query import Source

_MARKER = re.compile(r'^#\s*(\d+)\s+"((?:[^"\\]|\\.)*)"((?:\s+\d+)*)\s*$')
#: Where system headers live (inside the sandbox only /usr and /lib are visible at all).
SYSTEM_PREFIXES = ("/usr/",)
_PREAMBLE = ("<built-in>", "<command-line>")
FOREIGN_INCLUDE_REASON = (
    "the kernel includes a file that is not a system header; only the standard headers may be "
    "included (no files from the task, the harness or the filesystem)"
)
MACRO_NOTE = " (after macro expansion)"


@dataclass
class CandidateLines:
    """The candidate file's lines in the preprocessed unit, one row per emitted line."""

    main: str = ""
    rows: list[str] = field(default_factory=list)
    line_numbers: list[int] = field(default_factory=list)  # the original line of each row
    files: list[str] = field(default_factory=list)  # every other file a marker named
    marker_problems: list[tuple[int | None, str]] = field(default_factory=list)  # (main line, why)


def candidate_lines(preprocessed: str, include_lines: set[int] | None = None) -> CandidateLines:
    """Split the unit by its line markers; `include_lines`, when given, are the source's
    `#include` lines, the only places where an include may be entered from the candidate's file."""
    out = CandidateLines()
    stack: list[str] = []
    line, in_preamble = 1, True
    for raw in preprocessed.splitlines():
        m = _MARKER.match(raw) if raw[:1] == "#" else None
        if m is None:
            if stack and stack[-1] == out.main:
                out.rows.append(raw)
                out.line_numbers.append(line)
            line += 1
            continue
        number, name, flags = int(m.group(1)), m.group(2), set(m.group(3).split())
        if not stack:
            out.main = name
            stack.append(name)
        elif "1" in flags:
            if stack[-1] == out.main and include_lines is not None and line not in include_lines:
                out.marker_problems.append((line, f"an include of {name} begins where the source has none"))
            stack.append(name)
        elif "2" in flags:
            if len(stack) < 2 or stack[-2] != name:
                out.marker_problems.append((None, f"a return to {name}, which did not include the file left"))
            if len(stack) >= 2:
                stack.pop()
            stack[-1] = name
        elif name != stack[-1]:
            allowed = in_preamble and {name, stack[-1]} <= {out.main, *_PREAMBLE}
            if not allowed:
                out.marker_problems.append((line if stack[-1] == out.main else None,
                                            f"the file name changes to {name} without an include"))
            if in_preamble and name == out.main and stack[-1] == "<command-line>":
                in_preamble = False
            stack[-1] = name
        if name != out.main and name not in out.files and name not in _PREAMBLE:
            out.files.append(name)
        line = number
    return out


def main_file_text(preprocessed: str) -> tuple[str, list[str]]:
    """(the candidate file's lines after preprocessing, joined at their original line numbers;
    every other file named by a line marker)."""
    lines = candidate_lines(preprocessed)
    return joined_text(lines), lines.files


def joined_text(lines: CandidateLines) -> str:
    """The candidate's rows joined per original line (line k of the text is source line k)."""
    by_line: dict[int, list[str]] = {}
    for number, row in zip(lines.line_numbers, lines.rows, strict=True):
        if not row.lstrip().startswith("#"):  # a pragma the preprocessor put on its own row
            by_line.setdefault(number, []).append(row)
    last = max(by_line, default=0)
    return "\n".join(" ".join(by_line.get(i, [])) for i in range(1, last + 1))


def lint_preprocessed(preprocessed: str, source: str | None = None) -> list[LintFinding]:
    """Rule violations in the preprocessed translation unit (see the module docstring).

    `source`, the candidate as written, lets the markers be checked against its `#include` lines."""
    include_lines = None
    if source is not None:
        text, line_of_row = syntax.translate_phases(source)
        include_lines = {line_of_row[d.row] for d in syntax.directives(text) if d.name.startswith("include")}
    lines = candidate_lines(preprocessed, include_lines)
    findings: list[LintFinding] = []
    for name in lines.files:
        if not name.startswith("<") and not name.startswith(SYSTEM_PREFIXES):
            findings.append(LintFinding("include", f"{FOREIGN_INCLUDE_REASON} (found {name})", None, name))
    for line, why in lines.marker_problems:
        findings.append(LintFinding("line_marker", f"{syntax_rules.LINE_MARKER_REASON} ({why})", line, ""))
    cxx = lines.main.endswith((".cpp", ".cc", ".cxx", ".C", ".ii"))
    seen = {(f.rule, f.line) for f in findings}

    def add(f: LintFinding) -> None:
        if (f.rule, f.line) not in seen:
            seen.add((f.rule, f.line))
            findings.append(LintFinding(f.rule, f.reason + MACRO_NOTE, f.line, f.excerpt))

    unit = syntax.parse("\n".join(lines.rows), cxx, lines.line_numbers)
    for f in syntax_rules.check(unit):
        add(f)
    text = joined_text(lines)
    for state in Source(text, cxx=cxx).mutable_state():
        add(LintFinding("global_state", lint.GLOBAL_STATE_REASON, state.line, lint.excerpt(text, state.line)))
    return findings
