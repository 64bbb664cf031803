"""The paper's integrity rules (C.3), judged by what the code reaches, not by how it is spelled.

- Forbidden high-level APIs: every *reference* to a forbidden name counts, not only a direct call
  under its own name: a macro body (`#define SM AscendC::SoftMax`), a `using` alias, a namespace
  alias, a function pointer (`&AscendC::Sigmoid<float, false>`), and the API's implementation
  family (`SigmoidImpl`, `SoftMaxV2`, ...: the forbidden name followed by an upper-case letter,
  a digit or `_`). A name the candidate defines itself is its own code, unless it is reached
  through `AscendC::`. Token pasting (`##`) is refused: it builds names the text never shows.
- The operator's own library header: a `lib/...` include whose file name is a forbidden API's
  (`lib/activation/sigmoid.h` for mul_sigmoid).
- Framework and loader reach: references (not only calls) to aclnn / aclop / aclrt, the torch
  namespaces, and the dynamic loader (`dlopen`, `dlsym`, ...) or process primitives, which
  would reach another implementation by a string the text never names as a call.
- Shape specialisation: a constant expression (literals, arithmetic on them, named constants)
  whose value is an evaluation size, where it specialises shape-derived code: compared with a
  value that comes from a shape (`if (t.totalLength == 8 * 8000)`; data flow from the host's
  shape queries and the size fields, through locals, assignments and `set_<field>`), as a
  `case` label of a switch on a shape, or stored into a size-carrying field. The same constant
  elsewhere (an unroll factor of 33, a tensor-count limit of 24) is left alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sagekernel.targets.ascendc.cparse import Source
from sagekernel.targets.cpu import syntax

#: Identifier leaf kinds a name can be referred to by (tree-sitter-cpp).
_NAME_KINDS = ("identifier", "type_identifier", "field_identifier", "namespace_identifier")
_IDENT = re.compile(r"[A-Za-z_]\w*")
#: Loader and process primitives: they reach code by a string, so no name check can follow them.
LOADER_NAMES = frozenset(
    ("dlopen", "dlsym", "dlvsym", "dlmopen", "dladdr", "dlinfo", "__libc_dlopen_mode", "system",
     "popen", "execv", "execve", "execvp", "execl", "execlp", "fork", "vfork", "syscall")
)  # fmt: skip
FRAMEWORK_PREFIXES = ("aclnn", "aclop", "aclrt", "EXEC_NPU_CMD", "OpCommand")
FRAMEWORK_NAMESPACES = ("at", "torch", "c10", "c10_npu", "torch_npu", "at_npu", "op_api", "l0op")
_COMPARE = frozenset(("==", "!=", "<", "<=", ">", ">="))


@dataclass(frozen=True)
class Reference:
    name: str
    line: int
    qualified_by: str  # the namespace written before it ("AscendC"), or ""
    in_macro: bool  # found in a #define body


def references(src: Source) -> list[Reference]:
    """Every name the code mentions, with macro bodies parsed on their own (the grammar keeps them
    as text; the shared front end reads their tokens)."""
    out: list[Reference] = []
    for node in src.walk():
        if node.children:
            continue
        line = src.line(node)
        if node.type in _NAME_KINDS:
            out.append(Reference(src.node_text(node), line, _qualifier(src, node), False))
        elif node.type == "preproc_arg":  # a macro body: its own tokens (strings are not names)
            toks = syntax.fragment_tokens(src.node_text(node), node.start_point[0], True)
            for k, tok in enumerate(toks):
                if re.fullmatch(r"[A-Za-z_]\w*", tok.text):
                    scope = toks[k - 2].text if k >= 2 and toks[k - 1].text == "::" else ""
                    out.append(Reference(tok.text, line, scope, True))
    return out


def _qualifier(src: Source, node: Any) -> str:
    parent = node.parent
    while parent is not None and parent.type in (
        "template_type",
        "template_function",
        "qualified_identifier",
    ):
        if parent.type == "qualified_identifier":
            scope = parent.child_by_field_name("scope")
            if scope is not None and scope != node:
                return src.node_text(scope).split("<")[0].strip()
        parent = parent.parent
    return ""


def defined_names(src: Source) -> set[str]:
    """Names the candidate defines: functions, classes / structs, aliases, variables, parameters, macros."""
    names: set[str] = {n for n, _ in src.function_names()}
    for node in src.of_type("class_specifier", "struct_specifier", "alias_declaration", "type_definition",
                            "preproc_def", "preproc_function_def", "namespace_definition"):  # fmt: skip
        name = node.child_by_field_name("name") or node.child_by_field_name("declarator")
        if name is not None:
            names.add(src.node_text(name).split("::")[-1])
    for macro in ("BEGIN_TILING_DATA_DEF", "REGISTER_TILING_DATA_CLASS", "BEGIN_TILING_DATA_DEF_T"):
        names.update(args[-1] for args, _ in src.macro_invocations(macro) if args)
    for node in src.of_type("init_declarator", "parameter_declaration", "declaration", "field_declaration"):
        decl = node.child_by_field_name("declarator")
        while decl is not None and decl.type not in ("identifier", "field_identifier"):
            decl = decl.child_by_field_name("declarator")
        if decl is not None:
            names.add(src.node_text(decl))
    return names


def in_family(name: str, api: str) -> bool:
    """`SigmoidImpl`, `Sigmoid_`, `SoftMaxV2` belong to `Sigmoid` / `SoftMax`; `Sigmoidal` does not."""
    if name == api:
        return True
    return name.startswith(api) and (name[len(api)].isupper() or name[len(api)] in "_0123456789")


def forbidden_references(
    src: Source, forbidden: Iterable[str], own: set[str] | None = None
) -> list[tuple[Reference, str]]:
    """References to a forbidden API's family; `own`: names the candidate defines (all its files)."""
    apis = tuple(forbidden)
    if not apis:
        return []
    own = own if own is not None else defined_names(src)
    found = []
    for ref in references(src):
        api = next((a for a in apis if in_family(ref.name, a)), None)
        if api is None:
            continue
        if ref.name in own and ref.qualified_by != "AscendC":
            continue  # the candidate's own helper of that name
        found.append((ref, api))
    return found


