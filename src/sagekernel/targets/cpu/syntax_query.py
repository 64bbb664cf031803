"""The structure view of a parsed C-family unit (syntax.py), shared by the CPU, CUDA and Ascend C
rules: `Source`, with 1-based lines of the original text (calls, includes, function definitions
and their parameters, macro invocations, field reads, number literals, mutable state). Lines
always go through `Unit.line`, so a line continuation never shifts a finding. The token view
(names, attributes, words) is syntax_names.py.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from sagekernel.seam import LintFinding
from sagekernel.targets.cpu import syntax
from sagekernel.targets.cpu.syntax import Unit


def one_per_rule_and_line(source: str, found: Iterable[tuple[str, str, int]]) -> list[LintFinding]:
    """The linters' findings as the model sees them: the first reason of each (rule, line), with the
    source line as its excerpt, in line order."""
    lines = source.splitlines()
    first: dict[tuple[str, int], str] = {}
    for rule, reason, line in found:
        first.setdefault((rule, line), reason)
    return sorted(
        (LintFinding(rule=rule, reason=reason, line=line, excerpt=line_excerpt(lines, line))
         for (rule, line), reason in first.items()),
        key=lambda f: (f.line or 0, f.rule),
    )


def line_excerpt(lines: list[str], line: int) -> str:
    """Line `line` (1-based) stripped and capped, as a finding shows it."""
    return lines[line - 1].strip()[:160] if 0 < line <= len(lines) else ""


# ---- the structure view ---------------------------------------------------------------------------


@dataclass(frozen=True)
class LineToken:
    kind: str  # tree-sitter node type of the leaf: identifier, number_literal, string_literal, "(" ...
    text: str
    line: int  # 1-based, in the original text


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


@dataclass(frozen=True)
class State:
    """A variable whose storage outlives a call: where, and the words that made it so."""

    line: int
    scope: str  # "file" | "function" (a static local) | "type" (a static member) | "unread"
    words: frozenset[str]  # storage words and dialect qualifiers on its declaration


_MUTABLE_WORDS = frozenset({"static", "thread_local", "_Thread_local", "__thread"})


class Source:
    """One parsed file, C++ (or a `dialect` of it), with 1-based lines of the original text."""

    def __init__(
        self, text: str, dialect: str | None = None, cxx: bool = True, unit: Unit | None = None
    ) -> None:
        self.text = text
        self.unit = unit if unit is not None else syntax.parse(text, cxx, dialect=dialect)
        self.tree = self.unit.tree

    def node_text(self, node: Any) -> str:
        return syntax.node_text(node)

    def line(self, node: Any) -> int:
        """The original line a node starts on."""
        return self.unit.line(node.start_point[0])

    def walk(self, node: Any = None) -> Iterator[Any]:
        stack = [node or self.tree.root_node]
        while stack:
            n = stack.pop()
            yield n
            stack.extend(reversed(n.children))

    def of_type(self, *types: str) -> Iterator[Any]:
        return (n for n in self.walk() if n.type in types)

    @cached_property
    def _tokens(self) -> list[LineToken]:
        return [LineToken(t.kind, t.text, self.unit.line(t.row)) for t in self.unit.tokens]

    def tokens(self) -> list[LineToken]:
        """Code leaves in order; comments dropped, a literal or a macro body is one token."""
        return self._tokens

    def includes(self) -> list[tuple[str, int]]:
        """`#include` paths (quotes or brackets removed; a computed include as written), lexed."""
        return [(d.header[1] if d.header else d.rest.strip(), self.unit.line(d.row))
                for d in self.unit.directives if d.name == "include"]

    def file_directives(self) -> list[tuple[str, int]]:
        """Every other directive that pulls in a file (`#include_next`, `#import`, `#embed`)."""
        return [(d.name, self.unit.line(d.row)) for d in self.unit.directives
                if d.name in syntax.FILE_DIRECTIVES and d.name != "include"]

    def identifier_count(self, name: str) -> int:
        """How often `name` appears as a name, macro bodies included."""
        return sum(1 for t in self.unit.expanded if t.text == name and t.kind in syntax.NAME_TYPES)

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

    def calls(self) -> list[Call]:
        out = []
        for n in self.of_type("call_expression"):
            fn = n.child_by_field_name("function")
            if fn is None:
                continue
            qualified_name = self.node_text(fn)
            base = re.sub(r"<.*>$", "", qualified_name.strip(), flags=re.S)
            name = re.split(r"::|\.|->", base)[-1].strip()
            out.append(Call(name, qualified_name, self.line(n)))
        return out

    def _definitions(self) -> Iterator[tuple[Any, Any]]:
        """(function_definition, its function_declarator) for each definition."""
        for n in self.of_type("function_definition"):
            decl = n.child_by_field_name("declarator")
            while decl is not None and decl.type != "function_declarator":
                decl = decl.child_by_field_name("declarator")
            if decl is not None and decl.child_by_field_name("declarator") is not None:
                yield n, decl

    def function_names(self) -> list[tuple[str, int]]:
        return [(self.node_text(d.child_by_field_name("declarator")), self.line(n))
                for n, d in self._definitions()]

    def definitions_of(self, name: str) -> list[tuple[Any, list[str]]]:
        """(definition node, parameter names) of each definition of function `name`: the name a
        parameter declares, or its last word when it declares none (`f(GM_ADDR)`)."""
        found = []
        for node, decl in self._definitions():
            if self.node_text(decl.child_by_field_name("declarator")) != name:
                continue
            params = decl.child_by_field_name("parameters")
            names = []
            for p in params.named_children if params is not None else []:
                inner = p.child_by_field_name("declarator")
                ids = [self.node_text(n) for n in self.walk(inner) if n.type == "identifier"] if inner else []
                words = self.node_text(p).split()
                if ids or words:
                    names.append(ids[-1] if ids else words[-1].lstrip("*&"))
            found.append((node, names))
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
            out.append(FieldRead(self.node_text(fld), self.line(n), declared))
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
                out.append((self.node_text(fld), self.line(n)))
        return out

    def number_literals(self) -> list[tuple[int, int, str]]:
        """Integer literals, macro bodies included: (value, line, text). Floats are skipped."""
        out = []
        for tok in self.unit.expanded:
            if tok.kind != "number_literal":
                continue
            digits = re.sub(r"[uUlLzZ]+$", "", tok.text.replace("'", ""))
            try:
                value = int(digits, 0)
            except ValueError:
                continue
            out.append((value, self.unit.line(tok.row), tok.text))
        return out

    def mutable_state(self) -> list[State]:
        """Variables that outlive a call: every mutable variable at file or namespace scope, and
        `static` / thread-local ones in a function or a type. Const objects and `* const` pointers
        are not state; a `const T *` pointer is. Dialect qualifiers count as storage words. A
        declaration the parser had to repair, or an ERROR region with a storage word, is state."""
        quals = sorted(self.unit.qualifiers, key=lambda q: q.byte)
        out: list[State] = []
        nodes = list(self.of_type("declaration", "field_declaration", "ERROR"))
        for node in (n for n in nodes if n.type != "ERROR"):
            words = {self.node_text(c) for c in node.children if c.type == "storage_class_specifier"}
            words |= {q.word for q in quals if _gap_start(node) <= q.byte < _declarator_start(node)}
            scope = _scope_of(node)
            if "extern" in words or (scope != "file" and not words & _MUTABLE_WORDS):
                continue
            if node.has_error:  # the parser's repair may read a variable as a prototype: strictly
                out.append(State(self.line(node), "unread", frozenset(words)))
                continue
            const = any(c.type == "type_qualifier" and self.node_text(c) in ("const", "constexpr")
                        for c in node.children)
            if any(_is_mutable_variable(d, const) for d in node.children_by_field_name("declarator")):
                out.append(State(self.line(node), scope, frozenset(words)))
        for node in (n for n in nodes if n.type == "ERROR"):  # what the parser could not read: strictly
            words = {self.node_text(c) for c in self.walk(node) if self.node_text(c) in _MUTABLE_WORDS}
            words |= {q.word for q in quals if node.start_byte <= q.byte < node.end_byte}
            if words:
                out.append(State(self.line(node), "unread", frozenset(words)))
        return out

    def line_text(self, line: int) -> str:
        lines = self.text.splitlines()
        return lines[line - 1].strip() if 0 < line <= len(lines) else ""


def _gap_start(node: Any) -> int:
    """Where the text before a declaration begins: a blanked qualifier there is the declaration's."""
    before = node.prev_sibling
    if before is not None:
        return int(before.end_byte)
    return int(node.parent.start_byte) if node.parent is not None else 0


