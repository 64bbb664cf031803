"""Names derived from a task: op AddCustom <-> files add_custom* <-> aclnnAddCustom <-> kernel add_custom.

msOpGen turns an op type in CamelCase into snake_case file names and the kernel entry; the
generated aclnn API is `aclnn<OpType>` in `aclnn_<snake>.h`. Everything here is derived from the
task's name so the contract, the skeleton, the lint and the build plans agree by construction.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sagekernel.tasks.task import NPUKERNELBENCH, Task

#: Suffix every SAGE operator carries, as the CANN samples do (AddCustom), so a custom op never
#: collides with a built-in op of the same name in the op library.
OP_SUFFIX = "Custom"


#: Names msOpGen's generated Python op implementation uses for its own locals, keywords and
#: modules (asc-devkit `cmake/asc/fwk_modules/util/opdesc_parser.py`, CONFLICT_KEYWORDS; the
#: generated impl is `def <op>(<inputs>, <outputs>, ...)` and later assigns `src = ...`). msOpGen
#: checks only attribute names against it; a tensor named `src` (scatter_add) would be clobbered.
PROTOTYPE_RESERVED = frozenset(
    """
    and as assert break class continue def del elif else except finally for from global if
    import in is lambda not or pass raise return try while with yield False None True nonlocal
    arg __inputs__ __outputs__ options bisheng bisheng_path tikcpp_path impl_mode
    custom_compile_options custom_all_compile_options soc_version soc_short
    custom_compile_options_soc custom_all_compile_options_soc origin_func_name
    ascendc_src_dir_ex ascendc_src_dir ascendc_src_file src op_type code_channel op_info
    compile_op get_code_channel result __attrs__ isinstance attr get_current_build_config
    _build_args get_dtype_fmt_options shutil os get_kernel_source kernel_name impl_mode_str
    """.split()  # noqa: SIM905 (one word list, kept compact)
)


def prototype_names(names: list[str]) -> list[str]:
    """The op prototype's names for the task's tensors and attributes, in order: a reserved name
    gets the suffix `_t` (then `_t2`, ... until unique). Every file that names a prototype entry
    (op JSON, OpDef, the contract, the lint) goes through here."""
    out: list[str] = []
    taken = set(names)
    for name in names:
        new, k = name, 1
        while new in PROTOTYPE_RESERVED or (new != name and new in taken):
            new = f"{name}_t" if k == 1 else f"{name}_t{k}"
            k += 1
        taken.add(new)
        out.append(new)
    return out


def camel_from_snake(name: str) -> str:
    """`cast_f32_f16_sat` -> `CastF32F16Sat`."""
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[_\W]+", name) if part)


def snake_from_camel(name: str) -> str:
    """msOpGen's rule: an underscore before an upper-case letter that follows a lower-case
    letter or a digit, or that starts a new word after an acronym; then lower-case."""
    s = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name)
    s = re.sub(r"(?<=[A-Z])([A-Z][a-z])", r"_\1", s)
    return s.lower()


@dataclass(frozen=True)
class OpNames:
    """Every name that must agree for one operator."""

    op_type: str  # AddCustom
    snake: str  # add_custom: file stem and kernel entry
    tiling_struct: str  # AddCustomTilingData
    aclnn: str  # aclnnAddCustom
    aclnn_header: str  # aclnn_add_custom.h
    launch_header: str  # aclrtlaunch_add_custom.h (direct launch)
    python_module: str  # sage_add_custom (the torch extension the runtime imports)

    @property
    def kernel_entry(self) -> str:
        return self.snake

    @property
    def kernel_file(self) -> str:
        return f"op_kernel/{self.snake}.cpp"

    @property
    def host_file(self) -> str:
        return f"op_host/{self.snake}.cpp"

    @property
    def tiling_header(self) -> str:
        return f"op_host/{self.snake}_tiling.h"

    @property
    def tiling_func_file(self) -> str:
        """Kernel-only template: the model's tiling computation (host C++)."""
        return f"op_host/{self.snake}_tiling_func.cpp"

    @property
    def kernel_tiling_header(self) -> str:
        """Kernel-only template: the fixed plain-struct tiling header the kernel includes."""
        return f"op_kernel/{self.snake}_tiling.h"

    @property
    def op_json(self) -> str:
        return f"{self.snake}.json"