def token_pasting(src: Source, forbidden: Iterable[str]) -> list[int]:
    """Lines where a macro that pastes names (`a##b`; the GNU `, ##__VA_ARGS__` is not pasting)
    is expanded, at one of its invocations, into a forbidden API's family."""
    apis = tuple(forbidden)
    found = []
    for node in src.of_type("preproc_function_def"):
        name, params, value = (node.child_by_field_name(k) for k in ("name", "parameters", "value"))
        if name is None or params is None or value is None:
            continue
        body = re.sub(r"##\s*__VA_ARGS__", "", src.node_text(value))
        if "##" not in body:
            continue
        formals = [src.node_text(p) for p in params.named_children]
        for args, line in src.macro_invocations(src.node_text(name)):
            text = body
            for formal, actual in zip(formals, args, strict=False):
                text = re.sub(rf"\b{re.escape(formal)}\b", actual, text)
            pasted = re.sub(r"\s*##\s*", "", text)
            if any(in_family(ident, api) for ident in _IDENT.findall(pasted) for api in apis):
                found.append(line)
    return found


def framework_references(src: Source) -> list[tuple[Reference, str]]:
    """(reference, why) for names that hand the work to another implementation or a loader."""
    found = []
    types = {src.node_text(n) for n in src.of_type("type_identifier")}
    refs = references(src)
    for ref in refs:
        if ref.name in types and not ref.in_macro and ref.name not in LOADER_NAMES:
            continue  # a type (aclnnStatus, aclrtStream) does nothing by being named
        if ref.name in LOADER_NAMES:
            found.append((ref, "the dynamic loader or a process primitive"))
        elif ref.name.startswith(FRAMEWORK_PREFIXES):
            found.append((ref, "aclnn / ACL / torch_npu's op command"))
        elif ref.qualified_by in FRAMEWORK_NAMESPACES or (
            ref.name in FRAMEWORK_NAMESPACES and _is_scope(refs, ref)
        ):
            found.append((ref, "torch / ATen"))
    return found


def _is_scope(refs: list[Reference], ref: Reference) -> bool:
    """Whether `ref` names a scope (`at::`): some name on its line is qualified by it, in code
    (the raw line, comments included, used to decide this)."""
    return any(r.line == ref.line and r.qualified_by.split("::")[0] == ref.name for r in refs)


