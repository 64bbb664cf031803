"""A real C++ parse of the model's files (tree-sitter-cpp), for the static checks.

Why tree-sitter rather than libclang: the checks must run where the CANN headers are absent.
libclang resolves includes and types, so without `kernel_operator.h` every Ascend C name is an
error and the tree degrades; tree-sitter builds a syntax tree from the text alone, tolerates the
unknown macros (`BEGIN_TILING_DATA_DEF`, `GET_TILING_DATA`) and keeps comments and string
literals apart from code, which is exactly what regexes get wrong. It is a small wheel
(`tree-sitter`, `tree-sitter-cpp`: dependencies of sagekernel itself, pyproject.toml).

Ascend C's function qualifiers (`__global__ __aicore__`, `__gm__`) are blanked to spaces of the
same length before parsing: they are not C++ and would otherwise split declarations, and the
blanking keeps every line and column where it was.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

_QUALIFIERS = re.compile(r"\b(__global__|__aicore__|__gm__|__inline__|__ubuf__)\b")


class ParserMissing(RuntimeError):
    """tree-sitter-cpp is not installed (a broken install: sagekernel depends on it)."""


@lru_cache(maxsize=1)
def _parser() -> Any:
    try:
        import tree_sitter_cpp
        from tree_sitter import Language, Parser
    except ImportError as exc:  # pragma: no cover - a dependency of the package
        raise ParserMissing(
            "the Ascend C checks need tree-sitter and tree-sitter-cpp, which sagekernel depends on: "
            "reinstall it (pip install sagekernel)") from exc
    return Parser(Language(tree_sitter_cpp.language()))


@dataclass(frozen=True)
class Token:
    kind: str  # tree-sitter node type of the leaf: identifier, number_literal, string_literal, "(" ...
    text: str
    line: int  # 1-based


@dataclass(frozen=True)
class Call:
    name: str  # last component: Sigmoid
    qualified: str  # as written: AscendC::Sigmoid<float>
    line: int


@dataclass(frozen=True)
class FieldRead:
    field: str
    line: int
    declared_type: str | None  # `uint32_t n = t.field;` -> "uint32_t"; None when not a declaration


class Source:
    """One parsed file."""

    def __init__(self, text: str) -> None:
        self.text = text
        blanked = _QUALIFIERS.sub(lambda m: " " * len(m.group(0)), text)
        self._bytes = blanked.encode("utf-8")
        self.tree = _parser().parse(self._bytes)

    def node_text(self, node: Any) -> str:
        return self._bytes[node.start_byte : node.end_byte].decode("utf-8", "replace")

    def walk(self, node: Any = None) -> Iterator[Any]:
        stack = [node or self.tree.root_node]
        while stack:
            n = stack.pop()
            yield n
            stack.extend(reversed(n.children))

    def of_type(self, *types: str) -> Iterator[Any]:
        return (n for n in self.walk() if n.type in types)

    # -- leaves ------------------------------------------------------------------------------
    def tokens(self) -> list[Token]:
        """Code leaves in order; comments dropped, a string literal is one token."""
        out: list[Token] = []
        stack = [self.tree.root_node]
        while stack:
            n = stack.pop()
            if n.type == "comment":
                continue
            if (
                n.type in ("string_literal", "char_literal", "raw_string_literal", "system_lib_string")
                or not n.children
            ):
                text = self.node_text(n)
                if text:
                    out.append(Token(n.type, text, n.start_point[0] + 1))
                continue
            stack.extend(reversed(n.children))
        return out

    def includes(self) -> list[tuple[str, int]]:
        found = []
        for n in self.of_type("preproc_include"):
            path = n.child_by_field_name("path")
            if path is not None:
                found.append((self.node_text(path).strip().strip('"<>'), n.start_point[0] + 1))
        return found

    def macro_invocations(self, name: str) -> list[tuple[list[str], int]]:
        """`NAME(a, b)` anywhere (as a call, a declaration or an error node): each argument's
        text with whitespace squeezed, and the line. Works at token level so a macro the parser
        misread as a declaration is still found."""
        toks = self.tokens()
        found = []
        for i, tok in enumerate(toks):
            if tok.text != name or i + 1 >= len(toks) or toks[i + 1].text != "(":
                continue
            depth = 0
            args: list[str] = []
            current: list[str] = []
            for t in toks[i + 1 :]:
                if t.text in "([{":
                    depth += 1
                    if depth == 1:
                        continue
                elif t.text in ")]}":
                    depth -= 1
                    if depth == 0:
                        args.append(" ".join(current))
                        break
                elif t.text == "," and depth == 1:
                    args.append(" ".join(current))
                    current = []
                    continue
                current.append(t.text)
            found.append(([a.strip() for a in args if a.strip()], tok.line))
        return found

    # -- structure ---------------------------------------------------------------------------
    def calls(self) -> list[Call]:
        out = []
        for n in self.of_type("call_expression"):
            fn = n.child_by_field_name("function")
            if fn is None:
                continue
            qualified = self.node_text(fn)
            base = re.sub(r"<.*>$", "", qualified.strip(), flags=re.S)
            name = re.split(r"::|\.|->", base)[-1].strip()
            out.append(Call(name, qualified, n.start_point[0] + 1))
        return out

    def function_names(self) -> list[tuple[str, int]]:
        out = []
        for n in self.of_type("function_definition"):
            decl = n.child_by_field_name("declarator")
            while decl is not None and decl.type != "function_declarator":
                decl = decl.child_by_field_name("declarator")
            if decl is not None:
                name = decl.child_by_field_name("declarator")
                if name is not None:
                    out.append((self.node_text(name), n.start_point[0] + 1))
        return out

    def definitions_of(self, name: str) -> list[tuple[Any, list[str]]]:
        """(definition node, parameter names without * or &) of each function definition `name`."""
        found = []
        for node in self.of_type("function_definition"):
            decl = node.child_by_field_name("declarator")
            while decl is not None and decl.type != "function_declarator":
                decl = decl.child_by_field_name("declarator")
            if decl is None or self.node_text(decl.child_by_field_name("declarator")) != name:
                continue
            params = decl.child_by_field_name("parameters")
            named = params.named_children if params is not None else []
            found.append((node, [self.node_text(p).split()[-1].lstrip("*&") for p in named]))
        return found

    def field_reads(self, variable: str) -> list[FieldRead]:
        """`variable.field` and `variable->field` reads, with the declared type of a local
        initialised from exactly that read."""
        out = []
        for n in self.of_type("field_expression"):
            arg, fld = n.child_by_field_name("argument"), n.child_by_field_name("field")
            if arg is None or fld is None or self.node_text(arg) != variable:
                continue
            parent = n.parent
            declared = None
            if parent is not None and parent.type == "call_expression":
                continue  # a method call (tiling.set_x(...)), not a field read
            if (
                parent is not None
                and parent.type == "init_declarator"
                and parent.child_by_field_name("value") == n
            ):
                decl = parent.parent
                type_node = decl.child_by_field_name("type") if decl is not None else None
                if type_node is not None:
                    declared = self.node_text(type_node).strip()
            out.append(FieldRead(self.node_text(fld), n.start_point[0] + 1, declared))
        return out

    def method_calls(self, variable: str) -> list[tuple[str, int]]:
        """`variable.method(...)`: the method names and lines."""
        out = []
        for n in self.of_type("call_expression"):
            fn = n.child_by_field_name("function")
            if fn is None or fn.type != "field_expression":
                continue
            arg, fld = fn.child_by_field_name("argument"), fn.child_by_field_name("field")
            if arg is not None and fld is not None and self.node_text(arg) == variable:
                out.append((self.node_text(fld), n.start_point[0] + 1))
        return out

    def number_literals(self) -> list[tuple[int, int, str]]:
        """Integer literals: (value, line, text). Floats and malformed numbers are skipped."""
        out = []
        for n in self.of_type("number_literal"):
            text = self.node_text(n)
            digits = re.sub(r"[uUlL]+$", "", text.replace("'", ""))
            try:
                value = int(digits, 0)
            except ValueError:
                continue
            out.append((value, n.start_point[0] + 1, text))
        return out

    def line_text(self, line: int) -> str:
        lines = self.text.splitlines()
        return lines[line - 1].strip() if 0 < line <= len(lines) else ""


__all__ = ["Call", "FieldRead", "ParserMissing", "Source", "Token"]