def benchmark_snake(op_type: str) -> str:
    """NPUKernelBench's kernel name for an op (framework/task_object.py, camel_to_snake):
    `GeGluV2` -> `ge_glu_v2`, `IsFinite` -> `is_finite`."""
    s = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", op_type)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s).lower()


def is_benchmark_task(task: Task) -> bool:
    """An NPUKernelBench operator: its `question/` skeleton fixes the names and the file layout."""
    return task.benchmark is not None and task.benchmark.format == NPUKERNELBENCH


def _benchmark_op(task: Task) -> tuple[str, str]:
    """(op type, kernel name) as the benchmark's own flow derives them: the op is the operator
    folder's name up to its first `_`, the kernel the skeleton's `op_kernel/<k>.cpp` (the flow
    requires that single file; the camel_to_snake rule when the task has no skeleton)."""
    op_type = task.name.split("_")[0]
    skeleton = task.benchmark.skeleton if task.benchmark is not None else {}
    kernels = [rel for rel in skeleton
               if rel.startswith("op_kernel/") and rel.count("/") == 1 and rel.endswith(".cpp")]
    snake = kernels[0][len("op_kernel/"):-len(".cpp")] if len(kernels) == 1 else benchmark_snake(op_type)
    return op_type, snake


def op_names(task: Task) -> OpNames:
    """SAGE's own operators carry `OP_SUFFIX`; an NPUKernelBench operator keeps the benchmark's
    names (`Equal`, `equal`, `aclnnEqual`), so its files are the benchmark's layout and a kernel
    from either flow builds in the other."""
    if is_benchmark_task(task):
        op_type, snake = _benchmark_op(task)
    else:
        op_type = camel_from_snake(task.name) + OP_SUFFIX
        snake = snake_from_camel(op_type)
    return OpNames(
        op_type=op_type,
        snake=snake,
        tiling_struct=f"{op_type}TilingData",
        aclnn=f"aclnn{op_type}",
        aclnn_header=f"aclnn_{snake}.h",
        launch_header=f"aclrtlaunch_{snake}.h",
        python_module=f"sage_{snake}",
    )


__all__ = [
    "OP_SUFFIX",
    "PROTOTYPE_RESERVED",
    "OpNames",
    "benchmark_layout_missing",
    "benchmark_snake",
    "camel_from_snake",
    "is_benchmark_task",
    "is_host_source",
    "is_tiling_header",
    "op_names",
    "prototype_names",
    "snake_from_camel",
]


#: The C++ files a project may split its code into, besides the template's own files.
HELPER_SUFFIXES = (".cpp", ".h", ".hpp", ".cc")


def is_helper_path(path: str) -> bool:
    """A C++ source or header under op_host/ or op_kernel/ (a helper file of a project)."""
    return path.startswith(("op_kernel/", "op_host/")) and path.endswith(HELPER_SUFFIXES)


def is_host_source(path: str) -> bool:
    """A host translation unit at op_host/'s top level: msOpGen's op_host/CMakeLists.txt compiles
    every one (`aux_source_directory`), as the benchmark's own project CMakeLists list them."""
    return path.startswith("op_host/") and path.count("/") == 1 and path.endswith((".cpp", ".cc"))


def benchmark_layout_missing(paths: set[str] | dict[str, str], names: OpNames) -> list[str]:
    """What NPUKernelBench's build needs that a project lacks: the kernel source it installs by
    the op's name (`install(FILES op_kernel/<k>.cpp ...)`) and at least one host source (the OpDef,
    the tiling function, InferShape: in `<k>.cpp` or split into `<k>_def.cpp`, `<k>_tiling.cpp`,
    ...). The tiling header's name is free: it is whatever the host sources include."""
    missing = [] if names.kernel_file in paths else [names.kernel_file]
    if not any(is_host_source(p) for p in paths):
        missing.append(f"op_host/*.cpp (a host source with the OpDef, e.g. {names.host_file})")
    return missing


def is_tiling_header(path: str, text: str, names: OpNames, named_freely: bool) -> bool:
    """The contract's tiling header, or (a layout that names it freely: the benchmark's) a host
    header that begins a tiling struct."""
    return path == names.tiling_header or (
        named_freely and not is_host_source(path) and "BEGIN_TILING_DATA_DEF" in text)
