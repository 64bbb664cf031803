"""Tiling-field agreement between the host's tiling-data definition and what the kernel reads.

The definition is the model's `BEGIN_TILING_DATA_DEF` header (full template) or the fixed plain
struct (kernel-only). Checked: every field the kernel reads exists; a local initialised from a
field has a compatible type (no float <-> integer change, no 64 -> 32-bit narrowing: a size that
fits on the host is silently truncated on the device); every field the host sets exists; every
field the kernel reads is set by the host (full) or is filled by the skeleton or assigned by the
model's tiling computation (kernel-only); the kernel-only struct is never redefined.
"""

from __future__ import annotations

from dataclasses import dataclass

from sagekernel.harness.verdict import LintFinding
from sagekernel.targets.ascendc.contract import TilingField, kernel_only_fields
from sagekernel.targets.ascendc.cparse import Source
from sagekernel.targets.ascendc.names import OpNames

RULE = "tiling_fields"

_INT_WIDTH = {
    "int8_t": 8,
    "uint8_t": 8,
    "int16_t": 16,
    "uint16_t": 16,
    "int32_t": 32,
    "uint32_t": 32,
    "int": 32,
    "unsigned": 32,
    "unsigned int": 32,
    "int64_t": 64,
    "uint64_t": 64,
    "long": 64,
    "size_t": 64,
    "long long": 64,
    "unsigned long": 64,
    "uint64": 64,
    "int64": 64,
    "uint32": 32,
    "int32": 32,
}
_FLOAT = {"float", "double", "half", "float16_t", "bfloat16_t"}


@dataclass(frozen=True)
class TilingDef:
    struct: str | None
    fields: dict[str, TilingField]
    registered: tuple[str, str] | None  # REGISTER_TILING_DATA_CLASS(op, struct)
    line: int | None


def parse_macro_definition(src: Source) -> TilingDef:
    begin = src.macro_invocations("BEGIN_TILING_DATA_DEF")
    fields: dict[str, TilingField] = {}
    for args, _ in src.macro_invocations("TILING_DATA_FIELD_DEF"):
        if len(args) == 2:
            fields[args[1]] = TilingField(args[0], args[1])
    for args, _ in src.macro_invocations("TILING_DATA_FIELD_DEF_ARR"):
        if len(args) == 3:
            count = int(args[1]) if args[1].isdigit() else None
            fields[args[2]] = TilingField(args[0], args[2], count)
    for args, _ in src.macro_invocations("TILING_DATA_FIELD_DEF_STRUCT"):
        if len(args) == 2:
            fields[args[1]] = TilingField(args[0], args[1])
    reg = src.macro_invocations("REGISTER_TILING_DATA_CLASS")
    return TilingDef(
        begin[0][0][0] if begin and begin[0][0] else None,
        fields,
        (reg[0][0][0], reg[0][0][1]) if reg and len(reg[0][0]) == 2 else None,
        begin[0][1] if begin else None,
    )


def plain_definition(names: OpNames, task_fields: list[TilingField]) -> TilingDef:
    return TilingDef(names.tiling_struct, {f.name: f for f in task_fields}, None, None)


def tiling_variables(src: Source, struct: str) -> set[str]:
    """Names bound to the tiling data in a kernel: GET_TILING_DATA's first argument, the target of
    SageCopyTiling, and every declaration or parameter whose type names the struct."""
    names = {args[0] for args, _ in src.macro_invocations("GET_TILING_DATA") if args}
    names |= {args[1] for args, _ in src.macro_invocations("GET_TILING_DATA_WITH_STRUCT") if len(args) > 1}
    names |= {args[0].lstrip("& ").strip() for args, _ in src.macro_invocations("SageCopyTiling") if args}
    for node in src.of_type("parameter_declaration", "declaration", "field_declaration"):
        type_node = node.child_by_field_name("type")
        if type_node is None or struct not in src.node_text(type_node):
            continue
        for ident in src.walk(node.child_by_field_name("declarator") or node):
            if ident.type in ("identifier", "field_identifier"):
                names.add(src.node_text(ident))
                break
    return names


def _type_problem(field: TilingField, declared: str) -> str | None:
    local = declared.replace("const", "").replace("constexpr", "").replace("static", "").strip()
    if local == "auto" or field.count:
        return None
    if (field.ctype in _FLOAT) != (local in _FLOAT) and (local in _FLOAT or local in _INT_WIDTH):
        return f"{field.ctype} field read into a {local} local"
    fw, lw = _INT_WIDTH.get(field.ctype), _INT_WIDTH.get(local)
    if fw and lw and lw < fw:
        return f"{field.ctype} field narrowed into a {local} local"
    return None


def assigned_fields(src: Source) -> set[str]:
    out = set()
    for node in src.of_type("assignment_expression"):
        left = node.child_by_field_name("left")
        if left is not None and left.type == "field_expression":
            fld = left.child_by_field_name("field")
            if fld is not None:
                out.add(src.node_text(fld))
    return out


