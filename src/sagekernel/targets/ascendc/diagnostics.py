"""Compiler, build and runtime errors trimmed to what the model can act on.

bisheng is clang-based (`path:line:col: error: message`, then the source line and a caret);
op_host code is built by the host compiler in the same format; CMake says
`CMake Error at file:line (command):`; msOpGen's build scripts and the runtime print
`[ERROR] ...` lines and CANN error codes such as `EZ9999:`. Paths are mapped back to the model's
own files (`op_kernel/add_custom.cpp:12:5`), skeleton files are marked as such, and paths into
the CANN toolkit are shortened, with the first `note:` that points into the model's files kept
(a template error deep in an API header is explained by the model's call site).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

MAX_ERRORS = 6
MAX_CHARS = 2000

_LOC = re.compile(
    r"^(?P<path>[^\s:][^:]*):(?P<line>\d+)(?::(?P<col>\d+))?: (?P<sev>fatal error|error|warning|note)"
    r": (?P<msg>.*)$"
)
_CMAKE = re.compile(r"^CMake Error at (?P<path>[^:]+):(?P<line>\d+) \((?P<cmd>[^)]*)\):")
_BRACKET = re.compile(r"^\s*\[ERROR\]\s*(?P<msg>.+)$")
_CODE = re.compile(r"\b(E[A-Z0-9]\d{4}|EZ\d{4}):\s*(?P<msg>.*)")
_LINKER = re.compile(r"(undefined reference to|cannot find -l|ld(\.lld)?: error)")


@dataclass(frozen=True)
class Diagnostic:
    path: str  # as the model knows it (op_kernel/add_custom.cpp), or a shortened outside path
    line: int | None
    column: int | None
    severity: str
    message: str
    origin: str  # "model" | "skeleton" | "toolkit" | "build"
    context: tuple[str, ...] = ()  # the source line and caret clang printed, and a kept note


def map_path(raw: str, workdir: Path | None, model_files: set[str]) -> tuple[str, str]:
    """(path to show, origin) for a path in a log."""
    path = raw.strip()
    if workdir is not None:
        root = str(Path(workdir).resolve())
        for prefix in (root + "/project/", root + "/", "/box/build/project/", "/box/build/"):
            if path.startswith(prefix):
                path = path[len(prefix) :]
                break
    for rel in model_files:
        if path == rel or path.endswith("/" + rel):
            return rel, "model"
    if "/Ascend/" in path or "/ascend-toolkit/" in path or "/cann" in path.lower():
        return "<CANN>/" + Path(path).name, "toolkit"
    if path.startswith(("op_host/", "op_kernel/", "twin/", "ext/", "CMakeLists.txt")):
        return path, "skeleton"
    return path, "build"


def parse_log(log: str, workdir: Path | None, model_files: set[str]) -> list[Diagnostic]:
    lines = log.splitlines()
    found: list[Diagnostic] = []
    i = 0
    while i < len(lines):
        line = lines[i].rstrip()
        m = _LOC.match(line.strip())
        if m and m.group("sev") in ("error", "fatal error"):
            path, origin = map_path(m.group("path"), workdir, model_files)
            context: list[str] = []
            j = i + 1
            while j < len(lines) and j <= i + 2 and not _LOC.match(lines[j].strip()):
                if lines[j].strip():
                    context.append(lines[j].rstrip())
                j += 1
            if origin != "model":  # the call site in the model's code, from the notes that follow
                for k in range(j, min(len(lines), j + 40)):
                    n = _LOC.match(lines[k].strip())
                    if n is None:
                        continue
                    if n.group("sev") != "note":
                        break
                    npath, norigin = map_path(n.group("path"), workdir, model_files)
                    if norigin == "model":
                        context.append(f"{npath}:{n.group('line')}: note: {n.group('msg')}")
                        break
            found.append(
                Diagnostic(
                    path,
                    int(m.group("line")),
                    int(m.group("col")) if m.group("col") else None,
                    "error",
                    m.group("msg").strip(),
                    origin,
                    tuple(context),
                )
            )
            i = j
            continue
        c = _CMAKE.match(line.strip())
        if c:
            path, origin = map_path(c.group("path"), workdir, model_files)
            detail = next((x.strip() for x in lines[i + 1 : i + 6] if x.strip()), "")
            found.append(
                Diagnostic(
                    path, int(c.group("line")), None, "error", f"CMake ({c.group('cmd')}): {detail}", origin
                )
            )
        elif _LINKER.search(line):
            found.append(Diagnostic("<link>", None, None, "error", line.strip(), "build"))
        elif (b := _BRACKET.match(line)) or (b := _CODE.search(line)):
            found.append(
                Diagnostic("<build>", None, None, "error", b.group("msg").strip() or line.strip(), "build")
            )
        i += 1
    return found


def format_diagnostics(diags: list[Diagnostic]) -> str:
    """The first errors, model-file errors first, duplicates dropped, capped in length."""
    seen: set[tuple[str, int | None, str]] = set()
    ordered = sorted(diags, key=lambda d: {"model": 0, "skeleton": 1, "toolkit": 2, "build": 3}[d.origin])
    out: list[str] = []
    for d in ordered:
        key = (d.path, d.line, d.message)
        if key in seen:
            continue
        seen.add(key)
        where = d.path + (f":{d.line}" if d.line else "") + (f":{d.column}" if d.column else "")
        tag = " (fixed skeleton file: the cause is in the code it calls)" if d.origin == "skeleton" else ""
        out.append(f"{where}: {d.severity}: {d.message}{tag}")
        out.extend("    " + c.strip() for c in d.context)
        if len(seen) >= MAX_ERRORS:
            break
    return "\n".join(out)[:MAX_CHARS]


def trim_build_log(log: str, workdir: Path | None, model_files: set[str], stage: str = "build") -> str:
    """What goes back to the model after a failed build step."""
    diags = parse_log(log, workdir, model_files)
    if diags:
        more = len({(d.path, d.line, d.message) for d in diags}) - MAX_ERRORS
        tail = f"\n({more} more errors not shown)" if more > 0 else ""
        return f"{stage} failed:\n" + format_diagnostics(diags) + tail
    last = [x for x in log.strip().splitlines() if x.strip()][-12:]
    return f"{stage} failed:\n" + ("\n".join(last)[:MAX_CHARS] or "(the step printed nothing)")


def trim_runtime_error(text: str, workdir: Path | None = None, model_files: set[str] | None = None) -> str:
    """A runtime failure (aclnn status, AI Core exception, Python traceback): the lines that say why."""
    keep = []
    for line in text.splitlines():
        s = line.strip()
        if re.search(r"error|exception|E[A-Z0-9]\d{4}:|EZ\d{4}|failed|aicore|timeout", s, re.I):
            keep.append(s)
    text_out = "\n".join(dict.fromkeys(keep)) if keep else "\n".join(text.strip().splitlines()[-8:])
    if workdir is not None:
        text_out = text_out.replace(str(Path(workdir).resolve()) + "/project/", "")
    return text_out[:MAX_CHARS]


__all__ = [
    "Diagnostic",
    "format_diagnostics",
    "map_path",
    "parse_log",
    "trim_build_log",
    "trim_runtime_error",
]
