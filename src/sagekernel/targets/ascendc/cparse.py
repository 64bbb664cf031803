"""Ascend C source as the shared C-family front end reads it (targets/cpu/syntax.py, syntax_query.py).

Why tree-sitter rather than libclang: the checks must run where the CANN headers are absent.
libclang resolves includes and types, so without `kernel_operator.h` every Ascend C name is an
error and the tree degrades; tree-sitter builds a syntax tree from the text alone and tolerates the
unknown macros (`BEGIN_TILING_DATA_DEF`, `GET_TILING_DATA`). The Ascend C dialect records and blanks
`__global__ __aicore__ __gm__ __inline__ __ubuf__` (not C++); line continuations are spliced first,
so a name split by `\\` is read whole, and every line is the original's.
"""

from __future__ import annotations

from sagekernel.targets.cpu import syntax_query
from sagekernel.targets.cpu.syntax_query import Call, FieldRead
from sagekernel.targets.cpu.syntax_query import LineToken as Token


class Source(syntax_query.Source):
    """One parsed Ascend C (C++) file."""

    def __init__(self, text: str) -> None:
        super().__init__(text, dialect="ascendc")


__all__ = ["Call", "FieldRead", "Source", "Token"]
