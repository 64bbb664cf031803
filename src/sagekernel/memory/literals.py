"""The size-literal filter (spec §5: no hard-coded shapes in memory), in one place.

A distilled item that mentions an evaluation size of its task would teach a shape-specific
kernel. Choice (RECONSTRUCTED): only size values >= MIN_SIZE_LITERAL are checked, since single
digits (unroll factors, loop starts) appear in almost every snippet and reveal no shape. A
literal counts as a whole number token: not inside an identifier or another number ("x4096",
"14096", "1.4096"), but "4096", "4096.0f" and "N=4096" all mention 4096.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping

MIN_SIZE_LITERAL = 10


def size_literals(shapes: Iterable[Mapping[str, int]]) -> set[str]:
    """The size values worth filtering, as text, over every shape of a task."""
    return {str(v) for shape in shapes for v in shape.values() if v >= MIN_SIZE_LITERAL}


def mentions_literal(text: str, literals: Collection[str]) -> bool:
    """True if any literal occurs in `text` as a whole token."""
    return any(re.search(rf"(?<![\w.]){re.escape(lit)}(?!\w)", text) for lit in literals if lit)
