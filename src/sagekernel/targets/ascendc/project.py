"""Rendering one evaluation's project: every file the build needs, keyed by workdir-relative path.

- spec/<op>.json                      op prototype for msOpGen (framework path)
- project/op_host/, project/op_kernel/ the model's files and, for kernel-only, the fixed skeleton
- project/CMakeLists.txt, twin/        direct-launch and CPU-twin kernel library
- ext/                                 the torch extension source, its build script and spec

`write_files` puts them on disk (no toolchain needed: tests render real projects here).
"""

from __future__ import annotations

from pathlib import Path

from sagekernel.candidate import Candidate
from sagekernel.targets.ascendc import bindings, skeleton
from sagekernel.targets.ascendc.benchmark_cpp import aclnn_binding
from sagekernel.targets.ascendc.benchmark_project import replaced_stubs
from sagekernel.targets.ascendc.config import AscendConfig
from sagekernel.targets.ascendc.contract import files_for, template_of
from sagekernel.targets.ascendc.names import is_benchmark_task, is_helper_path, op_names
from sagekernel.tasks.task import Task

#: What a replaced msOpGen stub says (benchmark_project.replaced_stubs): the file stays, empty of
#: code, so msOpGen's op_host CMakeLists compiles the project's own host sources and nothing else.
STUB_NOTE = "msOpGen's generated stub, replaced: this project supplies its own host sources"


def project_files(candidate: Candidate, task: Task, config: AscendConfig, path: str) -> dict[str, str]:
    n = op_names(task)
    files: dict[str, str] = {}
    expected = {f.path for f in files_for(task, config)}
    helpers = is_benchmark_task(task)  # the benchmark's projects have helper files (names.is_helper_path)
    for rel, text in candidate.files.items():
        if rel in expected or (helpers and is_helper_path(rel)):  # else a lint finding, never built
            files[f"project/{rel}"] = text
    if helpers and path == "framework":
        own = {rel for rel in candidate.files if f"project/{rel}" in files}
        for stub in replaced_stubs(own, n):  # the project's own host sources replace msOpGen's stubs
            files[f"project/{stub}"] = f"// {STUB_NOTE}: {', '.join(sorted(own))}\n"
    if template_of(task, config) == "kernel-only":
        files[f"project/{n.tiling_header}"] = skeleton.plain_tiling_header(task, kernel_side=False)
        files[f"project/{n.kernel_tiling_header}"] = skeleton.plain_tiling_header(task, kernel_side=True)
        if path == "framework":
            files[f"project/{n.host_file}"] = skeleton.kernel_only_host(task, config)
    if path == "framework":
        files[f"spec/{n.op_json}"] = skeleton.op_json(task)
        files[f"ext/{n.snake}_aclnn.cpp"] = aclnn_binding(task)
    else:
        files["project/CMakeLists.txt"] = bindings.kernel_cmake(task)
    if path == "direct":
        files[f"ext/{n.snake}_direct.cpp"] = bindings.direct_binding(task)
    if path == "twin":
        files[f"project/twin/{n.snake}_twin.cpp"] = bindings.twin_driver(task)
    if path != "twin":
        files["ext/build_ext.py"] = bindings.build_ext_script(task)
    return files


def write_files(workdir: Path, files: dict[str, str], *, prefixes: tuple[str, ...] = ("",)) -> list[Path]:
    """Write the files whose path starts with one of `prefixes`; refuses paths leaving workdir."""
    root = Path(workdir).resolve()
    written = []
    for rel, text in sorted(files.items()):
        if not rel.startswith(prefixes):
            continue
        target = (root / rel).resolve()
        if root not in target.parents:
            raise ValueError(f"refusing to write {rel!r} outside the evaluation directory")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        written.append(target)
    return written


__all__ = ["project_files", "write_files"]


def write_candidate(directory: Path, candidate: Candidate) -> list[Path]:
    """The candidate's files under `directory` (``op_host/...``, ``op_kernel/...``), the layout
    NPUKernelBench's build reads; refuses a path leaving `directory`."""
    return write_files(Path(directory), dict(candidate.files))
