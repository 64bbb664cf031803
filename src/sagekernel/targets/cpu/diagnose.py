"""Diagnostics of a CPU candidate: a debug build with warnings and sanitizers, run on the probe.

The candidate is compiled with `-g -O1 -Wall -Wextra -fsanitize=address,undefined` together with
a generated `diag_main.c` that reads the probe's buffers from files into exactly-sized heap
blocks (one `malloc` per buffer, each on its own line, so AddressSanitizer's allocation frame
names the buffer), calls `sage_kernel` once with the probe's scalars, and writes the outputs back.
Both the build and the run happen in the sandbox like every candidate command (sandbox.py);
the kernel's own `printf` output is what the run printed before the report. The harness compares
the outputs with the reference (harness/diagnose.py).
"""

from __future__ import annotations

import re
from pathlib import Path

from sagekernel import sandbox
from sagekernel.targets.cpu.contract import KERNEL_SYMBOL
from sagekernel.targets.cpu.flags import is_cxx
from sagekernel.targets.diagnostics import (
    DiagnosticProbe,
    DiagnosticSection,
    SourceLocation,
    TargetDiagnostics,
    read_log,
)

MAX_SECTION_CHARS = 2500
_SAN_FLAGS = (
    "-g",
    "-O1",
    "-fno-omit-frame-pointer",
    "-fsanitize=address,undefined",
    "-fno-sanitize-recover=all",
    "-fopenmp",
    "-Wall",
    "-Wextra",
)
_ASAN_OPTIONS = "detect_leaks=0:abort_on_error=0:symbolize=1:print_summary=1:exitcode=86"
_UBSAN_OPTIONS = "print_stacktrace=1:halt_on_error=1:exitcode=87"
_MARK = "=== sage-diagnose: kernel returned ==="
_FRAME = re.compile(
    r"#\d+\s+0x[0-9a-f]+\s+in\s+(?P<fn>\S+)\s+(?P<path>\S*?(?P<file>kernel\.(?:c|cpp))):(?P<line>\d+)"
)
_UBSAN_AT = re.compile(r"(?P<file>kernel\.(?:c|cpp)):(?P<line>\d+):\d+: runtime error: (?P<what>.*)")
_ASAN_KIND = re.compile(r"ERROR: AddressSanitizer: (?P<kind>[\w-]+)")
_ALLOC_AT = re.compile(r"#\d+\s+0x[0-9a-f]+\s+in\s+main\s+\S*diag_main\.c:(?P<line>\d+)")


#: Where the diagnostic build and run see their folder. Every path in their command lines is
#: absolute under it, because only bwrap runs a command in `workdir`; the weaker sandboxes rewrite
#: /box paths to the host folder but start in a private temporary folder ("cc1: diag_main.c: No
#: such file or directory" without bubblewrap). The run changes into the folder it is given.
_BOX = "/box/diag"


def main_source(probe: DiagnosticProbe) -> tuple[str, dict[int, str]]:
    """diag_main.c and the map from each allocation's line to its buffer name."""
    lines = [
        "#include <stdint.h>",
        "#include <stdio.h>",
        "#include <stdlib.h>",
        "#include <unistd.h>",
        "",
        f"extern void {KERNEL_SYMBOL}();",
        "",
        "static void load(void *p, const char *path, size_t n) {",
        '    FILE *f = fopen(path, "rb");',
        '    if (!f || fread(p, 1, n, f) != n) { fprintf(stderr, "cannot read %s\\n", path); exit(90); }',
        "    fclose(f);",
        "}",
        "",
        "static void save(const void *p, const char *path, size_t n) {",
        '    FILE *f = fopen(path, "wb");',
        '    if (!f || fwrite(p, 1, n, f) != n) { fprintf(stderr, "cannot write %s\\n", path); exit(91); }',
        "    fclose(f);",
        "}",
        "",
        "int main(int argc, char **argv) {",
        "    setvbuf(stdout, NULL, _IONBF, 0);",
        '    if (argc > 1 && chdir(argv[1]) != 0) { perror("chdir"); return 92; }  /* the probe\'s folder */',
    ]
    alloc_lines: dict[int, str] = {}
    for k, t in enumerate(probe.tensors):
        lines.append(f"    unsigned char *b{k} = malloc({max(len(t.data), 1)});  /* {t.role} {t.name} */")
        alloc_lines[len(lines)] = t.name
        lines.append(f'    load(b{k}, "b{k}.bin", {len(t.data)});')
    args = [f"(void *)b{k}" for k in range(len(probe.tensors))]
    args += [
        f"(int64_t){int(v)}" if kind == "i64" else f"(float){float(v)!r}" for _, kind, v in probe.scalars
    ]
    # called through a pointer of the contract's ABI types (an unprototyped call would promote floats)
    proto = (
        ", ".join(
            ["void *"] * len(probe.tensors)
            + ["int64_t" if kind == "i64" else "float" for _, kind, _ in probe.scalars]
        )
        or "void"
    )
    lines.append(f"    void (*kernel)({proto}) = (void (*)({proto})){KERNEL_SYMBOL};")
    lines.append(f"    kernel({', '.join(args)});")
    lines.append(f'    fprintf(stderr, "\\n{_MARK}\\n");')
    for k, t in enumerate(probe.tensors):
        if t.role == "output":
            lines.append(f'    save(b{k}, "o{k}.bin", {len(t.data)});')
    lines += ["    return 0;", "}", ""]
    return "\n".join(lines), alloc_lines


