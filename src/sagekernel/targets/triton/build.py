"""Building a Triton candidate: parse and byte-compile, then the ahead-of-time compile gate.

The gate (aot_child.py) runs in the build sandbox with a timeout: it records every launch that
`ModelNew.forward` makes on the task's example inputs and compiles each kernel with
`triton.compile` for `GPUTarget("cuda", 90, 32)` (sm_90): type, shape and constexpr errors
surface here, on a machine without a GPU. The gate is skipped (and says so in `info["aot"]`)
when triton is not importable here, and for the `npu` device (triton-ascend's compiler needs CANN).
"""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path
from typing import Any

from sagekernel import sandbox
from sagekernel.targets.base import BuildResult
from sagekernel.targets.triton.contract import KERNEL_FILE
from sagekernel.tasks.task import Task

HERE = Path(__file__).resolve().parent
AOT_ARCH = 90
MAX_MESSAGE_CHARS = 1800


def triton_importable() -> bool:
    return importlib.util.find_spec("triton") is not None


def build(
    source: str,
    task: Task,
    workdir: Path,
    *,
    device: str,
    sandbox_kind: str = "auto",
    timeout_s: float = 120.0,
) -> BuildResult:
    build_dir = workdir / "build"
    build_dir.mkdir(parents=True, exist_ok=True)
    path = build_dir / KERNEL_FILE
    path.write_text(source, encoding="utf-8")
    t0 = time.perf_counter()
    info: dict[str, Any] = {"language": "python", "file": KERNEL_FILE}
    try:
        compile(source, KERNEL_FILE, "exec")
    except SyntaxError as exc:
        return BuildResult(
            False,
            f"{KERNEL_FILE}:{exc.lineno}: SyntaxError: {exc.msg}\n  {(exc.text or '').strip()}",
            {},
            info,
            stage="compile",
        )
    except ValueError as exc:  # null bytes
        return BuildResult(False, f"{KERNEL_FILE}: {exc}", {}, info, stage="compile")
    if device == "npu":
        info["aot"] = "skipped: the ahead-of-time gate compiles for CUDA; triton-ascend needs CANN"
    elif not triton_importable():
        info["aot"] = "skipped: triton is not importable here (pip install '.[triton]')"
    else:
        gate = run_gate(path, task, workdir, sandbox_kind=sandbox_kind, timeout_s=timeout_s)
        info["aot"] = gate.get("summary", {})
        if gate.get("message"):
            info["seconds"] = round(time.perf_counter() - t0, 3)
            return BuildResult(False, gate["message"], {}, info, stage="compile")
    info["seconds"] = round(time.perf_counter() - t0, 3)
    return BuildResult(True, "built", {"module": path}, info)


def run_gate(
    kernel: Path, task: Task, workdir: Path, *, sandbox_kind: str, timeout_s: float
) -> dict[str, Any]:
    """{"summary": {...}, "message": text when the gate rejects the candidate}."""
    kind = sandbox.best_kind(sandbox_kind)
    argv = [
        *sandbox.python_argv("/box/aot/aot_child.py"),
        "--kernel",
        f"/box/build/{KERNEL_FILE}",
        "--task",
        "/box/task/task.py",
        "--arch",
        str(AOT_ARCH),
    ]
    for site in sandbox.site_paths():
        argv += ["--site", site]
    cmd = sandbox.SandboxCommand(
        argv=argv,
        ro_binds=[(str(HERE), "/box/aot"), (str(task.source_path), "/box/task/task.py")],
        rw_binds=[(str(kernel.parent), "/box/build")],
        env={
            "TRITON_CACHE_DIR": "/tmp/triton-cache",
            "TRITON_DEFAULT_FP_FUSION": "1",
            "OMP_NUM_THREADS": "1",
        },
        workdir="/tmp",
    )
    scratch = workdir / "aot"
    scratch.mkdir(exist_ok=True)
    limits = sandbox.Limits(
        wall_s=timeout_s, cpu_s=int(timeout_s) + 1, address_space_bytes=None, file_size_bytes=256 << 20
    )
    result = sandbox.run(cmd, kind=kind, limits=limits, scratch_dir=scratch)
    summary: dict[str, Any] = {
        "target": f"cuda sm_{AOT_ARCH}",
        "sandbox": kind,
        "seconds": round(result.wall_s, 3),
    }
    if result.timed_out:
        return {
            "summary": summary,
            "message": f"the ahead-of-time compile gate did not finish within "
            f"{timeout_s:.0f} s (a kernel that takes this long to compile "
            "will not be run)",
        }
    try:
        report = json.loads(result.channel.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        tail = result.output_tail.strip()[-MAX_MESSAGE_CHARS:]
        return {
            "summary": summary,
            "message": f"the compile gate died before reporting (exit {result.returncode}):\n{tail}",
        }
    summary.update(
        compiled=[
            {k: e[k] for k in ("kernel", "signature", "shared", "num_warps") if k in e}
            for e in report["compiled"]
        ],
        uncompiled=report["uncompiled"],
    )
    if report["errors"]:
        first = report["errors"][0]
        sig = ", ".join(f"{k}: {v}" for k, v in first["signature"].items())
        message = (
            f"triton.compile failed for kernel {first['kernel']}({sig}) on CUDA sm_{AOT_ARCH}:\n"
            + first["error"]
        )
        return {"summary": summary, "message": message[:MAX_MESSAGE_CHARS]}
    if report["forward_error"]:
        return {
            "summary": summary,
            "message": (
                "ModelNew(*init) or forward raised while its launches were recorded for the compile gate "
                "(no kernel ran):\n" + report["forward_error"]
            )[:MAX_MESSAGE_CHARS],
        }
    if not report["compiled"]:
        return {
            "summary": summary,
            "message": "ModelNew.forward launched no @triton.jit kernel: the "
            "operator must be computed by Triton kernels",
        }
    return {"summary": summary}
