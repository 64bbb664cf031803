"""The fixed project files: the op prototype JSON (msOpGen input) and the kernel-only skeleton.

Everything is rendered from the task, so the names agree with the contract (names.py) by
construction. Size symbols that no input carries (e.g. arange's length) become int attributes
`size_<S>` of the op, so shape inference and tiling can still see them.
"""

from __future__ import annotations

import json

from sagekernel.targets.ascendc.config import AscendConfig
from sagekernel.targets.ascendc.contract import DTYPES, kernel_only_fields
from sagekernel.targets.ascendc.names import is_benchmark_task, op_names, prototype_names
from sagekernel.tasks.task import Task


def size_sources(task: Task) -> dict[str, tuple[int, int] | None]:
    """size symbol -> (input index, dim index) where it can be read, or None (an op attribute)."""
    found: dict[str, tuple[int, int] | None] = {}
    for s in task.sizes:
        found[s] = next(
            ((i, j) for i, t in enumerate(task.inputs) for j, d in enumerate(t.dims) if d == s), None
        )
    return found


def op_attrs(task: Task) -> list[tuple[str, str, object]]:
    """(name, 'float' | 'int', default) in OpDef / aclnn order: task attrs, then size attributes."""
    out: list[tuple[str, str, object]] = [
        (k, "float" if isinstance(v, float) else "int", v) for k, v in task.attrs.items()
    ]
    out += [(f"size_{s}", "int", task.sizes[s]) for s, src in size_sources(task).items() if src is None]
    return out


def prototype(task: Task) -> dict[str, list[str]]:
    """The op prototype's Input / Output / Attr names, in order (names.prototype_names: a name
    msOpGen's generated code uses itself is renamed). The op JSON, the OpDef, the contract and the
    lint all read them from here."""
    tensors_in, tensors_out = [t.name for t in task.inputs], [t.name for t in task.outputs]
    attrs = [a for a, _, _ in op_attrs(task)]
    renamed = prototype_names([*tensors_in, *tensors_out, *attrs])
    k, m = len(tensors_in), len(tensors_in) + len(tensors_out)
    return {"Input": renamed[:k], "Output": renamed[k:m], "Attr": renamed[m:]}


def op_json(task: Task) -> str:
    """The op prototype msOpGen reads (`msopgen gen -i <op>.json ...`): an NPUKernelBench
    operator's as its skeleton's OpDef declares it (opdef.py), else rendered from the task."""
    n = op_names(task)
    if is_benchmark_task(task):
        from sagekernel.targets.ascendc.benchmark_project import skeleton_opdef
        from sagekernel.targets.ascendc.opdef import op_json as opdef_json

        declared = skeleton_opdef(task)
        if declared is not None:  # incomplete: the plan's problems say why (benchmark_binding)
            return opdef_json(declared, n.op_type)
    proto = prototype(task)

    def desc(name, t):
        return {"name": name, "param_type": "required", "format": ["ND"], "type": [DTYPES[t.dtype][0]]}

    spec = {
        "op": n.op_type,
        "language": "cpp",
        "input_desc": [desc(p, t) for p, t in zip(proto["Input"], task.inputs, strict=True)],
        "output_desc": [desc(p, t) for p, t in zip(proto["Output"], task.outputs, strict=True)],
        "attr": [
            {"name": p, "param_type": "optional", "type": kind, "default_value": str(default)}
            for p, (_, kind, default) in zip(proto["Attr"], op_attrs(task), strict=True)
        ],
    }
    return json.dumps([spec], indent=4) + "\n"