def check_kernel_reads(kernel: Source, kernel_path: str, definition: TilingDef) -> list[LintFinding]:
    if definition.struct is None:
        return []
    findings = []
    variables = tiling_variables(kernel, definition.struct)
    if not variables:
        findings.append(
            LintFinding(
                RULE,
                f"the kernel never reads its tiling data ({definition.struct}); "
                "shapes must come from the tiling, not from constants",
                None,
                kernel_path,
            )
        )
    for var in sorted(variables):
        for read in kernel.field_reads(var):
            field = definition.fields.get(read.field)
            if field is None:
                findings.append(
                    LintFinding(
                        RULE,
                        f"{kernel_path} reads {var}.{read.field}, but {definition.struct} defines no field "
                        f"{read.field} (fields: {', '.join(definition.fields) or 'none'})",
                        read.line,
                        kernel.line_text(read.line),
                    )
                )
            elif read.declared_type and (problem := _type_problem(field, read.declared_type)):
                findings.append(
                    LintFinding(
                        RULE,
                        f"{kernel_path}: {problem} ({var}.{read.field}); declare the "
                        "local with the field's type",
                        read.line,
                        kernel.line_text(read.line),
                    )
                )
    return findings


def kernel_read_fields(kernel: Source, struct: str) -> set[str]:
    return {r.field for v in tiling_variables(kernel, struct) for r in kernel.field_reads(v)}


def check_full(
    header: Source,
    header_path: str,
    host: Source,
    host_path: str,
    kernel: Source,
    kernel_path: str,
    names: OpNames,
) -> list[LintFinding]:
    definition = parse_macro_definition(header)
    findings: list[LintFinding] = []
    if definition.struct != names.tiling_struct:
        findings.append(
            LintFinding(
                "names",
                f"{header_path} must define BEGIN_TILING_DATA_DEF("
                f"{names.tiling_struct}), found {definition.struct or 'none'}",
                definition.line,
                "",
            )
        )
    if definition.registered != (names.op_type, names.tiling_struct):
        findings.append(
            LintFinding(
                "names",
                f"{header_path} must register REGISTER_TILING_DATA_CLASS("
                f"{names.op_type}, {names.tiling_struct}), found "
                f"{', '.join(definition.registered) if definition.registered else 'none'}",
                None,
                "",
            )
        )
    if not definition.fields:
        findings.append(LintFinding(RULE, f"{header_path} defines no tiling fields", None, ""))
    definition = TilingDef(names.tiling_struct, definition.fields, definition.registered, definition.line)
    findings += check_kernel_reads(kernel, kernel_path, definition)
    set_fields = {}
    for call in host.calls():
        if call.name.startswith("set_") and ("." in call.qualified or "->" in call.qualified):
            set_fields[call.name[4:]] = call.line
    for fname, line in sorted(set_fields.items()):
        if fname not in definition.fields:
            findings.append(
                LintFinding(
                    RULE,
                    f"{host_path} sets {fname}, which {names.tiling_struct} does not define",
                    line,
                    host.line_text(line),
                )
            )
    for fname in sorted(kernel_read_fields(kernel, names.tiling_struct) & set(definition.fields)):
        if fname not in set_fields:
            findings.append(
                LintFinding(
                    RULE,
                    f"the kernel reads {fname}, but {host_path} never calls "
                    f"set_{fname}: the kernel would read an unset value",
                    None,
                    "",
                )
            )
    return findings


def names_filled_by_skeleton(task_fields: list[TilingField]) -> list[str]:
    """Sizes, attributes and totalLength: what the skeleton writes before the model's function runs."""
    return [
        f.name
        for f in task_fields
        if f.note.startswith(("size symbol", "integer attribute", "float attribute", "elements of the first"))
    ]


def check_kernel_only(
    tiling_func: Source,
    tiling_path: str,
    kernel: Source,
    kernel_path: str,
    names: OpNames,
    task_fields: list[TilingField],
) -> list[LintFinding]:
    definition = plain_definition(names, task_fields)
    findings = check_kernel_reads(kernel, kernel_path, definition)
    for src, path in ((tiling_func, tiling_path), (kernel, kernel_path)):
        for node in src.of_type("struct_specifier"):
            name = node.child_by_field_name("name")
            if (
                name is not None
                and src.node_text(name) == names.tiling_struct
                and node.child_by_field_name("body") is not None
            ):
                findings.append(
                    LintFinding(
                        RULE,
                        f"{path} redefines {names.tiling_struct}; the kernel-only "
                        "template fixes it: include the skeleton header instead",
                        node.start_point[0] + 1,
                        src.line_text(node.start_point[0] + 1),
                    )
                )
    assigned = assigned_fields(tiling_func)
    for fname in sorted(assigned - set(definition.fields)):
        findings.append(
            LintFinding(
                RULE, f"{tiling_path} assigns {fname}, which {names.tiling_struct} does not define", None, ""
            )
        )
    filled = set(names_filled_by_skeleton(task_fields))
    for fname in sorted(kernel_read_fields(kernel, names.tiling_struct) - filled - assigned):
        if fname in definition.fields:
            findings.append(
                LintFinding(
                    RULE,
                    f"the kernel reads {fname}, but {tiling_path} never assigns it (it would read 0)",
                    None,
                    "",
                )
            )
    if "usedCoreNum" not in assigned:
        findings.append(
            LintFinding(RULE, f"{tiling_path} never sets usedCoreNum (the block count to launch)", None, "")
        )
    return findings


__all__ = [
    "RULE",
    "TilingDef",
    "assigned_fields",
    "check_full",
    "check_kernel_only",
    "check_kernel_reads",
    "kernel_only_fields",
    "parse_macro_definition",
    "tiling_variables",
]
