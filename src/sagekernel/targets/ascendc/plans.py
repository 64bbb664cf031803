"""Build plans: the exact commands, directories and environment one evaluation executes.

A plan is data (printed by `sage eval --target ascendc --plan`, recorded in BuildResult.info and
executed by build.py). Every path is under the evaluation's own workdir -- the msOpGen project,
the install prefix (`--install-path`, so the vendor dir and ASCEND_CUSTOM_OPP_PATH are private
to it), the CMake build tree and the torch extension -- so any number of workers evaluate at
once (MultiKernelBench serialises on one global reinstall instead). The vendor name carries the
candidate digest, so two installs never share a name either.

Paths:
- framework (msOpGen): op JSON -> `msopgen gen` -> project files -> `build.sh` -> install the
  .run package into workdir/opp -> build the aclnn-calling extension.
- direct (kernel launch): project files -> CMake (`ascendc_library`, bisheng) -> build the
  ACLRT_LAUNCH_KERNEL extension. Needs the kernel-only template (no OpDef on this path).
- twin (device cpu-twin): project files -> CMake with RUN_MODE=cpu (tikicpulib) -> a host
  library the runtime calls through ctypes. Needs the kernel-only template.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sagekernel.candidate import Candidate
from sagekernel.targets.ascendc.availability import DEFAULT_CANN_HOMES, cann_home
from sagekernel.targets.ascendc.config import AscendConfig
from sagekernel.targets.ascendc.contract import template_of
from sagekernel.targets.ascendc.names import op_names
from sagekernel.tasks.task import Task

#: Variables of set_env.sh that the build and the run need, copied from this process when set.
CANN_ENV_VARS = (
    "ASCEND_HOME_PATH",
    "ASCEND_TOOLKIT_HOME",
    "ASCEND_OPP_PATH",
    "ASCEND_AICPU_PATH",
    "ASCEND_HOME",
    "TOOLCHAIN_HOME",
    "LD_LIBRARY_PATH",
    "PYTHONPATH",
    "PATH",
)


@dataclass(frozen=True)
class Step:
    """One command (or one file operation SAGE does itself, `internal` set)."""

    name: str
    argv: tuple[str, ...]
    cwd: str
    env: dict[str, str] = field(default_factory=dict)  # set on top of the plan's base env
    unset: tuple[str, ...] = ()
    timeout_s: float = 600.0
    internal: str = ""  # "write" (project files) | "presets" (CMakePresets.json edits) | ""
    glob: bool = False  # argv[1] is a glob resolved in cwd when the step runs
    detail: dict[str, Any] = field(default_factory=dict)

    def shell(self) -> str:
        if self.internal:
            return f"# SAGE {self.internal}: " + json.dumps(self.detail, sort_keys=True)
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items()))
        unset = " ".join(f"-u {k}" for k in self.unset)
        prefix = "env " + " ".join(x for x in (unset, env) if x) + " " if (env or unset) else ""
        return f"(cd {shlex.quote(self.cwd)} && {prefix}{shlex.join(self.argv)})"


@dataclass(frozen=True)
class BuildPlan:
    path: str  # framework | direct | twin
    device: str
    template: str
    workdir: str
    base_env: dict[str, str]
    steps: tuple[Step, ...]
    files: dict[str, str]  # project-relative path -> text, written by the "write" step
    artifacts: dict[str, str]  # "module" | "library" | "vendor" -> path once built
    run_env: dict[str, str]  # what the runtime needs (ASCEND_CUSTOM_OPP_PATH, LD_LIBRARY_PATH)
    problems: tuple[str, ...] = ()  # why this plan cannot be built (template/path mismatch)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["files"] = sorted(self.files)
        return data


def _cann_root() -> str:
    home = cann_home()
    return str(home) if home else DEFAULT_CANN_HOMES[0]


def base_env(root: str) -> dict[str, str]:
    env = {k: os.environ[k] for k in CANN_ENV_VARS if k in os.environ}
    env.setdefault("ASCEND_HOME_PATH", root)
    env.setdefault("ASCEND_OPP_PATH", f"{root}/opp")
    return env


def path_for(device: str, config: AscendConfig) -> str:
    return "twin" if device == "cpu-twin" else config.build_path


def build_plan(
    candidate: Candidate, task: Task, workdir: Path, *, device: str, config: AscendConfig
) -> BuildPlan:
    from sagekernel.targets.ascendc import project  # the files depend on the path; project imports us

    n = op_names(task)
    wd = Path(workdir).resolve()
    root = _cann_root()
    template = template_of(task, config)
    path = path_for(device, config)
    problems = []
    if path in ("direct", "twin") and template != "kernel-only":
        problems.append(
            f"the {path} path needs the kernel-only template (task {task.name} uses {template}: "
            "its host OpDef and TilingFunc exist only on the msOpGen framework path)"
        )
    env = base_env(root)
    proj, ext = wd / "project", wd / "ext"
    vendor = f"{config.vendor}_{candidate.digest}"
    files = project.project_files(candidate, task, config, path)
    py = sys.executable
    ext_spec = ext / "ext.json"
    spec = extension_spec(task, path, wd, root, wd / "opp" / "vendors" / vendor)
    if spec is not None:
        files["ext/ext.json"] = json.dumps(spec, indent=2) + "\n"
    steps: list[Step] = []
    artifacts: dict[str, str] = {}
    run_env: dict[str, str] = {}
    if path == "framework":
        vendor_dir = wd / "opp" / "vendors" / vendor
        steps += [
            Step(
                "write-spec",
                (),
                str(wd),
                internal="write",
                detail={"files": sorted(f for f in files if not f.startswith("project/"))},
            ),
            Step(
                "msopgen",
                (
                    "msopgen",
                    "gen",
                    "-i",
                    str(wd / "spec" / n.op_json),
                    "-c",
                    config.compute_unit,
                    "-lan",
                    "cpp",
                    "-out",
                    str(proj),
                ),
                str(wd),
                unset=("ASCEND_CUSTOM_OPP_PATH",),
            ),
            Step(
                "write-project",
                (),
                str(wd),
                internal="write",
                detail={"files": sorted(f for f in files if f.startswith("project/"))},
            ),
            Step(
                "presets",
                (),
                str(proj),
                internal="presets",
                detail={
                    "file": "CMakePresets.json",
                    "ASCEND_CANN_PACKAGE_PATH": root,
                    "vendor_name": vendor,
                    "ASCEND_COMPUTE_UNIT": config.add_config,
                    "ENABLE_BINARY_PACKAGE": "True",
                },
            ),
            Step(
                "build", ("bash", "build.sh"), str(proj), unset=("ASCEND_CUSTOM_OPP_PATH",), timeout_s=1200.0
            ),
            Step(
                "install",
                ("bash", "build_out/custom_opp_*.run", f"--install-path={wd / 'opp'}"),
                str(proj),
                unset=("ASCEND_CUSTOM_OPP_PATH",),
                glob=True,
            ),
            Step(
                "extension",
                (py, str(ext / "build_ext.py"), str(ext_spec)),
                str(ext),
                env={"ASCEND_CUSTOM_OPP_PATH": str(vendor_dir)},
            ),
        ]
        artifacts = {"module": str(ext / "build" / f"{n.python_module}.so"), "vendor": str(vendor_dir)}
        run_env = {
            "ASCEND_CUSTOM_OPP_PATH": str(vendor_dir),
            "LD_LIBRARY_PATH": f"{vendor_dir}/op_api/lib:" + env.get("LD_LIBRARY_PATH", f"{root}/lib64"),
        }
    else:
        build_dir = wd / "build"
        mode = "cpu" if path == "twin" else "npu"
        steps += [
            Step("write-project", (), str(wd), internal="write", detail={"files": sorted(files)}),
            Step(
                "configure",
                (
                    "cmake",
                    "-S",
                    str(proj),
                    "-B",
                    str(build_dir),
                    f"-DSOC_VERSION={config.soc}",
                    f"-DASCEND_CANN_PACKAGE_PATH={root}",
                    f"-DRUN_MODE={mode}",
                    "-DCMAKE_BUILD_TYPE=" + ("Debug" if mode == "cpu" else "Release"),
                ),
                str(wd),
            ),
            Step("compile", ("cmake", "--build", str(build_dir), "-j", "4"), str(wd), timeout_s=1200.0),
        ]
        if path == "direct":
            steps.append(Step("extension", (py, str(ext / "build_ext.py"), str(ext_spec)), str(ext)))
            artifacts = {"module": str(ext / "build" / f"{n.python_module}.so"), "library": str(build_dir)}
        else:
            artifacts = {"library": str(build_dir / "libsage_kernels.so")}
        run_env = {"LD_LIBRARY_PATH": f"{build_dir}:" + env.get("LD_LIBRARY_PATH", f"{root}/lib64")}
    return BuildPlan(
        path, device, template, str(wd), env, tuple(steps), files, artifacts, run_env, tuple(problems)
    )


def extension_spec(task: Task, path: str, wd: Path, root: str, vendor_dir: Path) -> dict[str, Any] | None:
    """The torch-extension spec build_ext.py reads (None on the twin path: ctypes, no extension)."""
    n = op_names(task)
    common = {
        "name": n.python_module,
        "build_directory": str(wd / "ext" / "build"),
        "torch_npu": True,
        "cflags": ["-O2", "-std=c++17"],
    }
    if path == "framework":
        vendor = str(vendor_dir)
        return {
            **common,
            "sources": [str(wd / "ext" / f"{n.snake}_aclnn.cpp")],
            "include_paths": [f"{vendor}/op_api/include", f"{root}/include", f"{root}/include/aclnn"],
            "ldflags": [
                f"-L{vendor}/op_api/lib",
                f"-Wl,-rpath,{vendor}/op_api/lib",
                "-lcust_opapi",
                f"-L{root}/lib64",
                "-lascendcl",
                "-lnnopbase",
            ],
        }
    if path == "direct":
        return {
            **common,
            "sources": [str(wd / "ext" / f"{n.snake}_direct.cpp"), str(wd / "project" / n.tiling_func_file)],
            "include_paths": [str(wd / "project" / "op_host"), f"{root}/include"],
            "find_headers": [[str(wd / "build"), n.launch_header]],
            "find_libs": [[str(wd / "build"), "sage_kernels"]],
            "ldflags": [
                f"-L{root}/lib64",
                "-lascendcl",
                "-lplatform",
                "-lregister",
                "-ltiling_api",
                "-lruntime",
            ],
        }
    return None


def describe(plan: BuildPlan) -> str:
    """The plan as a shell transcript a user can read or replay by hand."""
    lines = [
        f"# build plan: path {plan.path}, device {plan.device}, template {plan.template}",
        f"# workdir {plan.workdir}",
    ]
    lines += [f"# problem: {p}" for p in plan.problems]
    lines += ["# base environment (from set_env.sh when it was sourced):"]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in sorted(plan.base_env.items())]
    lines += [s.shell() for s in plan.steps]
    lines += ["# artifacts: " + ", ".join(f"{k}={v}" for k, v in sorted(plan.artifacts.items()))]
    lines += ["# runtime environment: " + " ".join(f"{k}={v}" for k, v in sorted(plan.run_env.items()))]
    return "\n".join(lines)


__all__ = [
    "CANN_ENV_VARS",
    "BuildPlan",
    "Step",
    "base_env",
    "build_plan",
    "describe",
    "extension_spec",
    "path_for",
]
