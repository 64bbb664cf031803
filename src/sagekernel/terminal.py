"""Text on the terminal: what SAGE did not write itself is shown, never obeyed.

Task descriptions, compiler output, model replies, item titles and rationales are untrusted: an
ANSI/OSC escape sequence in them could recolour or clear the screen, rewrite the window title,
plant a hyperlink or (on some terminals) a clipboard write. `printable` is the one function that
makes such text inert: every control character except newline and tab, and the Unicode controls
that reorder what is displayed (bidi overrides), are shown as visible escapes (`\\x1b`, `\\u202e`).
`Console` applies it to every string it renders (printed text, table cells, rule titles), so no
command can forget it; Rich's own styling is added after, so SAGE's colours still work.
"""

from __future__ import annotations

import re
from typing import Any

from rich.console import Console as RichConsole
from rich.text import Text

#: C0 controls but \t and \n, DEL, C1 controls, and the bidi embedding/override/isolate controls.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """`text` with every control character that a terminal would act on made visible."""
    return _UNSAFE.sub(_visible, text)


class Console(RichConsole):
    """rich's Console, rendering every string through `printable` first."""

    def render_str(self, text: str, **kwargs: Any) -> Text:
        return super().render_str(printable(text), **kwargs)
