"""The paper's Ascend C diagnostics as the target's `diagnose()` (audit D1).

On the harness's probe (one small shape; harness/diagnose.py compares the outputs):
- `cpu-twin` (CANN installed, no board needed): the CPU twin build run once; the kernel's
  `AscendC::printf` and `DumpTensor` output is captured, and the outputs come back.
- `npu`: the board build run once with CANN's log on stdout (ASCEND_SLOG_PRINT_TO_STDOUT=1; a failed
  launch carries `aclGetRecentErrMsg()`, bindings.py), then `mssanitizer --tool=memcheck` and
  `--tool=racecheck` on the same call; with `profile` (the optimiser episode) `msprof op` too.
Every run is sandboxed like the runtime (the same binds, environment and device nodes).
Where CANN or the board is missing, the report says so and carries what needs no toolchain: the
static findings and the tiling function's plans on the evaluation shapes (tiling_probe.py).
Unrun here: this machine has no CANN; the tool invocations follow the CANN docs and samples.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from sagekernel import sandbox
from sagekernel.targets.ascendc import availability
from sagekernel.targets.diagnostics import (
    DiagnosticProbe,
    DiagnosticSection,
    SourceLocation,
    TargetDiagnostics,
    read_log,
)

CHILD = Path(__file__).resolve().parent / "runtime" / "diag_child.py"
MAX_SECTION_CHARS = 2500
_DONE = "=== sage-diagnose: outputs written ==="
_FAULT = re.compile(r"(op_kernel/[\w./-]+\.(?:cpp|h|hpp)):(\d+)")
_SIGNAL = re.compile(
    r"(error|illegal|out of bound|overflow|race|uninitiali[sz]ed|EZ\d{4}|E[A-Z0-9]\d{4})", re.I
)


def tool_runs(
    mode: str, child_argv: list[str], out_dir: str, *, profile: bool
) -> list[tuple[str, list[str]]]:
    """(section title, argv) of each diagnostic run, in order. Pure: tested without CANN."""
    runs = [
        ("printf / DumpTensor output" + (" (CPU twin)" if mode == "twin" else " and CANN log"), child_argv)
    ]
    if mode == "npu":
        sanitizer = availability.resolve_tool("mssanitizer") or "mssanitizer"
        runs += [
            ("mssanitizer memcheck", [sanitizer, "--tool=memcheck", "--leak-check=no", *child_argv]),
            ("mssanitizer racecheck", [sanitizer, "--tool=racecheck", *child_argv]),
        ]
        if profile:
            msprof = availability.resolve_tool("msprof") or "msprof"
            runs.append(("msprof op", [msprof, "op", f"--output={out_dir}/msprof", *child_argv]))
    return runs


def write_probe(probe: DiagnosticProbe, folder: Path) -> None:
    """The probe as probe.json + one raw file per tensor (inputs then outputs; parameters are not
    part of an Ascend C operator's ABI)."""
    folder.mkdir(parents=True, exist_ok=True)
    tensors = [t for t in probe.tensors if t.role in ("input", "output")]
    for k, t in enumerate(tensors):
        (folder / f"t{k}.bin").write_bytes(t.data)
    sizes = [int(v) for name, kind, v in probe.scalars if name in probe.sizes]
    attrs = [v for name, _, v in probe.scalars if name not in probe.sizes]
    meta = {
        "tensors": [
            {"name": t.name, "dtype": t.dtype, "shape": list(t.shape), "role": t.role} for t in tensors
        ],
        "sizes": sizes,
        "attrs": attrs,
    }
    (folder / "probe.json").write_text(json.dumps(meta))


def summarise(title: str, log: str) -> tuple[DiagnosticSection, SourceLocation | None]:
    """The lines that say something (tool findings, errors, the kernel's prints), capped."""
    lines = log.replace(_DONE, "").splitlines()
    if title.startswith("mssanitizer") or title.startswith("msprof"):
        lines = [x for x in lines if _SIGNAL.search(x) or "op_kernel/" in x or "summary" in x.lower()] or [
            "(no finding reported)"
        ]
    text = "\n".join(lines).strip()[:MAX_SECTION_CHARS] or "(nothing printed)"
    m = _FAULT.search(log)
    return DiagnosticSection(title, text), (SourceLocation(m.group(1), int(m.group(2))) if m else None)


def not_here(why: str, static: list[str]) -> TargetDiagnostics:
    sections = [DiagnosticSection("not run here", why)]
    if static:
        sections.append(DiagnosticSection("static checks and the tiling function's plans", "\n".join(static)))
    return TargetDiagnostics(tools=["static checks"], sections=sections)


def run_tools(
    runs: list[tuple[str, list[str]]],
    spec_binds: list[tuple[str, str]],
    env: dict[str, str],
    device_nodes: list[str],
    probe_dir: Path,
    workdir: Path,
    sandbox_kind: str,
    timeout_s: float,
) -> TargetDiagnostics:
    found = TargetDiagnostics(tools=[title for title, _ in runs])
    for i, (title, argv) in enumerate(runs):
        scratch = workdir / f"diag{i}"
        scratch.mkdir(parents=True, exist_ok=True)
        result = sandbox.run(
            sandbox.SandboxCommand(
                argv=argv,
                ro_binds=spec_binds,
                rw_binds=[(str(probe_dir), str(probe_dir))],
                env=env,
                python=True,
                device_nodes=device_nodes,
            ),
            kind=sandbox_kind,
            limits=sandbox.Limits(wall_s=timeout_s, cpu_s=int(timeout_s), address_space_bytes=None),
            scratch_dir=scratch,
        )
        log = read_log(scratch / "child.log")
        section, fault = summarise(title, log)
        found.sections.append(section)
        if fault is not None and found.fault is None:
            found.fault, found.fault_kind = fault, title
        if i == 0:
            found.ran = result.returncode == 0 and _DONE in log
            outs = sorted(probe_dir.glob("out*.bin"), key=lambda p: int(p.stem[3:]))
            found.outputs = [p.read_bytes() for p in outs] if found.ran else None
    return found


def child_argv(mode: str, artifact: str, probe_dir: Path) -> list[str]:
    return [sys.executable, str(CHILD), "--mode", mode, "--artifact", artifact, "--probe", str(probe_dir)]


__all__ = ["CHILD", "child_argv", "not_here", "run_tools", "summarise", "tool_runs", "write_probe"]
