"""What the model is told and must write: the file set and the contract of both templates.

Two templates, as NPUKernelBench has:

- **full**: the model writes the tiling-data definition (`op_host/<op>_tiling.h`, the
  `BEGIN_TILING_DATA_DEF` macros), the host side (`op_host/<op>.cpp`: TilingFunc, InferShape,
  the OpDef) and the device kernel (`op_kernel/<op>.cpp`). Built on the msOpGen framework path.
- **kernel-only**: the project skeleton is fixed (op definition, shape inference, the tiling
  struct as a plain C++ struct whose fields are derived from the task); the model writes the
  device kernel and the tiling computation (`op_host/<op>_tiling_func.cpp`, plain C++ that
  fills the struct from the core count and UB size). Plain C++ tiling runs unchanged on both
  build paths: the framework's TilingFunc and the direct-launch binding call the same function.
"""

from __future__ import annotations

from dataclasses import dataclass

from sagekernel.targets.ascendc.config import AscendConfig
from sagekernel.targets.ascendc.names import OpNames, is_benchmark_task, op_names
from sagekernel.targets.ascendc.settings import task_settings
from sagekernel.targets.base import FileSpec
from sagekernel.tasks.task import Task

#: task dtype -> (op JSON type, ge::DataType, kernel C type, torch dtype attribute)
DTYPES: dict[str, tuple[str, str, str]] = {
    "float32": ("float", "ge::DT_FLOAT", "float"),
    "float16": ("float16", "ge::DT_FLOAT16", "half"),
    "bfloat16": ("bfloat16", "ge::DT_BF16", "bfloat16_t"),
    "float64": ("double", "ge::DT_DOUBLE", "double"),
    "int64": ("int64", "ge::DT_INT64", "int64_t"),
    "int32": ("int32", "ge::DT_INT32", "int32_t"),
    "int16": ("int16", "ge::DT_INT16", "int16_t"),
    "int8": ("int8", "ge::DT_INT8", "int8_t"),
    "uint8": ("uint8", "ge::DT_UINT8", "uint8_t"),
    # bool keeps DT_BOOL in the prototype, but travels as one byte (0 / 1) in the kernel: A2/A3's
    # DataCopy / DataCopyPad have no bool overload (asc-devkit DataCopy docs, A2 type list).
    "bool": ("bool", "ge::DT_BOOL", "uint8_t"),
}

#: Planning fields of the kernel-only template's fixed tiling struct (after sizes and attrs).
PLAN_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("int64_t", "totalLength", "elements of the first output (filled by the skeleton)"),
    ("int64_t", "formerNum", "cores that take formerLength elements"),
    ("int64_t", "formerLength", "elements per former core"),
    ("int64_t", "tailLength", "elements per remaining core (usedCoreNum - formerNum of them)"),
    ("int64_t", "tileLength", "elements per UB tile"),
    ("uint32_t", "usedCoreNum", "blocks to launch (SetBlockDim / <<<>>>); at least 1"),
    ("uint32_t", "bufferNum", "TQue depth the kernel uses (1 or 2)"),
)
EXTRA_FIELDS = 8  # int64_t extra[8]: free planning values for the model


@dataclass(frozen=True)
class TilingField:
    ctype: str
    name: str
    count: int | None = None  # array length for *_ARR fields
    note: str = ""


def template_of(task: Task, config: AscendConfig) -> str:
    """An NPUKernelBench operator is always `full`: its three files are the benchmark's layout
    (benchmark_project.py). Else the task file's template; else `full` for cube work
    (settings.needs_cube: the kernel-only skeleton launches vector kernels only); else the
    configuration's."""
    if is_benchmark_task(task):
        return "full"
    s = task_settings(task)
    return s.template or ("full" if s.cube else config.template)


def kernel_only_fields(task: Task) -> list[TilingField]:
    """The fixed plain-struct fields: sizes, attrs, planning values (int64 first: no padding holes
    before the 32-bit fields, and the struct stays a whole number of 32-bit words)."""
    fields = [TilingField("int64_t", s, note="size symbol, filled from the input shapes") for s in task.sizes]
    fields += [
        TilingField("int64_t", k, note="integer attribute")
        for k, v in task.attrs.items()
        if not isinstance(v, float)
    ]
    fields += [TilingField(t, n, note=d) for t, n, d in PLAN_FIELDS if t == "int64_t"]
    fields.append(TilingField("int64_t", "extra", EXTRA_FIELDS, "free planning values"))
    fields += [
        TilingField("float", k, note="float attribute") for k, v in task.attrs.items() if isinstance(v, float)
    ]
    fields += [TilingField(t, n, note=d) for t, n, d in PLAN_FIELDS if t == "uint32_t"]
    return fields


