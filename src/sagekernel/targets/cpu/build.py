"""Build a CPU candidate into a shared object, in the sandbox, and check the object's symbols.

Flags are fixed (never -ffast-math); C++ is detected from the source and built with g++. After
linking, `nm -D` must show only allowed undefined symbols (libc memory/maths, libm, libmvec,
OpenMP, the C++ runtime), `sage_kernel` must be defined, no defined symbol may shadow a libc
function (clock interposition), `.init_array` / `.fini_array` may hold nothing beyond what an
empty kernel built with the same flags holds (no load-time constructors, no destructors), and the
source rules hold again on the preprocessed unit (preprocessed.py: nothing hidden behind macros).
"""

from __future__ import annotations

import time
from pathlib import Path

from sagekernel import sandbox
from sagekernel.seam import LintFinding
from sagekernel.targets.base import BuildResult
from sagekernel.targets.cpu import preprocessed
from sagekernel.targets.cpu.flags import LINK_LIBS, compiler_command, compiler_version, is_cxx
from sagekernel.targets.cpu.symbols import check_library

MAX_MESSAGE_CHARS = 1800


def build(source: str, workdir: Path, *, sandbox_kind: str = "auto", timeout_s: float = 60.0) -> BuildResult:
    """Compile `source` into `workdir/kernel.so`, then check the object."""
    language = "c++" if is_cxx(source) else "c"
    suffix = "cpp" if language == "c++" else "c"
    build_dir = workdir / "build"
    build_dir.mkdir(parents=True, exist_ok=True)
    src_path = build_dir / f"kernel.{suffix}"
    src_path.write_text(source, encoding="utf-8")
    kind = sandbox.best_kind(sandbox_kind)
    argv = [
        *compiler_command(language),
        "-save-temps=obj",  # keeps the preprocessed unit: the rules run again after macro expansion
        f"/box/build/kernel.{suffix}",
        "-o",
        "/box/build/kernel.so",
        *LINK_LIBS,
    ]
    cmd = sandbox.SandboxCommand(argv=argv, rw_binds=[(str(build_dir), "/box/build")], workdir="/box/build")
    limits = sandbox.Limits(
        wall_s=timeout_s, cpu_s=int(timeout_s) + 1, address_space_bytes=None, file_size_bytes=256 << 20
    )
    scratch = workdir / "compile"
    scratch.mkdir(exist_ok=True)
    t0 = time.perf_counter()
    result = sandbox.run(cmd, kind=kind, limits=limits, scratch_dir=scratch)
    seconds = time.perf_counter() - t0
    info = {
        "compiler": compiler_version(argv[0]),
        "command": " ".join(argv),
        "flags": [*argv[1:-4], *LINK_LIBS],
        "language": language,
        "seconds": round(seconds, 4),
        "sandbox": kind,
    }
    library = build_dir / "kernel.so"
    if result.timed_out:
        return BuildResult(False, f"the compiler did not finish within {timeout_s:.0f} s", {}, info)
    log = (scratch / "child.log").read_text("utf-8", "replace")
    if result.returncode != 0 or not library.exists():
        return BuildResult(False, trim_compiler_log(log, suffix), {}, info)
    findings, problem = check_library(library, language)
    findings = check_preprocessed(build_dir, source) + findings
    if problem:
        return BuildResult(False, problem, {}, info, stage="load")
    if findings:
        names = ", ".join(sorted({f.rule for f in findings}))
        return BuildResult(
            False,
            f"the built library was rejected ({names}): " + findings[0].reason,
            {"library": library},  # kept so tests of the runtime defences can run it anyway
            info,
            findings=findings,
            stage="lint",
        )
    return BuildResult(True, "built", {"library": library}, info)


def trim_compiler_log(log: str, suffix: str) -> str:
    """The first errors (with the lines right after each), paths shortened, capped in length."""
    log = log.replace(f"/box/build/kernel.{suffix}", f"kernel.{suffix}").replace("/box/build/", "")
    lines = log.splitlines()
    keep: list[str] = []
    for i, line in enumerate(lines):
        if "error" in line or "undefined reference" in line:
            keep.extend(lines[i : i + 3])
        if len("\n".join(keep)) > MAX_MESSAGE_CHARS:
            break
    text = "\n".join(dict.fromkeys(keep)) if keep else log.strip()
    text = text[:MAX_MESSAGE_CHARS]
    return "compilation failed:\n" + (text or "(the compiler printed nothing)")


def check_preprocessed(build_dir: Path, source: str | None = None) -> list[LintFinding]:
    """The source rules on the compiler's preprocessed unit (macros expanded, includes resolved)."""
    saved = sorted(build_dir.glob("kernel.so-kernel.i*"))
    if not saved:
        return [LintFinding("preprocessed", "the compiler kept no preprocessed source to check", None, "")]
    return preprocessed.lint_preprocessed(saved[0].read_text("utf-8", "replace"), source)


# ---- object checks -------------------------------------------------------------------------------
