"""The one C-family front end: a real C/C++ parse (tree-sitter), read the way the compiler reads it.

The CPU (C, C++), CUDA and Ascend C rules all read source through this module and its queries
(syntax_query.py); none of them scans text of its own.

tree-sitter parses what it is given; it does not run translation phases 1-3. So the text is first
put through them: backslash-newline splices are removed (GCC also splices a backslash followed by
blanks), and a `%:` digraph that opens a directive is spelt `#`. Trigraphs are off in both modes
the target builds with (-std=gnu11, -std=c++17), so `??=` stays text, as it does for GCC.
Every row of the parsed text maps back to a line of the original, so findings keep line numbers.

Directives are found by a small lexer over that text (a `#` that is the first token of a line,
after blanks and comments, outside any literal) rather than by the grammar, which only knows
directives where a declaration or statement may stand. Macro bodies and directive arguments are
raw text to the grammar; `fragment_tokens` parses them on their own so rules see their tokens too.

Dialects (DIALECTS): CUDA's and Ascend C's qualifiers (`__global__`, `__device__`, `__aicore__`,
`__gm__`, `__launch_bounds__(..)`) are not C++ and would split declarations, so each is recorded
(`Unit.qualifiers`, with the declaration it qualifies) and then blanked to spaces of the same
length; a CUDA launch `k<<<g, b>>>(x)` is read as `k  (g, b)  (x)`. Lines and columns stay put.

Unparseable source: tree-sitter always returns a tree, with ERROR nodes where it could not read.
Tokens under an ERROR node are still tokens, and directives are lexed, not parsed, so a rule on
names, attributes, asm, pragmas, strings or includes sees them all. Rules that need structure read
an ERROR region strictly: a name there is never a variable (so an ordinary word is flagged), and a
storage word there (`static`, `__device__`, ...) is mutable state (`mutable_state`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property, lru_cache

import tree_sitter
import tree_sitter_c
import tree_sitter_cpp

#: Nodes read as one token (their children are pieces of the literal).
ATOMIC = frozenset(
    {"string_literal", "raw_string_literal", "char_literal", "system_lib_string", "preproc_arg"}
)
#: Leaf types that name something (what identifier rules look at).
NAME_TYPES = frozenset(
    {"identifier", "type_identifier", "namespace_identifier", "field_identifier", "statement_identifier"}
)


@lru_cache(maxsize=2)
def _language(cxx: bool) -> tree_sitter.Language:
    return tree_sitter.Language(tree_sitter_cpp.language() if cxx else tree_sitter_c.language())


def _parser(cxx: bool) -> tree_sitter.Parser:
    return tree_sitter.Parser(_language(cxx))  # one per parse: a parser is not safe across threads


@dataclass(frozen=True)
class Token:
    """One token of the parse: a leaf, or a literal / raw directive argument read whole."""

    kind: str  # the node type ("identifier", "string_literal", "(", "preproc_arg", ...)
    text: str
    row: int  # row in the parsed text (0-based)
    node: tree_sitter.Node | None  # None for tokens of a re-parsed fragment


#: Directives that pull in a file.
FILE_DIRECTIVES = frozenset({"include", "include_next", "import", "embed", "__include_macros"})


@dataclass(frozen=True)
class Directive:
    row: int  # row of the `#` in the parsed text
    name: str  # "include", "pragma", "line", "12" (a GNU line marker), "" for a null directive
    rest: str  # the text after the name, comments blanked

    @property
    def header(self) -> tuple[str, str] | None:
        """A file directive's ("<", path) or ('"', path); None for a computed one (a macro)."""
        m = re.match(r'<([^>\n]*)>|"([^"\n]*)"', self.rest)
        if m is None:
            return None
        return ("<", m.group(1).strip()) if m.group(1) is not None else ('"', m.group(2).strip())

    @property
    def macro(self) -> str:
        """The name a `#define` / `#undef` names."""
        return re.match(r"\w*", self.rest).group()  # type: ignore[union-attr]


#: Per dialect: qualifier words blanked before parsing (with their arguments where they take any).
DIALECTS: dict[str, re.Pattern[str]] = {
    "cuda": re.compile(
        r"\b(?:__launch_bounds__|__maxnreg__|__cluster_dims__)\s*\([^()]*\)|\b(?:__global__|__device__|"
        r"__host__|__forceinline__|__noinline__|__managed__|__constant__|__shared__|__grid_constant__|"
        r"__restrict__)\b"
    ),
    "ascendc": re.compile(r"\b(?:__global__|__aicore__|__gm__|__inline__|__ubuf__)\b"),
}
_LAUNCH = re.compile(r"<<<(.*?)>>>", re.DOTALL)


@dataclass(frozen=True)
class Qualifier:
    """A dialect qualifier that was blanked: its word, row and byte offset in the parsed text."""

    word: str
    row: int
    byte: int


