"""What the prompt shows of a target's knowledge: the three files, with the advice only some
operator categories need gathered at the end, for those categories only.

A target's knowledge markdown may fence passages (written to stand on their own)::

    <!-- for: reduction, normalization, loss -->
    - `correctness`, small differences just over the tolerance in reductions: accumulate in a
      wider type or use pairwise/blocked sums.
    <!-- end -->

A fenced passage leaves its place in the file; the operator's prompt lists it among the notes
for its category when that category is listed, and drops it otherwise. Text outside fences is
always shown where it stands, and the marker lines never are. A category the project does not
know (an external task's guess, "" ...) gets every passage: trimming is a saving, and a saving
is not worth withholding advice from an operator nobody has classified.

Why trim, and why at the end: on the embedded model reading the prompt costs more than writing
the reply (about 60 prompt tokens/s on 2 cores), so advice an elementwise operator never needs
(matmul tiling, reduction accumulators) is paid for on each operator's first round; and with the
category-specific part last, operators of different categories still share the cached prefix
of the untrimmed files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from sagekernel.protocols import TargetKnowledge
from sagekernel.tasks.layout import KNOWN_CATEGORIES

_OPEN = re.compile(r"^\s*<!--\s*for:\s*(?P<cats>[^>]*?)\s*-->\s*$")
_CLOSE = re.compile(r"^\s*<!--\s*end\s*-->\s*$")
#: Spellings the task formats use for one category (MultiKernelBench folders vs. the built-ins).
_ALIASES = {"reduce": "reduction", "fuse": "fused"}


class KnowledgeMarkupError(ValueError):
    """A target's knowledge file has an unbalanced or nested `<!-- for: -->` fence."""


@dataclass(frozen=True)
class ShownKnowledge:
    """The knowledge one operator's prompt shows (a `TargetKnowledge`, plus its category notes)."""

    quick_reference: str
    debugging_guide: str
    example: str
    notes: list[str] = field(default_factory=list)  # the fenced passages kept for the category, in file order


@dataclass(frozen=True)
class _Split:
    general: str
    passages: list[tuple[frozenset[str], str]]


def canonical_category(category: str) -> str:
    low = category.strip().lower()
    return _ALIASES.get(low, low)


def split(text: str) -> _Split:
    """The text outside fences, and each fenced passage with its categories."""
    general: list[str] = []
    passages: list[tuple[frozenset[str], str]] = []
    fence: frozenset[str] | None = None
    body: list[str] = []
    for n, line in enumerate(text.splitlines(keepends=True), 1):
        opened = _OPEN.match(line)
        if opened:
            if fence is not None:
                raise KnowledgeMarkupError(f"line {n}: a `for:` fence opens inside another")
            fence = frozenset(canonical_category(c) for c in opened["cats"].split(",") if c.strip())
            body = []
        elif _CLOSE.match(line):
            if fence is None:
                raise KnowledgeMarkupError(f"line {n}: `end` closes no `for:` fence")
            passages.append((fence, "".join(body).strip()))
            fence = None
        elif fence is not None:
            body.append(line)
        else:
            general.append(line)
    if fence is not None:
        raise KnowledgeMarkupError("a `for:` fence is never closed")
    return _Split("".join(general), passages)


def wants(category: str, fence: frozenset[str]) -> bool:
    cat = canonical_category(category)
    return cat not in KNOWN_CATEGORIES or cat in fence


def knowledge_for(knowledge: TargetKnowledge, category: str) -> ShownKnowledge:
    """The three knowledge files as `category`'s prompt shows them."""
    parts = [split(knowledge.quick_reference), split(knowledge.debugging_guide), split(knowledge.example)]
    notes = [text for part in parts for fence, text in part.passages if text and wants(category, fence)]
    return ShownKnowledge(parts[0].general, parts[1].general, parts[2].general, notes)
