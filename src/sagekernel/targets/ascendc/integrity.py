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
  whose value is an evaluation size, used where it specialises the code: compared with a
  run-time value (`if (t.totalLength == 8 * 8000)`), as a `case` label, or stored into a tiling
  field. The same constant elsewhere (an unroll factor of 33, a buffer cap) is left alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sagekernel.targets.ascendc.cparse import Source

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
    """Every name the code mentions, with macro bodies tokenised (tree-sitter keeps them as text)."""
    out: list[Reference] = []
    for node in src.walk():
        if node.children:
            continue
        line = node.start_point[0] + 1
        if node.type in _NAME_KINDS:
            out.append(Reference(src.node_text(node), line, _qualifier(src, node), False))
        elif node.type == "preproc_arg":
            text = src.node_text(node)
            for m in re.finditer(r"(?:([A-Za-z_]\w*)\s*::\s*)?([A-Za-z_]\w*)", text):
                out.append(
                    Reference(m.group(2), line + text[: m.start()].count("\n"), m.group(1) or "", True)
                )
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


def forbidden_references(src: Source, forbidden: Iterable[str]) -> list[tuple[Reference, str]]:
    apis = tuple(forbidden)
    if not apis:
        return []
    own = defined_names(src)
    found = []
    for ref in references(src):
        api = next((a for a in apis if in_family(ref.name, a)), None)
        if api is None:
            continue
        if ref.name in own and ref.qualified_by != "AscendC":
            continue  # the candidate's own helper of that name
        found.append((ref, api))
    return found


def token_pasting(src: Source) -> list[int]:
    return [n.start_point[0] + 1 for n in src.of_type("preproc_arg") if "##" in src.node_text(n)]


def framework_references(src: Source) -> list[tuple[Reference, str]]:
    """(reference, why) for names that hand the work to another implementation or a loader."""
    found = []
    for ref in references(src):
        if ref.name in LOADER_NAMES:
            found.append((ref, "the dynamic loader or a process primitive"))
        elif ref.name.startswith(FRAMEWORK_PREFIXES):
            found.append((ref, "aclnn / ACL / torch_npu's op command"))
        elif ref.qualified_by in FRAMEWORK_NAMESPACES or (
            ref.name in FRAMEWORK_NAMESPACES and _is_scope(src, ref)
        ):
            found.append((ref, "torch / ATen"))
    return found


def _is_scope(src: Source, ref: Reference) -> bool:
    return bool(re.search(rf"\b{re.escape(ref.name)}\s*::", src.line_text(ref.line)))


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


def specialisations(src: Source, suspicious: dict[int, str]) -> list[Specialisation]:
    env = constants(src)
    out: list[Specialisation] = []

    def check(node: Any, how: str) -> None:
        v = fold(src, node, env)
        if v is not None and v in suspicious:
            out.append(Specialisation(v, node.start_point[0] + 1, how))

    for node in src.walk():
        if node.type == "binary_expression":
            op = node.child_by_field_name("operator")
            if op is None or src.node_text(op) not in _COMPARE:
                continue
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            if left is None or right is None:
                continue
            lv, rv = fold(src, left, env), fold(src, right, env)
            if (lv is None) != (rv is None):  # a run-time value against a constant
                check(left if lv is not None else right, "compared with a run-time value")
        elif node.type == "case_statement":
            value = node.child_by_field_name("value")
            if value is not None:
                check(value, "a case label")
        elif node.type == "assignment_expression":
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            target = left
            while target is not None and target.type == "subscript_expression":  # t.extra[0] = ...
                target = target.child_by_field_name("argument")
            if (
                left is not None
                and right is not None
                and target is not None
                and target.type == "field_expression"
            ):
                check(right, f"stored into the tiling field {src.node_text(left)}")
        elif node.type == "call_expression":
            fn, args = node.child_by_field_name("function"), node.child_by_field_name("arguments")
            if fn is not None and args is not None and fn.type == "field_expression":
                field = fn.child_by_field_name("field")
                if (
                    field is not None
                    and src.node_text(field).startswith("set_")
                    and args.named_child_count == 1
                ):
                    check(args.named_children[0], f"stored by {src.node_text(field)}")
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
    "specialisations",
    "token_pasting",
]
