"""Build plans: the exact commands, directories and environment one evaluation executes.

A plan is data (printed by `sage eval --target ascendc --plan`, recorded in BuildResult.info and
executed by build.py). Every path is under the evaluation's own workdir -- the msOpGen project,
the install prefix (`--install-path`, so the vendor dir and ASCEND_CUSTOM_OPP_PATH are private
to it), the CMake build tree and the torch extension -- so any number of workers evaluate at
once (MultiKernelBench serialises on one global reinstall instead). The vendor name carries the
candidate digest, so two installs never share a name either.

Paths:
- framework (msOpGen): op JSON -> `msopgen gen` (once per op prototype and SoC: the skeleton is
  cached and copied) -> project files -> `build.sh` -> install the .run package into workdir/opp
  -> the aclnn-calling extension (built once per task and reused: it links libcust_opapi.so by
  name without an rpath, and each candidate's run environment puts its own op_api/lib first).
- direct (kernel launch): project files -> CMake (`ascendc_library`, bisheng) -> build the
  ACLRT_LAUNCH_KERNEL extension. Needs the kernel-only template (no OpDef on this path).
- twin (device cpu-twin): project files -> CMake with RUN_MODE=cpu (tikicpulib) -> a host
  library the runtime calls through ctypes. Needs the kernel-only template.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sagekernel.candidate import Candidate
from sagekernel.targets.ascendc.availability import DEFAULT_CANN_HOMES, cann_home, resolve_tool
from sagekernel.targets.ascendc.benchmark_binding import binding_problems
from sagekernel.targets.ascendc.benchmark_cpp import aclnn_binding
from sagekernel.targets.ascendc.config import AscendConfig
from sagekernel.targets.ascendc.contract import template_of
from sagekernel.targets.ascendc.names import is_benchmark_task, op_names
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
    creates: str = ""  # skip the step when this path already exists (a cached product)
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


def cache_root() -> Path:
    """Where products shared by candidates live (msOpGen skeletons, per-task extensions)."""
    configured = os.environ.get("SAGE_ASCENDC_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "sagekernel" / "ascendc"


def build_jobs() -> int:
    """Parallel compile jobs per build (SAGE_ASCENDC_JOBS): parallel workers each build, so the
    default is a small share of the machine rather than every core."""
    try:
        return max(1, int(os.environ.get("SAGE_ASCENDC_JOBS", "")))
    except ValueError:
        return max(1, min(4, (os.cpu_count() or 2) // 2))


def compile_env() -> dict[str, str]:
    """The job cap for every build system a step uses (CMake, ninja through torch's cpp_extension,
    make), and ccache as the CMake compiler launcher when it is installed."""
    jobs = str(build_jobs())
    env = {"CMAKE_BUILD_PARALLEL_LEVEL": jobs, "MAX_JOBS": jobs, "MAKEFLAGS": f"-j{jobs}"}
    if resolve_tool("ccache"):
        env["CMAKE_CXX_COMPILER_LAUNCHER"] = env["CMAKE_C_COMPILER_LAUNCHER"] = "ccache"
    return env


def digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()[:16]


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
    if path == "framework" and is_benchmark_task(task):  # the skeleton's OpDef is the prototype
        problems += binding_problems(task)
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
    jobs_env = compile_env()
    if path == "framework":
        vendor_dir = wd / "opp" / "vendors" / vendor
        from sagekernel.targets.ascendc.skeleton import op_json

        skeleton = cache_root() / "skeletons" / digest(op_json(task), config.compute_unit, root)
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
                    resolve_tool("msopgen") or "msopgen",
                    "gen",
                    "-i",
                    str(wd / "spec" / n.op_json),
                    "-c",
                    config.compute_unit,
                    "-lan",
                    "cpp",
                    "-out",
                    f"{skeleton}.tmp-{candidate.digest}",
                ),
                str(wd),
                unset=("ASCEND_CUSTOM_OPP_PATH",),
                creates=str(skeleton),
            ),
            Step(
                "skeleton",
                (),
                str(wd),
                internal="skeleton",
                detail={
                    "cache": str(skeleton),
                    "fresh": f"{skeleton}.tmp-{candidate.digest}",
                    "project": str(proj),
                },
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
                "build",
                ("bash", "build.sh"),
                str(proj),
                env=jobs_env,
                unset=("ASCEND_CUSTOM_OPP_PATH",),
                timeout_s=1200.0,
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
                env={"ASCEND_CUSTOM_OPP_PATH": str(vendor_dir), **jobs_env},
            ),
        ]
        assert spec is not None  # the framework path always has an extension
        artifacts = {"module": f"{spec['build_directory']}/{n.python_module}.so", "vendor": str(vendor_dir)}
        run_env = {
            "ASCEND_CUSTOM_OPP_PATH": str(vendor_dir),
            "LD_LIBRARY_PATH": f"{vendor_dir}/op_api/lib:" + env.get("LD_LIBRARY_PATH", f"{root}/lib64"),
        }
    else:
        build_dir = wd / "build"
        cmake = resolve_tool("cmake") or "cmake"
        mode = "cpu" if path == "twin" else "npu"
        steps += [
            Step("write-project", (), str(wd), internal="write", detail={"files": sorted(files)}),
            Step(
                "configure",
                (
                    cmake,
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
                env=jobs_env,
            ),
            Step(
                "compile",
                (cmake, "--build", str(build_dir), "-j", str(build_jobs())),
                str(wd),
                env=jobs_env,
                timeout_s=1200.0,
            ),
        ]
        if path == "direct":
            steps.append(
                Step("extension", (py, str(ext / "build_ext.py"), str(ext_spec)), str(ext), env=jobs_env)
            )
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
        # One build per task: everything below is the same for every candidate of the task (the
        # binding text depends on the task only), so cpp_extension.load finds its own build and
        # reuses it. The candidate's aclnn header and libcust_opapi.so are copied in once, for
        # compiling and linking; at run time the loader takes libcust_opapi.so from the
        # candidate's own op_api/lib (the plan's run_env), since the module has no rpath to it.
        shared = cache_root() / "extensions" / digest(aclnn_binding(task), root, sys.executable)
        vendor = str(vendor_dir)
        return {
            **common,
            "build_directory": str(shared / "build"),
            "sources": [str(shared / f"{n.snake}_aclnn.cpp")],
            "copy": [
                [str(wd / "ext" / f"{n.snake}_aclnn.cpp"), str(shared / f"{n.snake}_aclnn.cpp")],
                [f"{vendor}/op_api/include/{n.aclnn_header}", str(shared / "include" / n.aclnn_header)],
                [f"{vendor}/op_api/lib/libcust_opapi.so", str(shared / "lib" / "libcust_opapi.so")],
            ],
            "include_paths": [str(shared / "include"), f"{root}/include", f"{root}/include/aclnn"],
            "ldflags": [
                f"-L{shared / 'lib'}",
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
    "build_jobs",
    "build_plan",
    "cache_root",
    "compile_env",
    "describe",
    "extension_spec",
    "path_for",
]