def files_for(task: Task, config: AscendConfig) -> list[FileSpec]:
    n = op_names(task)
    if template_of(task, config) == "kernel-only":
        return [
            FileSpec(
                n.tiling_func_file,
                "cpp",
                "tiling",
                f"host tiling computation: fills {n.tiling_struct} (plain C++, no CANN headers)",
            ),
            FileSpec(n.kernel_file, "cpp", "kernel", f"device kernel {n.kernel_entry} (Ascend C)"),
        ]
    return [
        FileSpec(n.tiling_header, "cpp", "tiling", f"tiling-data definition {n.tiling_struct}"),
        FileSpec(n.host_file, "cpp", "host", f"host tiling function, shape inference, OpDef {n.op_type}"),
        FileSpec(n.kernel_file, "cpp", "kernel", f"device kernel {n.kernel_entry} (Ascend C)"),
    ]


def kernel_parameters(task: Task) -> list[str]:
    return (
        [f"GM_ADDR {t.name}" for t in task.inputs]
        + [f"GM_ADDR {t.name}" for t in task.outputs]
        + ["GM_ADDR workspace", "GM_ADDR tiling"]
    )


def kernel_signature(task: Task) -> str:
    return (
        f'extern "C" __global__ __aicore__ void {op_names(task).kernel_entry}('
        + ", ".join(kernel_parameters(task))
        + ")"
    )


def _tensor_lines(task: Task) -> list[str]:
    lines = []
    for kind, specs in (("input ", task.inputs), ("output", task.outputs)):
        for t in specs:
            dims = "[" + ", ".join(t.dims) + "]" if t.dims else "[] (one element)"
            note = " as one byte, 0 or 1: declare it uint8_t, never bool" if t.dtype == "bool" else ""
            lines.append(
                f"- {kind} `{t.name}`: {t.dtype} ({DTYPES[t.dtype][2]} in the kernel{note}) {dims}, "
                "ND format, contiguous row-major"
            )
    for s, v in task.sizes.items():
        lines.append(
            f"- size `{s}`: read it at run time (example {v}); held-out shapes are evaluated, "
            "so never hard-code it"
        )
    for k, attr in task.attrs.items():
        kind = "float" if isinstance(attr, float) else "int64"
        lines.append(
            f"- attribute `{k}`: {kind} scalar (example {attr}); it reaches the kernel only through "
            "the tiling data"
        )
    return lines


def _struct_text(names: OpNames, fields: list[TilingField]) -> str:
    body = []
    for f in fields:
        decl = f"{f.ctype} {f.name}" + (f"[{f.count}]" if f.count else "") + ";"
        body.append(f"    {decl:<28}// {f.note}" if f.note else f"    {decl}")
    return f"struct {names.tiling_struct} {{\n" + "\n".join(body) + "\n};"


def _entry_signature(task: Task) -> str:
    """The skeleton's kernel entry for an NPUKernelBench operator, else SAGE's."""
    from sagekernel.targets.ascendc.benchmark_project import skeleton_kernel_signature

    found = skeleton_kernel_signature(task) if is_benchmark_task(task) else None
    return found[0] if found else kernel_signature(task)


def _starting_project_lines(task: Task) -> list[str]:
    """NPUKernelBench: the skeleton's files, verbatim, as the project the model completes."""
    from sagekernel.targets.ascendc.benchmark_project import starting_project

    project = starting_project(task)
    if not project:
        return []
    lines = [
        "",
        "Starting project (the benchmark's skeleton): complete these files and write the tiling "
        "header. Keep the OpDef's inputs, outputs, attributes, data types and formats, the op and "
        "kernel names and the kernel entry's signature exactly as given; the tensors above are "
        "the skeleton's inputs and outputs in the same order.",
    ]
    for rel, text in project.items():
        lines += ["", f"`{rel}`:", "```cpp", text.rstrip("\n"), "```"]
    return lines


