"""NPUKernelBench's own project layout on the Ascend C target.

An NPUKernelBench operator (tasks/npukernelbench.py) ships a skeleton under ``question/``:
``op_host/<k>.cpp`` (the OpDef registration: inputs, outputs, dtypes, formats, a stub
TilingFunc) and ``op_kernel/<k>.cpp`` (the kernel entry's exact signature, empty body). The
benchmark's flow (framework/batch_compile.py, full mode) has the model write three files into
that project: ``op_host/<k>_tiling.h``, ``op_host/<k>.cpp`` and ``op_kernel/<k>.cpp``.

For such a task this target uses the benchmark's names (names.op_names: op ``Equal``, kernel
``equal``) and the ``full`` template, whose three files are exactly those paths, so:

- the model's starting project is the skeleton's source files, verbatim (`starting_project`,
  shown by the contract);
- the OpDef names and the kernel entry's parameters the lint checks are the skeleton's
  (`skeleton_prototype`, `skeleton_kernel_params`), not names SAGE derives from the reference;
- a candidate is a folder in the benchmark's layout both ways (`project.write_candidate`,
  `read_candidate`): a kernel written through SAGE drops into the benchmark's build, and a
  kernel from the benchmark's flow (its ``src`` folder, an ``answer/<n>`` folder) is judged by
  ``sage eval TASK DIR --target ascendc``.

Only ``question/`` is read (tasks/npukernelbench.skeleton_sources); ``answer/`` never reaches the
starting project.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sagekernel.candidate import Candidate, folder_files
from sagekernel.targets.ascendc.names import (
    OpNames,
    benchmark_layout_missing,
    is_benchmark_task,
    is_helper_path,
    is_host_source,
    op_names,
)
from sagekernel.tasks.task import Task

if TYPE_CHECKING:
    from sagekernel.targets.ascendc.cparse import Source
    from sagekernel.targets.ascendc.opdef import OpDefSpec

def starting_project(task: Task) -> dict[str, str]:
    """The skeleton's source files by project path (``op_host/equal.cpp`` ...), as the model
    receives them; empty for a task without a skeleton."""
    if not is_benchmark_task(task):
        return {}
    from sagekernel.tasks.npukernelbench import skeleton_sources

    # question/api_desc.md of two operators is the specification (shown as such), not a source
    return {rel: text for rel, text in skeleton_sources(task).items() if is_helper_path(rel)}


def _parsed(task: Task, path: str) -> Source | None:
    text = starting_project(task).get(path, "")
    if not text.strip():
        return None
    from sagekernel.targets.ascendc import cparse

    return cparse.Source(text)


def skeleton_prototype(task: Task) -> dict[str, list[str]] | None:
    """The skeleton OpDef's Input / Output / Attr names, in order (a name declared for several
    configurations counts once); None without a skeleton host file."""
    declared = skeleton_opdef(task)
    return declared.names() if declared is not None else None


def skeleton_opdef(task: Task) -> OpDefSpec | None:
    """The op prototype the skeleton's OpDef declares (opdef.parse_opdef): the op JSON and the
    runtime's binding follow it; None without a skeleton host file."""
    host = _parsed(task, op_names(task).host_file)
    if host is None:
        return None
    from sagekernel.targets.ascendc.opdef import parse_opdef

    return parse_opdef(host)


def skeleton_kernel_signature(task: Task) -> tuple[str, tuple[str, ...]] | None:
    """(the kernel entry's declaration as the skeleton writes it, its parameter names); None
    without a skeleton kernel defining the entry."""
    names = op_names(task)
    kernel = _parsed(task, names.kernel_file)
    if kernel is None:
        return None
    for node, params in kernel.definitions_of(names.kernel_entry):
        got = tuple(params)
        outer = node.parent  # `extern "C"` wraps the definition in a linkage specification
        linked = outer is not None and outer.type == "linkage_specification"
        start = outer.start_byte if linked else node.start_byte
        body = node.child_by_field_name("body")
        end = body.start_byte if body is not None else node.end_byte
        head = kernel.unit.text.encode()[start:end]  # the spliced text, which the tree's offsets index
        return " ".join(head.decode().split()), got
    return None


def skeleton_kernel_params(task: Task) -> tuple[str, ...] | None:
    found = skeleton_kernel_signature(task)
    return found[1] if found else None


def candidate_paths(task: Task) -> list[str]:
    """The files a candidate has, in the benchmark's layout (the full template's three files)."""
    names = op_names(task)
    return [names.tiling_header, names.host_file, names.kernel_file]


def project_files_in(
    directory: Path, paths: list[str], names: OpNames
) -> tuple[dict[str, Path], list[str]]:
    """({project path: file}, what the benchmark's build needs that the folder lacks) of a
    candidate folder in the benchmark's layout: each of `paths` it has, then every other C++
    source or header under its ``op_host/`` and ``op_kernel/`` (the benchmark's projects split the
    host side into ``<k>_def.cpp`` / ``<k>_tiling.cpp`` / ``<k>_proto.cpp``, name the tiling header
    freely and split kernels over headers: the lint checks them and the build compiles them).
    Only the kernel source and one host source are required (names.benchmark_layout_missing).
    Nothing else in the folder is read."""
    found, _ = folder_files(directory, paths)
    root = Path(directory).resolve()
    for sub in ("op_host", "op_kernel"):
        for where in sorted((root / sub).rglob("*")) if (root / sub).is_dir() else []:
            rel = where.relative_to(root).as_posix()
            if rel not in found and where.is_file() and not where.is_symlink() and is_helper_path(rel):
                found[rel] = where
    return found, benchmark_layout_missing(set(found), names)


def read_candidate(directory: Path, paths: list[str], names: OpNames) -> tuple[Candidate, list[str]]:
    """(the candidate in `directory`, what it lacks): `project_files_in`, read."""
    found, missing = project_files_in(directory, paths, names)
    return Candidate({rel: where.read_text(encoding="utf-8", errors="replace")
                      for rel, where in found.items()}), missing


def replaced_stubs(files: dict[str, str] | set[str], names: OpNames) -> list[str]:
    """msOpGen's generated host stubs (``op_host/<k>.cpp``: an OpDef, a TilingFunc, an
    InferShape; ``op_host/<k>_tiling.h``: a tiling struct) that a project with its own host sources
    does not overwrite. msOpGen's op_host CMakeLists compiles every top-level host source, so a
    stub left beside a split host side (``<k>_def.cpp``, ``<k>_tiling.cpp``) would register the op a
    second time; the benchmark's flow has no stubs at all (it copies the project over a template
    without them). Empty for a project that writes both paths itself or has no host source."""
    if not any(is_host_source(p) for p in files):
        return []
    return [p for p in (names.host_file, names.tiling_header) if p not in files]


__all__ = [
    "candidate_paths",
    "project_files_in",
    "read_candidate",
    "replaced_stubs",
    "skeleton_kernel_params",
    "skeleton_kernel_signature",
    "skeleton_opdef",
    "skeleton_prototype",
    "starting_project",
]
