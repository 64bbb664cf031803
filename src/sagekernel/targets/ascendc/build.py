"""Executing a build plan when CANN is present; a clear not-available result otherwise.

The project is rendered to disk in every case (it needs no toolchain), so a user can inspect or
replay it by hand. Each step runs in its own session with the plan's exact environment and a
timeout; a failed step's log is trimmed to the errors in the model's own files (diagnostics.py).
Steps run unsandboxed here: compilers and msOpGen's scripts need the toolkit tree, and the model's
code is only compiled, never run, at this stage (the runtime runs it, in the harness's sandbox).
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from sagekernel.targets.ascendc.availability import available
from sagekernel.targets.ascendc.diagnostics import trim_build_log
from sagekernel.targets.ascendc.plans import BuildPlan, Step
from sagekernel.targets.ascendc.project import write_files
from sagekernel.targets.base import BuildResult

MAX_LOG_BYTES = 4 << 20


def _edit_presets(project: Path, detail: dict[str, str]) -> None:
    """Set msOpGen's CMakePresets.json cache variables (CANN path, vendor, compute unit)."""
    path = project / detail["file"]
    data = json.loads(path.read_text(encoding="utf-8"))
    for preset in data.get("configurePresets", []):
        cache = preset.setdefault("cacheVariables", {})
        for key in (
            "ASCEND_CANN_PACKAGE_PATH",
            "vendor_name",
            "ASCEND_COMPUTE_UNIT",
            "ENABLE_BINARY_PACKAGE",
        ):
            entry = cache.get(key)
            if isinstance(entry, dict):
                entry["value"] = detail[key]
            else:
                cache[key] = {"type": "STRING", "value": detail[key]}
    path.write_text(json.dumps(data, indent=4) + "\n", encoding="utf-8")


def _reuse_skeleton(detail: dict[str, str]) -> None:
    """Publish a freshly generated msOpGen skeleton to the cache (atomic rename; a parallel worker
    that got there first wins and the fresh copy is dropped), then copy the cached one into the
    project. msOpGen's output depends only on the op prototype and the SoC, so one generation
    serves every candidate of the task."""
    cache, fresh, project = Path(detail["cache"]), Path(detail["fresh"]), Path(detail["project"])
    if fresh.is_dir():
        cache.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.rename(fresh, cache)
        except OSError:
            shutil.rmtree(fresh, ignore_errors=True)
    shutil.copytree(cache, project, symlinks=True, dirs_exist_ok=True)


def _run_step(step: Step, plan: BuildPlan, log_path: Path) -> tuple[int | None, str]:
    env = {**plan.base_env, **step.env}
    for key in step.unset:
        env.pop(key, None)
    argv = list(step.argv)
    if step.glob:
        matches = sorted(glob.glob(os.path.join(step.cwd, argv[1])))
        if not matches:
            return 1, f"{step.name}: nothing matches {argv[1]} in {step.cwd}"
        argv[1] = matches[-1]
    with open(log_path, "wb") as log:
        try:
            proc = subprocess.Popen(
                argv,
                cwd=step.cwd,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as exc:
            return 127, f"{step.name}: cannot start {argv[0]}: {exc}"
        try:
            code: int | None = proc.wait(timeout=step.timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            code = None
    text = log_path.read_bytes()[-MAX_LOG_BYTES:].decode("utf-8", "replace")
    return code, text


def execute(plan: BuildPlan, model_files: set[str]) -> BuildResult:
    wd = Path(plan.workdir)
    wd.mkdir(parents=True, exist_ok=True)
    steps: list[dict[str, object]] = []
    info: dict[str, object] = {
        "plan": plan.to_dict(),
        "path": plan.path,
        "device": plan.device,
        "steps": steps,
    }
    if plan.problems:
        return BuildResult(False, "; ".join(plan.problems), {}, info, stage="compile")
    ok, why = available(plan.device)
    if not ok:
        write_files(wd, plan.files)  # the project is still rendered for inspection
        return BuildResult(
            False,
            f"not available here: {why}. The rendered project is in {wd}; "
            "`sage eval --target ascendc --plan` prints the commands",
            {},
            info,
            stage="compile",
        )
    logs = wd / "logs"
    logs.mkdir(exist_ok=True)
    t0 = time.perf_counter()
    for step in plan.steps:
        t = time.perf_counter()
        if step.internal == "write":
            write_files(wd, {k: v for k, v in plan.files.items() if k in step.detail["files"]})
            continue
        if step.internal == "skeleton":
            _reuse_skeleton(step.detail)
            continue
        if step.creates and Path(step.creates).exists():
            steps.append({"name": step.name, "returncode": 0, "seconds": 0.0, "reused": step.creates})
            continue
        if step.internal == "presets":
            _edit_presets(Path(step.cwd), step.detail)
            continue
        code, text = _run_step(step, plan, logs / f"{step.name}.log")
        steps.append({"name": step.name, "returncode": code, "seconds": round(time.perf_counter() - t, 3)})
        if code is None:
            return BuildResult(False, f"{step.name} did not finish within {step.timeout_s:.0f} s", {}, info)
        if code != 0:
            return BuildResult(False, trim_build_log(text, wd, model_files, stage=step.name), {}, info)
    info["seconds"] = round(time.perf_counter() - t0, 3)
    artifacts = {k: Path(v) for k, v in plan.artifacts.items()}
    missing = [k for k, p in artifacts.items() if not p.exists()]
    if missing:
        return BuildResult(
            False,
            f"the build finished but produced no {', '.join(missing)} "
            f"({', '.join(str(artifacts[k]) for k in missing)})",
            {},
            info,
            stage="load",
        )
    return BuildResult(True, "built", artifacts, info)


__all__ = ["execute"]