@dataclass
class Unit:
    """A parsed source: the text given to the parser, its tree and the original line of each row."""

    text: str
    tree: tree_sitter.Tree
    line_of_row: list[int]
    cxx: bool
    qualifiers: tuple[Qualifier, ...] = ()

    def line(self, row: int) -> int:
        return self.line_of_row[row] if 0 <= row < len(self.line_of_row) else row + 1

    @cached_property
    def tokens(self) -> list[Token]:
        """Every token of the tree, in source order (computed once)."""
        return list(tokens_of(self.tree.root_node))

    @cached_property
    def expanded(self) -> list[Token]:
        """`tokens` with each macro body or directive argument replaced by its own tokens."""
        return [f for t in self.tokens
                for f in (fragment_tokens(t.text, t.row, self.cxx) if t.kind == "preproc_arg" else [t])]

    @cached_property
    def directives(self) -> list[Directive]:
        """Every directive line (computed once)."""
        return directives(self.text)


def translate_phases(source: str, line_numbers: list[int] | None = None) -> tuple[str, list[int]]:
    """(the text after splicing and directive digraphs, the original line number of each row).

    `line_numbers` gives the original line of each input line (default: 1, 2, 3, ...)."""
    physical = source.split("\n")
    numbers = line_numbers if line_numbers is not None else list(range(1, len(physical) + 1))
    rows: list[str] = []
    line_of_row: list[int] = []
    pending: str | None = None
    start = 1
    for k, raw in enumerate(physical):
        if pending is None:
            pending, start = "", numbers[k] if k < len(numbers) else k + 1
        stripped = raw.rstrip(" \t\f\v\r")
        if stripped.endswith("\\") and k + 1 < len(physical):
            pending += stripped[:-1]  # phase 2: the next line continues this one
            continue
        rows.append(_DIGRAPH_HASH.sub(r"\1# ", pending + raw))
        line_of_row.append(start)
        pending = None
    return "\n".join(rows), line_of_row


_DIGRAPH_HASH = re.compile(r"^([ \t]*(?:/\*.*?\*/[ \t]*)*)%:")


def parse(source: str, cxx: bool, line_numbers: list[int] | None = None, dialect: str | None = None) -> Unit:
    """`source` through phases 1-3 and parsed; `dialect` ("cuda", "ascendc") implies C++."""
    text, line_of_row = translate_phases(source, line_numbers)
    qualifiers: list[Qualifier] = []
    parsed = text
    if dialect is not None:
        cxx = True
        if dialect == "cuda":
            parsed = _LAUNCH.sub(lambda m: "  (" + m.group(1) + ")  ", parsed)
        spans = list(DIALECTS[dialect].finditer(parsed))
        for m in spans:
            before = parsed[: m.start()]
            qualifiers.append(Qualifier(m.group().split("(")[0].strip(), before.count("\n"),
                                        len(before.encode("utf-8", "surrogatepass"))))
        parsed = DIALECTS[dialect].sub(lambda m: re.sub(r"[^\n]", " ", m.group()), parsed)
    tree = _parser(cxx).parse(parsed.encode("utf-8", "surrogatepass"))
    return Unit(text, tree, line_of_row, cxx, tuple(qualifiers))


def node_text(node: tree_sitter.Node) -> str:
    return (node.text or b"").decode("utf-8", "replace")


def tokens_of(root: tree_sitter.Node) -> Iterator[Token]:
    """The tokens under `root` in source order, comments left out (an iterative walk)."""
    stack = [root]
    while stack:
        node = stack.pop()
        kind = node.type
        if kind == "comment":
            continue
        if kind in ATOMIC or node.child_count == 0:
            if node.end_byte > node.start_byte:  # MISSING nodes have no text
                yield Token(kind, node_text(node), node.start_point[0], node)
            continue
        stack.extend(reversed(node.children))


def fragment_tokens(text: str, row: int, cxx: bool) -> list[Token]:
    """The tokens of a macro body or directive argument, parsed on its own, all at `row`."""
    tree = _parser(cxx).parse(text.encode("utf-8", "surrogatepass"))
    return [Token(t.kind, t.text, row, None) for t in tokens_of(tree.root_node)]


def string_value(literal: str) -> str:
    """The characters of a C string literal (prefixes, quotes and simple escapes undone)."""
    m = re.match(r'^(?:u8|[uUL])?R"([^(\s]*)\((.*)\)\1"$', literal, re.DOTALL)
    if m is not None:
        return m.group(2)
    m = re.match(r'^(?:u8|[uUL])?"(.*)"$', literal, re.DOTALL)
    body = m.group(1) if m is not None else literal
    return re.sub(r"\\(.)", lambda e: {"n": "\n", "t": "\t"}.get(e.group(1), e.group(1)), body)