def _renamed_note(task: Task) -> str:
    """Prototype names that differ from the task's (names.PROTOTYPE_RESERVED), as the OpDef uses them."""
    if is_benchmark_task(task):
        return " (as the starting project's OpDef names them)"
    from sagekernel.targets.ascendc.skeleton import op_attrs, prototype  # skeleton imports this module

    given = [t.name for t in (*task.inputs, *task.outputs)] + [a for a, _, _ in op_attrs(task)]
    proto = [*prototype(task)["Input"], *prototype(task)["Output"], *prototype(task)["Attr"]]
    renamed = [f'"{p}" for {g}' for g, p in zip(given, proto, strict=True) if g != p]
    return f" (named {', '.join(renamed)}: msOpGen reserves the original names)" if renamed else ""


def contract_text(task: Task, config: AscendConfig) -> str:
    n = op_names(task)
    template = template_of(task, config)
    settings = task_settings(task)
    lines = [
        f"Ascend C operator `{n.op_type}` ({template} template, SoC {config.soc}, "
        f'AddConfig("{config.add_config}")).',
        "",
        "Tensors:",
        *_tensor_lines(task),
        "",
    ]
    lines += ["Files you write (one fenced block each, headed by its path):"]
    lines += [f"- `{f.path}` ({f.role}): {f.description}" for f in files_for(task, config)]
    lines += [
        "",
        "Kernel entry (exact name and parameter order):",
        "```cpp",
        _entry_signature(task) + ";",
        "```",
    ]
    if template == "kernel-only":
        lines += [
            "",
            f"The skeleton defines the tiling struct in `{n.tiling_header}` and "
            f'`{n.kernel_tiling_header}` (include it as "{n.snake}_tiling.h"):',
            "```cpp",
            _struct_text(n, kernel_only_fields(task)),
            "```",
            f"`{n.tiling_func_file}` defines exactly:",
            "```cpp",
            f'#include "{n.snake}_tiling.h"',
            f"void Compute{n.op_type}Tiling({n.tiling_struct}& t, uint32_t coreNum, uint64_t ubBytes);",
            "```",
            "Sizes and attributes are already filled when it is called; set usedCoreNum (1..coreNum) "
            "and the planning fields. The kernel copies the struct from `tiling` with "
            f"`SageCopyTiling(&t, tiling)` (declared in {n.snake}_tiling.h).",
            "This template runs vector kernels: coreNum is the vector (AIV) core count and the "
            "kernel declares `KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY)`. Cube work (Matmul and "
            "its TCubeTiling) needs the full template.",
        ]
    else:
        lines += [
            "",
            f"Tiling data: `BEGIN_TILING_DATA_DEF({n.tiling_struct})`, `TILING_DATA_FIELD_DEF(type, "
            f"name)` per field, `END_TILING_DATA_DEF;`, `REGISTER_TILING_DATA_CLASS({n.op_type}, "
            f"{n.tiling_struct})` inside `namespace optiling`.",
            f"Host: `optiling::TilingFunc(gert::TilingContext*)` (SetBlockDim, SaveToBuffer, "
            f"SetDataSize, workspace size), InferShape / InferDataType, `class {n.op_type} : public "
            f"OpDef` with every input, output and attribute above in this order{_renamed_note(task)}, "
            f'`AICore().SetTiling(optiling::TilingFunc)`, `AICore().AddConfig("{config.add_config}")`, '
            f"`OP_ADD({n.op_type});`.",
            f"Kernel: `GET_TILING_DATA(tilingData, tiling);` then read only fields your header defines, "
            f"with their declared types. The op is called as `{n.aclnn}`.",
        ]
    lines += _starting_project_lines(task)
    platform = (
        "use the coreNum and ubBytes your tiling function receives"
        if template == "kernel-only"
        else "query the core count and UB size on the host (PlatformAscendC)"
    )
    lines += [
        "",
        "Rules: tiling comes from the shapes at run time (held-out shapes are evaluated); "
        f"{platform} instead of hard-coding them; no aclnn, torch or torch_npu calls inside the "
        "operator; include only kernel_operator.h, lib/... Ascend C headers, the CANN register/tiling "
        "headers and your own files.",
    ]
    if settings.forbidden_apis:
        lines.append(
            "Not allowed for this operator (they would implement its core for you): "
            + ", ".join(f"AscendC::{a}" for a in settings.forbidden_apis)
            + "."
        )
    return "\n".join(lines)


__all__ = [
    "DTYPES",
    "EXTRA_FIELDS",
    "PLAN_FIELDS",
    "TilingField",
    "contract_text",
    "files_for",
    "kernel_only_fields",
    "kernel_parameters",
    "kernel_signature",
    "template_of",
]
