"""Diagnostics of a Triton candidate on the interpreter: the Python traceback (the candidate's own
frame named) and the kernels' `tl.device_print` output, from one call on the probe in the sandbox
(diagnose_child.py). The harness compares the outputs with the reference (harness/diagnose.py).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from sagekernel import sandbox
from sagekernel.targets.device_host import stage_folder
from sagekernel.targets.diagnostics import (
    DiagnosticProbe,
    DiagnosticSection,
    SourceLocation,
    TargetDiagnostics,
    read_log,
)
from sagekernel.tasks.reference import init_arguments
from sagekernel.tasks.task import Task

CHILD = Path(__file__).resolve().parent / "diagnose_child.py"
MARK = "=== sage-diagnose: kernel returned ==="
MAX_SECTION_CHARS = 2500
_FRAME = re.compile(r'File "(?P<path>[^"]*kernel\.py)", line (?P<line>\d+), in (?P<fn>\S+)')
_EXC = re.compile(r"^(?P<kind>[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit)\b).*$", re.MULTILINE)
_CHAINED = re.compile(
    r"The above exception was the direct cause of the following exception:|"
    r"During handling of the above exception, another exception occurred:"
)


def diagnose(
    source: str,
    task: Task,
    probe: DiagnosticProbe,
    workdir: Path,
    *,
    sandbox_kind: str = "auto",
    timeout_s: float = 120.0,
) -> TargetDiagnostics:
    out = TargetDiagnostics(tools=["triton interpreter (TRITON_INTERPRET=1)", "traceback", "device_print"])
    box = workdir / "diag"
    box.mkdir(parents=True, exist_ok=True)
    (box / "kernel.py").write_text(source, encoding="utf-8")
    manifest = {
        "tensors": [
            {"name": t.name, "dtype": t.dtype, "shape": list(t.shape), "role": t.role}
            for t in probe.tensors
            if t.role != "param"
        ],
        "init": init_arguments(task, probe.sizes),
        "seed": probe.param_seed,
    }
    (box / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    kept = [t for t in probe.tensors if t.role != "param"]  # ModelNew draws its own, seeded alike
    for k, t in enumerate(kept):
        (box / f"b{k}.bin").write_bytes(t.data)
    argv = [*sandbox.python_argv("/box/tool/diagnose_child.py")]
    for site in sandbox.site_paths():
        argv += ["--site", site]
    cmd = sandbox.SandboxCommand(
        argv=argv,
        ro_binds=[(str(stage_folder((CHILD,))), "/box/tool")],  # the child alone, no other source
        rw_binds=[(str(box), "/box/diag")],
        workdir="/box/diag",
        env={"TRITON_INTERPRET": "1", "TRITON_CACHE_DIR": "/tmp/triton-cache", "OMP_NUM_THREADS": "1"},
        python=True,
    )
    limits = sandbox.Limits(wall_s=timeout_s, cpu_s=int(timeout_s) + 1, address_space_bytes=16 << 30)
    scratch = workdir / "scratch"
    scratch.mkdir(exist_ok=True)
    result = sandbox.run(cmd, kind=sandbox.best_kind(sandbox_kind), limits=limits, scratch_dir=scratch)
    log = read_log(scratch / "child.log").replace(str(box) + "/", "")
    log = log.replace("/box/diag/", "")
    if result.returncode == 0 and MARK in log:
        printed = log.partition(MARK)[0].strip()
        out.ran = True
        out.outputs = [(box / f"o{k}.bin").read_bytes() for k, t in enumerate(kept) if t.role == "output"]
        out.sections.append(DiagnosticSection("device_print / print output", _cap(printed) or "none"))
        return out
    head, sep, tail = log.partition("Traceback (most recent call last):")
    # A chained traceback prints the root cause first (the interpreter re-raises a kernel's error
    # from the launch line): the innermost candidate frame of the first block that has one.
    for block in _CHAINED.split(tail):
        frames = list(_FRAME.finditer(block))
        if frames:
            out.fault = SourceLocation("kernel.py", int(frames[-1].group("line")), frames[-1].group("fn"))
            break
    kinds = list(_EXC.finditer(tail))
    out.fault_kind = kinds[-1].group(0).strip() if kinds else ("timeout" if result.timed_out else "crash")
    if head.strip():
        out.sections.append(DiagnosticSection("device_print / print output", _cap(head.strip())))
    text = (sep + tail) if sep else log
    if result.timed_out:
        text += f"\n(the interpreter run did not finish within {timeout_s:.0f} s)"
    out.sections.append(DiagnosticSection("Python traceback", _cap(text.strip(), tail=True)))
    return out


def _cap(text: str, *, tail: bool = False) -> str:
    """Printed output keeps its beginning; a traceback its end (where the error is)."""
    if len(text) <= MAX_SECTION_CHARS:
        return text
    return "... (cut)\n" + text[-MAX_SECTION_CHARS:] if tail else text[:MAX_SECTION_CHARS] + "\n... (cut)"