def plain_tiling_header(task: Task, *, kernel_side: bool) -> str:
    """The kernel-only template's tiling struct; the kernel-side copy adds SageCopyTiling."""
    n = op_names(task)
    guard = f"SAGE_{n.snake.upper()}_TILING_{'KERNEL' if kernel_side else 'HOST'}_H"
    fields = "\n".join(
        f"    {f.ctype} {f.name}"
        + (f"[{f.count}]" if f.count else "")
        + ";"
        + (f"  // {f.note}" if f.note else "")
        for f in kernel_only_fields(task)
    )
    text = [
        f"#ifndef {guard}",
        f"#define {guard}",
        "",
        # Kernel side: GM_ADDR and __aicore__ (SageCopyTiling) come from kernel_operator.h, so the
        # header brings it itself and any include order compiles.
        '#include "kernel_operator.h"' if kernel_side else "#include <cstdint>",
        "",
        "// Fixed by the kernel-only template: do not redefine.",
        f"struct {n.tiling_struct} {{",
        fields,
        "};",
        f'static_assert(sizeof({n.tiling_struct}) % sizeof(uint32_t) == 0, "whole 32-bit words");',
    ]
    if kernel_side:
        text += [
            "",
            "// Copies the tiling struct from global memory, one 32-bit word at a time.",
            f"__aicore__ inline void SageCopyTiling({n.tiling_struct}* t, GM_ADDR tilingGm)",
            "{",
            "    uint32_t* dst = reinterpret_cast<uint32_t*>(t);",
            "    auto src = reinterpret_cast<__gm__ uint32_t*>(tilingGm);",
            f"    for (uint32_t i = 0; i < sizeof({n.tiling_struct}) / sizeof(uint32_t); ++i) {{",
            "        dst[i] = src[i];",
            "    }",
            "}",
        ]
    text += ["", f"#endif  // {guard}", ""]
    return "\n".join(text)


def _shape_expr(task: Task, sym: str, src: tuple[int, int] | None) -> str:
    if src is None:
        idx = [a for a, _, _ in op_attrs(task)].index(f"size_{sym}")
        return f"*attrs->GetAttrPointer<int64_t>({idx})"
    i, j = src
    return f"context->GetInputShape({i})->GetStorageShape().GetDim({j})"