# -- constant expressions ----------------------------------------------------------------------
def constants(src: Source) -> dict[str, int]:
    """Named integer constants with a constant initialiser (`constexpr`, `const`, `#define N 64`)."""
    env: dict[str, int] = {}
    for node in src.of_type("preproc_def"):
        name, value = node.child_by_field_name("name"), node.child_by_field_name("value")
        if name is not None and value is not None:
            v = _literal(src.node_text(value).strip().strip("()"))
            if v is not None:
                env[src.node_text(name)] = v
    for _ in range(2):  # constants defined from constants
        for node in src.of_type("declaration"):
            specs = " ".join(src.node_text(c) for c in node.children if c.type == "type_qualifier")
            if "const" not in specs:
                continue
            for init in node.children:
                if init.type != "init_declarator":
                    continue
                name, value = init.child_by_field_name("declarator"), init.child_by_field_name("value")
                if name is not None and value is not None and name.type == "identifier":
                    v = fold(src, value, env)
                    if v is not None:
                        env[src.node_text(name)] = v
    return env


def _literal(text: str) -> int | None:
    digits = re.sub(r"[uUlL]+$", "", text.replace("'", ""))
    try:
        return int(digits, 0)
    except ValueError:
        return None


def fold(src: Source, node: Any, env: dict[str, int]) -> int | None:
    """The integer value of a constant expression, or None when it depends on anything else."""
    kind = node.type
    if kind == "number_literal":
        return _literal(src.node_text(node))
    if kind == "identifier":
        return env.get(src.node_text(node))
    if kind in ("parenthesized_expression", "initializer_list") and node.named_child_count == 1:
        return fold(src, node.named_children[0], env)
    if kind == "call_expression":  # static_cast<T>(c), T(c)
        fn, args = node.child_by_field_name("function"), node.child_by_field_name("arguments")
        if (
            fn is not None
            and args is not None
            and args.named_child_count == 1
            and "cast" in src.node_text(fn)
        ):
            return fold(src, args.named_children[0], env)
        return None
    if kind == "cast_expression":
        value = node.child_by_field_name("value")
        return fold(src, value, env) if value is not None else None
    if kind == "binary_expression":
        op = node.child_by_field_name("operator")
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        if op is None or left is None or right is None:
            return None
        a, b = fold(src, left, env), fold(src, right, env)
        if a is None or b is None:
            return None
        operator = src.node_text(op)
        if operator in ("/", "%") and b == 0:
            return None
        table = {"+": a + b, "-": a - b, "*": a * b, "/": a // b if b else 0, "%": a % b if b else 0,
                 "<<": a << b if 0 <= b < 64 else None, ">>": a >> b if 0 <= b < 64 else None}  # fmt: skip
        return table.get(operator)
    return None


@dataclass(frozen=True)
class Specialisation:
    value: int
    line: int
    how: str  # "compared with" | "case label" | "stored into tiling field x"


#: Calls that read a shape on the host (gert contexts, ATen tensors).
SHAPE_CALLS = frozenset(
    ("GetDim", "GetShapeSize", "GetStorageShape", "GetOriginShape", "GetDimNum", "GetShape",
     "GetInputShape", "GetOutputShape", "size", "numel", "sizes")
)  # fmt: skip


def _mentions_shape(src: Source, node: Any, derived: set[str], fields: set[str]) -> bool:
    for n in src.walk(node):
        if n.type == "call_expression":
            fn = n.child_by_field_name("function")
            if (
                fn is not None
                and re.split(r"::|\.|->", re.sub(r"<.*>$", "", src.node_text(fn)))[-1] in SHAPE_CALLS
            ):
                return True
        elif n.type == "field_expression":
            f = n.child_by_field_name("field")
            if f is not None and src.node_text(f) in fields:
                return True
        elif n.type == "identifier" and src.node_text(n) in derived:
            return True
    return False


