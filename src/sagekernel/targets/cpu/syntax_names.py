"""The token view of a parsed C-family unit (syntax.py), shared by the CPU and CUDA rules: a name
wherever it stands (`NameRule` tables: a call, `(f)(x)`, `&f`, a function-pointer initialiser, a
declaration, `std::` qualified), attribute names, `_Pragma` strings, string values, C linkage.
Rules hold tables; this module reads.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from sagekernel.targets.cpu import syntax
from sagekernel.targets.cpu.syntax import Token


@dataclass(frozen=True)
class NameRule:
    rule: str
    reason: str
    names: re.Pattern[str]  # matched against a whole name, or its qualified form (`std::thread`)
    word: bool = False  # an ordinary word: a variable of this name is allowed (word_is_the_function)


def whole(text: str) -> re.Pattern[str]:
    """A NameRule's pattern: `text` matched against a whole name."""
    return re.compile(rf"(?:{text})\Z")


@lru_cache(maxsize=8)
def _combined(rules: tuple[NameRule, ...]) -> re.Pattern[str]:
    """All of a table in one pattern (group r<k> is rules[k]): one match per name."""
    return re.compile("|".join(f"(?P<r{k}>{rule.names.pattern})" for k, rule in enumerate(rules)))


def name_rule(tok: Token, rules: tuple[NameRule, ...], variables: dict[int | None, set[str]],
              *, members: bool = False) -> NameRule | None:
    """The rule of `rules` a name token breaks, if any. Member names (`s.time`) are read only with
    `members`, and then only for rules that are not ordinary words."""
    member = tok.kind == "field_identifier"
    if tok.kind not in syntax.NAME_TYPES or tok.kind == "statement_identifier" or (member and not members):
        return None
    pattern = _combined(rules)
    m = pattern.match(tok.text) or pattern.match(qualified(tok))
    if m is None or m.lastgroup is None:
        return None
    hit = rules[int(m.lastgroup[1:])]
    if hit.word and (member or not word_is_the_function(tok, variables)):
        return None
    return hit


_ATTRIBUTE_OPENERS = frozenset({"__attribute__", "__attribute", "__declspec"})
_STRINGS = ("string_literal", "raw_string_literal")


# ---- token queries ------------------------------------------------------------------------------


def attribute_opens(tokens: list[Token], i: int) -> bool:
    """Whether tokens[i] opens an attribute list (`__attribute__((`, `__declspec(`, `[[`)."""
    text = tokens[i].text
    return (
        text in _ATTRIBUTE_OPENERS
        or text == "[["
        or (text == "[" and i + 1 < len(tokens) and tokens[i + 1].text == "[")
    )


def attribute_name(text: str) -> str:
    """An attribute's name with `__x__` read as `x`."""
    return text[2:-2] if len(text) > 4 and text.startswith("__") and text.endswith("__") else text


def attribute_group(tokens: list[Token], i: int) -> Iterator[Token]:
    """The name tokens of the attribute list that opens at tokens[i] (balanced to its close)."""
    opener = tokens[i].text
    j = i + (2 if opener == "[" else 1)
    depth = 2 if opener in ("[", "[[") else 0
    started = depth > 0
    while j < len(tokens):
        text = tokens[j].text
        if text in ("(", "[", "[["):
            depth += 2 if text == "[[" else 1
            started = True
        elif text in (")", "]", "]]"):
            depth -= 2 if text == "]]" else 1
        elif tokens[j].kind in syntax.NAME_TYPES or re.fullmatch(r"[A-Za-z_]\w*", text):
            yield tokens[j]
        if started and depth <= 0:
            return
        if not started and text != "(":
            return  # `__attribute__` not followed by a list: nothing to read
        j += 1


def pragma_operator_strings(tokens: list[Token], i: int) -> list[Token]:
    """The string literals of `_Pragma("...")` / `__pragma(...)` opening at tokens[i]."""
    out: list[Token] = []
    j = i + 1
    if j < len(tokens) and tokens[j].text == "(":
        j += 1
        while j < len(tokens) and tokens[j].kind in _STRINGS:
            out.append(tokens[j])
            j += 1
    return out


def qualified(tok: Token) -> str:
    """`std::thread` for the `thread` of `std::thread`; the plain name otherwise."""
    node = tok.node
    if node is None or node.parent is None or node.parent.type != "qualified_identifier":
        return tok.text
    scope = node.parent.child_by_field_name("scope")
    return f"{syntax.node_text(scope).lstrip(':')}::{tok.text}" if scope is not None else tok.text


def word_is_the_function(tok: Token, variables: dict[int | None, set[str]]) -> bool:
    """Whether an ordinary word (`time`, `open`) names the function rather than a variable or
    parameter the kernel declares in the same function or at file scope. Strict wherever
    structure is missing: a macro body, a pragma or an ERROR region reads as the function."""
    node = tok.node
    if node is None or in_error(node):
        return True
    role = syntax.declarator_role(node)
    if role is not None:
        return role == "function"
    if syntax.is_callee(node):
        return True
    scope = syntax.scope_key(node)
    return tok.text not in variables.get(scope, set()) and tok.text not in variables.get(None, set())


def in_error(node: Any) -> bool:
    """Whether `node` lies in a region the parser could not read (an ERROR node)."""
    current = node
    while current is not None:
        if current.type == "ERROR":
            return True
        current = current.parent
    return False


def string_runs(tokens: list[Token]) -> Iterator[tuple[Token, str]]:
    """Each run of adjacent string literals as one value (C concatenates them), with its first token."""
    i = 0
    while i < len(tokens):
        if tokens[i].kind not in _STRINGS:
            i += 1
            continue
        j, value = i, ""
        while j < len(tokens) and tokens[j].kind in _STRINGS:
            value += syntax.string_value(tokens[j].text)
            j += 1
        yield tokens[i], value
        i = j


def has_extern_c(tokens: list[Token]) -> bool:
    """Whether the code (not a comment or string) declares C linkage: `extern "C"`."""
    return any(
        t.text == "extern"
        and k + 1 < len(tokens)
        and tokens[k + 1].kind == "string_literal"
        and syntax.string_value(tokens[k + 1].text) == "C"
        for k, t in enumerate(tokens)
    )