def kernel_only_host(task: Task, config: AscendConfig) -> str:
    """op_host/<op>.cpp of the kernel-only template: TilingFunc calls the model's computation."""
    n = op_names(task)
    sources = size_sources(task)
    attrs = op_attrs(task)
    needs_attrs = bool(attrs)
    out0 = task.outputs[0]
    total = " * ".join(f"t.{d}" for d in out0.dims) or "1"
    fill = [f"    t.{s} = {_shape_expr(task, s, src)};" for s, src in sources.items()]
    for idx, (a, kind, _) in enumerate(attrs):
        if a.startswith("size_"):
            continue
        ctype = "float" if kind == "float" else "int64_t"
        fill.append(f"    t.{a} = *attrs->GetAttrPointer<{ctype}>({idx});")
    infer = []
    for k, o in enumerate(task.outputs):
        infer.append(f"    gert::Shape* out{k} = context->GetOutputShape({k});")
        infer.append(f"    out{k}->SetDimNum({len(o.dims)});")
        for j, d in enumerate(o.dims):
            infer.append(f"    out{k}->SetDim({j}, {_infer_dim(task, d)});")
    dtypes = [
        f"    context->SetOutputDataType({k}, {DTYPES[o.dtype][1]});" for k, o in enumerate(task.outputs)
    ]
    opdef = []
    proto = prototype(task)
    for kind, specs in (("Input", task.inputs), ("Output", task.outputs)):
        for name, t in zip(proto[kind], specs, strict=True):
            opdef.append(
                f'        this->{kind}("{name}").ParamType(REQUIRED).DataType({{{DTYPES[t.dtype][1]}}})'
                ".Format({ge::FORMAT_ND});"
            )
    for name, (_, kind, default) in zip(proto["Attr"], attrs, strict=True):
        value = f"{float(str(default))!r}f" if kind == "float" else f"{int(str(default))}"
        setter = "Float" if kind == "float" else "Int"
        opdef.append(f'        this->Attr("{name}").AttrType(OPTIONAL).{setter}({value});')
    fields = kernel_only_fields(task)
    registered = f"{n.op_type}SageTiling"
    mirror = [
        (
            f"TILING_DATA_FIELD_DEF_ARR({f.ctype}, {f.count}, {f.name});"
            if f.count
            else f"TILING_DATA_FIELD_DEF({f.ctype}, {f.name});"
        )
        for f in fields
    ]
    attrs_line = ["    const gert::RuntimeAttrs* attrs = context->GetAttrs();"] if needs_attrs else []
    infer_attrs = attrs_line if any(s is None for s in sources.values()) else []
    return "\n".join(
        [
            "// Fixed by the kernel-only template (rendered from the task): do not edit.",
            f'#include "{n.snake}_tiling.h"',
            "#include <cstring>",
            '#include "register/op_def_registry.h"',
            '#include "register/tilingdata_base.h"',
            '#include "tiling/platform/platform_ascendc.h"',
            "",
            "namespace optiling {",
            "// The plain struct, registered with the framework (it sizes the kernel's tiling buffer",
            "// from the registered class; an unregistered op gets a buffer of 0 bytes).",
            f"BEGIN_TILING_DATA_DEF({registered})",
            *mirror,
            "END_TILING_DATA_DEF;",
            f"REGISTER_TILING_DATA_CLASS({n.op_type}, {registered})",
            "}  // namespace optiling",
            "",
            f"void Compute{n.op_type}Tiling({n.tiling_struct}& t, uint32_t coreNum, uint64_t ubBytes);",
            "",
            "namespace optiling {",
            "static ge::graphStatus TilingFunc(gert::TilingContext* context)",
            "{",
            *attrs_line,
            f"    {n.tiling_struct} t{{}};",
            *fill,
            f"    t.totalLength = {total};",
            "    auto platform = platform_ascendc::PlatformAscendC(context->GetPlatformInfo());",
            "    uint32_t coreNum = platform.GetCoreNumAiv();",
            "    uint64_t ubBytes = 0;",
            "    platform.GetCoreMemSize(platform_ascendc::CoreMemType::UB, ubBytes);",
            f"    Compute{n.op_type}Tiling(t, coreNum, ubBytes);",
            "    if (t.usedCoreNum < 1 || t.usedCoreNum > coreNum) {",
            "        return ge::GRAPH_FAILED;",
            "    }",
            "    context->SetBlockDim(t.usedCoreNum);",
            # The registered mirror sizes the framework's tiling buffer (K1); same fields, same
            # order, no padding holes, so its bytes are the plain struct's (checked here).
            f"    {registered} reg;",
            *[f"    reg.set_{f.name}(t.{f.name});" for f in fields],
            "    auto raw = context->GetRawTilingData();",
            "    if (reg.GetDataSize() != sizeof(t) || raw->GetCapacity() < sizeof(t)) {",
            "        return ge::GRAPH_FAILED;",
            "    }",
            "    reg.SaveToBuffer(raw->GetData(), raw->GetCapacity());",
            "    raw->SetDataSize(reg.GetDataSize());",
            "    size_t* workspace = context->GetWorkspaceSizes(1);",
            "    workspace[0] = platform.GetLibApiWorkSpaceSize();",
            "    return ge::GRAPH_SUCCESS;",
            "}",
            "}  // namespace optiling",
            "",
            "namespace ge {",
            "static ge::graphStatus InferShape(gert::InferShapeContext* context)",
            "{",
            *infer_attrs,
            *infer,
            "    return GRAPH_SUCCESS;",
            "}",
            "static ge::graphStatus InferDataType(gert::InferDataTypeContext* context)",
            "{",
            *dtypes,
            "    return ge::GRAPH_SUCCESS;",
            "}",
            "}  // namespace ge",
            "",
            "namespace ops {",
            f"class {n.op_type} : public OpDef {{",
            "public:",
            f"    explicit {n.op_type}(const char* name) : OpDef(name)",
            "    {",
            *opdef,
            "        this->SetInferShape(ge::InferShape).SetInferDataType(ge::InferDataType);",
            "        this->AICore().SetTiling(optiling::TilingFunc);",
            f'        this->AICore().AddConfig("{config.add_config}");',
            "    }",
            "};",
            f"OP_ADD({n.op_type});",
            "}  // namespace ops",
            "",
        ]
    )


def _infer_dim(task: Task, sym: str) -> str:
    src = size_sources(task).get(sym)
    if src is None:
        idx = [a for a, _, _ in op_attrs(task)].index(f"size_{sym}")
        return f"*attrs->GetAttrPointer<int64_t>({idx})"
    i, j = src
    return f"context->GetInputShape({i})->GetDim({j})"


__all__ = ["kernel_only_host", "op_attrs", "op_json", "plain_tiling_header", "prototype", "size_sources"]