def _flow(src: Source, fields: set[str]) -> tuple[set[str], set[str]]:
    """(locals, tiling fields) whose value comes from a shape: a shape query, a size field, or
    another such name, through declarations, assignments and `set_<field>(...)` (three passes)."""
    derived: set[str] = set()
    fields = set(fields)
    for _ in range(3):
        for node in src.of_type("init_declarator", "assignment_expression", "call_expression"):
            if node.type == "call_expression":
                fn, args = node.child_by_field_name("function"), node.child_by_field_name("arguments")
                field = (
                    fn.child_by_field_name("field")
                    if fn is not None and fn.type == "field_expression"
                    else None
                )
                setter = field is not None and src.node_text(field).startswith("set_")
                if setter and args is not None and _mentions_shape(src, args, derived, fields):
                    fields.add(src.node_text(field)[4:])
                continue
            left = node.child_by_field_name("declarator" if node.type == "init_declarator" else "left")
            right = node.child_by_field_name("value" if node.type == "init_declarator" else "right")
            if left is None or right is None or not _mentions_shape(src, right, derived, fields):
                continue
            if left.type == "identifier":
                derived.add(src.node_text(left))
            elif left.type == "field_expression" and left.child_by_field_name("field") is not None:
                fields.add(src.node_text(left.child_by_field_name("field")))
    return derived, fields


def shape_derived_fields(sources: list[Source], size_fields: Iterable[str]) -> set[str]:
    """Tiling fields that carry a size, across all the candidate's files (host sets, kernel reads)."""
    fields = set(size_fields)
    for _ in range(2):
        for src in sources:
            fields |= _flow(src, fields)[1]
    return fields


def specialisations(
    src: Source, suspicious: dict[int, str], shape_fields: set[str] | None = None
) -> list[Specialisation]:
    """Constants equal to an evaluation size that specialise shape-derived code (module docstring)."""
    env = constants(src)
    derived, fields = _flow(src, shape_fields or set())
    out: list[Specialisation] = []

    def size_valued(node: Any) -> int | None:
        v = fold(src, node, env)
        return v if v is not None and v in suspicious else None

    for node in src.walk():
        if node.type == "binary_expression":
            op = node.child_by_field_name("operator")
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            if op is None or left is None or right is None or src.node_text(op) not in _COMPARE:
                continue
            for const, other in ((left, right), (right, left)):
                v = size_valued(const)
                if (
                    v is not None
                    and fold(src, other, env) is None
                    and _mentions_shape(src, other, derived, fields)
                ):
                    out.append(Specialisation(v, src.line(node), "compared with a shape"))
        elif node.type == "case_statement":
            value = node.child_by_field_name("value")
            switch = node.parent
            while switch is not None and switch.type != "switch_statement":
                switch = switch.parent
            cond = switch.child_by_field_name("condition") if switch is not None else None
            v = size_valued(value) if value is not None else None
            if v is not None and cond is not None and _mentions_shape(src, cond, derived, fields):
                out.append(Specialisation(v, src.line(node), "a case label on a shape"))
        elif node.type == "assignment_expression":
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            target = left
            while target is not None and target.type == "subscript_expression":
                target = target.child_by_field_name("argument")
            field = (
                target.child_by_field_name("field")
                if target is not None and target.type == "field_expression"
                else None
            )
            v = size_valued(right) if right is not None else None
            if v is not None and field is not None and src.node_text(field) in fields:
                out.append(
                    Specialisation(
                        v, src.line(node), f"stored into the size field {src.node_text(field)}"
                    )
                )
        elif node.type == "call_expression":
            fn, args = node.child_by_field_name("function"), node.child_by_field_name("arguments")
            field = (
                fn.child_by_field_name("field") if fn is not None and fn.type == "field_expression" else None
            )
            name = src.node_text(field) if field is not None else ""
            if (
                name.startswith("set_")
                and name[4:] in fields
                and args is not None
                and args.named_child_count == 1
            ):
                v = size_valued(args.named_children[0])
                if v is not None:
                    out.append(Specialisation(v, src.line(node), f"stored by {name}, a size field"))
    return out


__all__ = [
    "FRAMEWORK_NAMESPACES",
    "FRAMEWORK_PREFIXES",
    "LOADER_NAMES",
    "Reference",
    "Specialisation",
    "constants",
    "defined_names",
    "fold",
    "forbidden_references",
    "framework_references",
    "in_family",
    "references",
    "shape_derived_fields",
    "specialisations",
    "token_pasting",
]