def _declarator_start(node: Any) -> int:
    declarators = node.children_by_field_name("declarator")
    return declarators[0].start_byte if declarators else node.end_byte


def _scope_of(node: Any) -> str:
    """'function' inside a body, 'type' inside a class body nested in one, else 'file'."""
    current = node.parent
    while current is not None:
        if current.type in ("compound_statement", "function_definition", "lambda_expression"):
            return "function"
        if current.type == "field_declaration_list":
            return "type" if node.type == "field_declaration" else "function"
        current = current.parent
    return "file"


def _is_mutable_variable(declarator: Any, const: bool) -> bool:
    """Whether a declarator declares a variable (not a function) that can be written: the
    pointer nearest the name decides (`T * const p` is fixed, `const T *p` is not), else `const`."""
    current, pointer_const, through_function = declarator, None, False
    while current is not None and current.type not in _NAMES:
        if current.type == "function_declarator":
            through_function, pointer_const = True, None  # only a pointer inside makes it a variable
        elif current.type == "pointer_declarator":
            pointer_const = any(c.type == "type_qualifier" and syntax.node_text(c) == "const"
                                for c in current.children)
        inner = current.child_by_field_name("declarator")
        current = inner if inner is not None else next(iter(current.named_children), None)
    if current is None or (through_function and pointer_const is None):
        return False
    return not pointer_const if pointer_const is not None else not const


_NAMES = frozenset({"identifier", "field_identifier", "qualified_identifier", "operator_name",
                    "destructor_name", "template_function", "ERROR"})