_LEX = re.compile(
    r"""(?P<nl>\n)|(?P<ws>[ \t\f\v\r]+)|(?P<block>/\*.*?(?:\*/|\Z))|(?P<line>//[^\n]*)"""
    r"""|(?P<raw>(?:u8|[uUL])?R"(?P<delim>[^(\s"]{0,16})\(.*?\)(?P=delim)")"""
    r"""|(?P<str>(?:u8|[uUL])?"(?:[^"\\\n]|\\.)*"?|'(?:[^'\\\n]|\\.)*'?)"""
    r"""|(?P<hash>\#)|(?P<word>\w+)|(?P<other>.)""",
    re.DOTALL,
)


def directives(text: str) -> list[Directive]:
    """Every directive line of `text` (already through `translate_phases`), found by lexing:
    a `#` is a directive only as the first token of a line, outside comments and literals, and a
    comment inside a directive is one blank (phase 3), so `# /*...*/ line` reads `# line`."""
    found: list[Directive] = []
    row, at_line_start = 0, True
    body: list[str] | None = None  # the directive being read, if any
    start_row = 0

    def close() -> None:
        text_ = "".join(body or [])
        m = re.match(r"[ \t]*([A-Za-z_]\w*|\d[\w.]*)?", text_)
        name = (m.group(1) or "") if m is not None else ""
        found.append(Directive(start_row, name, text_[m.end() if m else 0 :].strip()))

    for m in _LEX.finditer(text):
        kind = m.lastgroup
        if kind == "nl":
            if body is not None:
                close()
                body = None
            row += 1
            at_line_start = True
            continue
        if kind == "block":
            row += m.group().count("\n")
            if body is not None:
                body.append(" ")
            continue
        if kind in ("ws", "line"):
            if body is not None and kind == "ws":
                body.append(m.group())
            continue
        if body is not None:
            row += m.group().count("\n")  # a raw string inside a directive
            body.append(m.group())
        elif kind == "hash" and at_line_start:
            body, start_row = [], row
        else:
            row += m.group().count("\n")
        at_line_start = False
    if body is not None:
        close()
    return found


# ---- what a name is: a declared function, a declared variable, a callee ---------------------------

_DECLARATOR_WRAPPERS = frozenset(
    {"pointer_declarator", "array_declarator", "parenthesized_declarator", "reference_declarator",
     "init_declarator", "attributed_declarator", "function_declarator"}
)
_DECLARATIONS = frozenset(
    {"declaration", "parameter_declaration", "optional_parameter_declaration", "function_definition",
     "field_declaration", "for_range_loop", "condition_clause"}
)


def declarator_role(node: tree_sitter.Node) -> str | None:
    """'function' if `node` is the name a function declarator declares, 'variable' if a variable's
    or parameter's, None if `node` is a use."""
    current, through_function, pointer_after_function = node, False, False
    while current.parent is not None:
        parent = current.parent
        if parent.type in _DECLARATOR_WRAPPERS:
            if parent.child_by_field_name("declarator") != current:
                return None
            if parent.type == "function_declarator":
                through_function = True
            elif through_function and parent.type == "pointer_declarator":
                pointer_after_function = True
            current = parent
            continue
        if parent.type in _DECLARATIONS and current in parent.children_by_field_name("declarator"):
            return "function" if through_function and not pointer_after_function else "variable"
        return None
    return None


def scope_key(node: tree_sitter.Node) -> int | None:
    """The id of the top-level function definition around `node` (None at file scope)."""
    current = node
    while current.parent is not None:
        if current.type == "function_definition" and current.parent.type in ("translation_unit",
                                                                              "declaration_list",
                                                                              "linkage_specification"):
            return current.id
        current = current.parent
    return None


def variables_by_scope(tokens: list[Token]) -> dict[int | None, set[str]]:
    """Names declared as variables or parameters, by `scope_key` (None: file scope)."""
    found: dict[int | None, set[str]] = {}
    for tok in tokens:
        if tok.kind == "identifier" and tok.node is not None and declarator_role(tok.node) == "variable":
            found.setdefault(scope_key(tok.node), set()).add(tok.text)
    return found


def is_callee(node: tree_sitter.Node) -> bool:
    """Whether `node` is what a call calls, through parentheses, `*`, `&` and `ns::`."""
    current = node
    while current.parent is not None and current.parent.type in (
        "parenthesized_expression", "pointer_expression", "qualified_identifier"
    ):
        current = current.parent
    parent = current.parent
    return parent is not None and parent.type == "call_expression" and parent.child_by_field_name(
        "function"
    ) == current


def exported_definition(node: tree_sitter.Node) -> bool:
    """Whether `node` lies in a function definition that is not `static`."""
    current: tree_sitter.Node | None = node
    while current is not None and current.type != "function_definition":
        current = current.parent
    if current is None:
        return False
    return not any(c.type == "storage_class_specifier" and node_text(c) == "static"
                   for c in current.children)
