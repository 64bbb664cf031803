"""Static rules applied to the candidate AFTER the preprocessor (the compiler's saved `.i` file).

The source lint (lint.py) reads what the model wrote; macros can hide every word it looks for:
`#define KEEP static`, a token-pasted `__as##m__` or `destruc##tor`, a `_Pragma("GCC optimize")`,
a computed `#include MACRO`. The build keeps the preprocessed translation unit (`-save-temps`),
and this module re-runs the source rules on the lines that come from the candidate's own file
(with their original line numbers) and checks that every other file it pulled in is a system
header under /usr.
"""

from __future__ import annotations

import re

from sagekernel.harness.verdict import LintFinding
from sagekernel.targets.cpu import lint

_MARKER = re.compile(r'^#\s*(\d+)\s+"((?:[^"\\]|\\.)*)"')
#: Where system headers live (inside the sandbox only /usr and /lib are visible at all).
SYSTEM_PREFIXES = ("/usr/",)
FOREIGN_INCLUDE_REASON = (
    "the kernel includes a file that is not a system header; only the standard headers may be "
    "included (no files from the task, the harness or the filesystem)"
)
MACRO_NOTE = " (after macro expansion)"


def main_file_text(preprocessed: str) -> tuple[str, list[str]]:
    """(the candidate file's lines after preprocessing, at their original line numbers; every
    other file named by a line marker)."""
    main: str | None = None
    current, line = "", 1
    lines: dict[int, list[str]] = {}
    files: list[str] = []
    for raw in preprocessed.splitlines():
        m = _MARKER.match(raw)
        if m is not None:
            current, line = m.group(2), int(m.group(1))
            if main is None:
                main = current
            elif current != main and current not in files:
                files.append(current)
            continue
        if current == main:
            lines.setdefault(line, []).append(raw)
        line += 1
    last = max(lines, default=0)
    text = "\n".join(" ".join(lines.get(i, [])) for i in range(1, last + 1))
    return text, files


def lint_preprocessed(preprocessed: str) -> list[LintFinding]:
    """Rule violations in the preprocessed translation unit (see the module docstring)."""
    text, files = main_file_text(preprocessed)
    findings: list[LintFinding] = []
    for name in files:
        if not name.startswith("<") and not name.startswith(SYSTEM_PREFIXES):
            findings.append(LintFinding("include", f"{FOREIGN_INCLUDE_REASON} (found {name})", None, name))
    seen = {(f.rule, f.line) for f in findings}
    for f in lint.lint_source(text, None, check_strings=False):
        if f.rule == "include" or (f.rule, f.line) in seen:
            continue
        seen.add((f.rule, f.line))
        findings.append(LintFinding(f.rule, f.reason + MACRO_NOTE, f.line, f.excerpt))
    return findings
