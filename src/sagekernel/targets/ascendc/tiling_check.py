"""Tiling-field agreement between the host's tiling-data definition and what the kernel reads.

The definition is the model's `BEGIN_TILING_DATA_DEF` header (full template) or the fixed plain
struct (kernel-only). Checked: every field the kernel reads exists; a local initialised from a
field has a compatible type (no float <-> integer change, no 64 -> 32-bit narrowing: a size that
fits on the host is silently truncated on the device); every field the host sets exists; every
field the kernel reads is set by the host (full) or is filled by the skeleton or assigned by the
model's tiling computation (kernel-only); the kernel-only struct is never redefined.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sagekernel.seam import LintFinding
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
    registered: tuple[str, str] | None  # REGISTER_TILING_DATA_CLASS(op, struct): the first
    line: int | None
    registrations: tuple[tuple[str, str], ...] = ()  # every one in the file
    structs: tuple[str, ...] = ()  # every BEGIN_TILING_DATA_DEF in the file


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
    reg = [(a[0], a[1]) for a, _ in src.macro_invocations("REGISTER_TILING_DATA_CLASS") if len(a) == 2]
    return TilingDef(
        begin[0][0][0] if begin and begin[0][0] else None,
        fields,
        reg[0] if reg else None,
        begin[0][1] if begin else None,
        tuple(reg),
        tuple(args[0] for args, _ in begin if args),
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


def reads_raw_tiling(kernel: Source) -> bool:
    """The kernel reads its `tiling` bytes without a typed struct (`*(__gm__ uint32_t*)tilingGm`):
    the entry's last parameter is used past its declaration, and some read of GM through a cast
    exists. Typed reads are checked field by field; raw ones only this far."""
    names = []
    for node in kernel.of_type("function_definition"):
        decl = node.child_by_field_name("declarator")
        while decl is not None and decl.type != "function_declarator":
            decl = decl.child_by_field_name("declarator")
        params = decl.child_by_field_name("parameters") if decl is not None else None
        if params is not None and params.named_child_count >= 2:
            last = kernel.node_text(params.named_children[-1]).split()[-1].lstrip("*&")
            if "tiling" in last.lower():
                names.append(last)
    idents = [t.text for t in kernel.tokens() if t.kind == "identifier"]
    return any(idents.count(n) > 1 for n in names)


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
    return _kernel_reads([(kernel, kernel_path)], definition)


def _kernel_reads(kernels: list[tuple[Source, str]], definition: TilingDef) -> list[LintFinding]:
    if definition.struct is None:
        return []
    findings = []
    bound = [(src, path, tiling_variables(src, definition.struct)) for src, path in kernels]
    if not any(v for _, _, v in bound) and not any(reads_raw_tiling(src) for src, _ in kernels):
        findings.append(
            LintFinding(
                RULE,
                f"the kernel never reads its tiling data ({definition.struct}); "
                "shapes must come from the tiling, not from constants",
                None,
                kernels[0][1] if kernels else "",
            )
        )
    for kernel, kernel_path, variables in bound:
        for var in sorted(variables):
            for read in kernel.field_reads(var):
                field = definition.fields.get(read.field)
                if field is None:
                    findings.append(
                        LintFinding(
                            RULE,
                            f"{kernel_path} reads {var}.{read.field}, but {definition.struct} defines no "
                            f"field {read.field} (fields: {', '.join(definition.fields) or 'none'})",
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
    return check_full_files([(header, header_path)], [(host, host_path)], [(kernel, kernel_path)], names)


def check_full_files(
    headers: list[tuple[Source, str]],
    hosts: list[tuple[Source, str]],
    kernels: list[tuple[Source, str]],
    names: OpNames,
) -> list[LintFinding]:
    """The full template over every file of each role (an operator may split its host side into
    a tiling header, a tiling .cpp and an OpDef .cpp, and its kernel over headers): the definition
    is the registered struct wherever it is written, the host sets are all set_ calls."""
    header_path = headers[0][1] if headers else names.tiling_header
    host_path = hosts[0][1] if hosts else names.host_file
    findings: list[LintFinding] = []
    candidates = [parse_macro_definition(src) for src, _ in [*headers, *hosts]]
    registered = [r for d in candidates for r in d.registrations]
    own = [r for r in registered if _registers_op(r[0], names.op_type)]
    struct = own[0][1] if own else names.tiling_struct
    merged: dict[str, TilingField] = {}
    for d in candidates:
        merged.update(d.fields)
    begun = [d for d in candidates if d.struct is not None]
    if not any(struct in d.structs for d in begun):
        findings.append(
            LintFinding(
                "names",
                f"{header_path} must define BEGIN_TILING_DATA_DEF({struct}), found "
                f"{', '.join(str(d.struct) for d in begun) or 'none'}",
                begun[0].line if begun else None,
                "",
            )
        )
    if not own:
        findings.append(
            LintFinding(
                "names",
                f"{header_path} must register REGISTER_TILING_DATA_CLASS({names.op_type}, {struct}), found "
                f"{'; '.join(', '.join(r) for r in registered) if registered else 'none'}",
                None,
                "",
            )
        )
    if not merged:
        findings.append(LintFinding(RULE, f"{header_path} defines no tiling fields", None, ""))
    # the kernel may read any registered struct (tiling keys register several); fields are merged
    definition = TilingDef(struct, merged, own[0] if own else None, None)
    structs = {struct} | {r[1] for r in own}
    used = [n for n in sorted(structs) if any(tiling_variables(src, n) for src, _ in kernels)]
    for s_name in used or [struct]:  # none bound: one "never reads" finding for the registered struct
        findings += _kernel_reads(kernels, TilingDef(s_name, merged, None, None))
    set_fields: dict[str, int] = {}
    got_fields: set[str] = set()  # filled through a pointer or a reference: get_X(), tiling.X
    for host, _ in [*hosts, *headers]:
        for call in host.calls():
            # tiling.set_x(...) on the struct itself; tiling.mm.set_x(...) is a nested CANN struct
            # (the callee's own expression: where the parser lost a statement among unknown
            # macros, `qualified` spans the statements before it)
            callee = re.split(r"[;{}(,=]", call.qualified)[-1]
            member = re.fullmatch(r"\s*\w+\s*(\.|->)\s*\w+\s*", callee) is not None
            if member and re.fullmatch(r"set_\w+", call.name):
                set_fields.setdefault(call.name[4:], call.line)
            elif member and re.fullmatch(r"get_\w+", call.name):
                got_fields.add(call.name[4:])
        for node in host.of_type("field_expression"):
            fld = node.child_by_field_name("field")
            if fld is not None and (node.parent is None or node.parent.type != "call_expression"):
                got_fields.add(host.node_text(fld))
    host_text = hosts[0][0] if hosts else None
    for fname, line in sorted(set_fields.items()):
        if fname not in definition.fields:
            findings.append(
                LintFinding(
                    RULE,
                    f"{host_path} sets {fname}, which {struct} does not define",
                    line,
                    host_text.line_text(line) if host_text is not None else "",
                )
            )
    read = set()
    for s_name in structs:
        for src, _ in kernels:
            read |= kernel_read_fields(src, s_name)
    for fname in sorted(read & set(definition.fields)):
        if fname not in set_fields and fname not in got_fields:
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


def _registers_op(registered_op: str, op_type: str) -> bool:
    """`Op` or a tiling-key registration `Op_<key>` (REGISTER_TILING_DATA_CLASS(Op_1, ...))."""
    return registered_op == op_type or (
        registered_op.startswith(op_type + "_") and registered_op[len(op_type) + 1 :].isdigit()
    )


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
                        src.line(node),
                        src.line_text(src.line(node)),
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
    "check_full_files",
    "check_kernel_only",
    "check_kernel_reads",
    "kernel_only_fields",
    "parse_macro_definition",
    "tiling_variables",
]