def diagnose(
    source: str, probe: DiagnosticProbe, workdir: Path, *, sandbox_kind: str = "auto", timeout_s: float = 60.0
) -> TargetDiagnostics:
    """Build the candidate with warnings and sanitizers, run it once on the probe, read the report."""
    out = TargetDiagnostics(tools=["gcc -Wall -Wextra", "AddressSanitizer", "UndefinedBehaviorSanitizer"])
    cxx = is_cxx(source)
    kernel_name = "kernel.cpp" if cxx else "kernel.c"
    box = workdir / "diag"
    box.mkdir(parents=True, exist_ok=True)
    (box / kernel_name).write_text(source, encoding="utf-8")
    main, alloc_lines = main_source(probe)
    (box / "diag_main.c").write_text(main, encoding="utf-8")
    for k, t in enumerate(probe.tensors):
        (box / f"b{k}.bin").write_bytes(t.data)
    kind = sandbox.best_kind(sandbox_kind)
    lang = ["-std=c++17", "-Drestrict=__restrict__"] if cxx else ["-std=gnu11"]
    compiler = "g++" if cxx else "gcc"
    argv = [
        compiler,
        *_SAN_FLAGS,
        "-x",
        "c",
        "-std=gnu11",
        f"{_BOX}/diag_main.c",
        "-x",
        "c++" if cxx else "c",
        *lang,
        f"{_BOX}/{kernel_name}",
        "-o",
        f"{_BOX}/diag",
        "-lm",
    ]
    log, ok = _sandboxed(argv, box, kind, timeout_s, "compile")
    warnings = _clean(log, box)
    if not ok:
        out.sections.append(
            DiagnosticSection("debug build failed (gcc -Wall -Wextra -fsanitize=...)", warnings)
        )
        return out
    kernel_warnings = "\n".join(line for line in warnings.splitlines() if "diag_main.c" not in line).strip()
    out.sections.append(DiagnosticSection("compiler warnings (-Wall -Wextra)", kernel_warnings or "none"))
    env = {"ASAN_OPTIONS": _ASAN_OPTIONS, "UBSAN_OPTIONS": _UBSAN_OPTIONS, "OMP_NUM_THREADS": "1"}
    log, ran = _sandboxed([f"{_BOX}/diag", _BOX], box, kind, timeout_s, "run", env=env)
    printed = log.partition(_MARK)[0]
    if ran and _MARK in log:
        out.ran = True
        out.outputs = [
            (box / f"o{k}.bin").read_bytes() for k, t in enumerate(probe.tensors) if t.role == "output"
        ]
        out.sections.append(
            DiagnosticSection("kernel output (printf, debug run)", _cap(printed.strip()) or "none")
        )
        return out
    head, sep, _ = log.partition("=================================================================")
    ub = _UBSAN_AT.search(log)
    asan = _ASAN_KIND.search(log)
    frame = _FRAME.search(log)
    if ub:
        out.fault = SourceLocation(ub.group("file"), int(ub.group("line")))
        out.fault_kind = "undefined behaviour: " + ub.group("what").strip()
        printed = log[: ub.start()]
    elif frame:
        out.fault = SourceLocation(frame.group("file"), int(frame.group("line")), frame.group("fn"))
        out.fault_kind = asan.group("kind") if asan else "crash"
        printed = head if sep else ""
    allocated = log.find("allocated by thread")
    alloc = _ALLOC_AT.search(log, allocated) if asan and allocated >= 0 else None
    if alloc and int(alloc.group("line")) in alloc_lines:
        out.fault_buffer = alloc_lines[int(alloc.group("line"))]
    if printed.strip():
        out.sections.append(DiagnosticSection("kernel output (printf, debug run)", _cap(printed.strip())))
    report_text = _clean(log[len(printed) :] if printed else log, box)
    out.sections.append(DiagnosticSection("sanitizer report", _cap(_trim_report(report_text))))
    return out


def _sandboxed(
    argv: list[str], box: Path, kind: str, timeout_s: float, name: str, env: dict[str, str] | None = None
) -> tuple[str, bool]:
    cmd = sandbox.SandboxCommand(
        argv=argv, rw_binds=[(str(box), _BOX)], workdir=_BOX, env=env or {}, python=False
    )
    # AddressSanitizer reserves terabytes of shadow address space: no RLIMIT_AS (wall/CPU limits stay)
    limits = sandbox.Limits(
        wall_s=timeout_s, cpu_s=int(timeout_s) + 1, address_space_bytes=None, file_size_bytes=64 << 20
    )
    scratch = box.parent / f"scratch-{name}"
    scratch.mkdir(exist_ok=True)
    result = sandbox.run(cmd, kind=kind, limits=limits, scratch_dir=scratch)
    log = read_log(scratch / "child.log")
    if result.timed_out:
        log += f"\n(the {name} step did not finish within {timeout_s:.0f} s)"
    return log, result.returncode == 0 and not result.timed_out


def _clean(log: str, box: Path) -> str:
    return log.replace(str(box) + "/", "").replace("/box/diag/", "")


def _trim_report(text: str) -> str:
    """The sanitizer's headline, the candidate's frames and the allocation, without addresses' noise."""
    keep = [
        line
        for line in text.splitlines()
        if line.strip()
        and not line.startswith(
            (
                "Shadow",
                "  0x",
                "=>0x",
                "  Addressable",
                "  Partially",
                "  Heap",
                "  Freed",
                "  Stack",
                "  Global",
                "  Poisoned",
                "  Container",
                "  Array",
                "  Intra",
                "  ASan",
                "  Left",
                "  Right",
            )
        )
    ]
    return "\n".join(keep)


def _cap(text: str) -> str:
    return text if len(text) <= MAX_SECTION_CHARS else text[:MAX_SECTION_CHARS] + "\n... (cut)"
