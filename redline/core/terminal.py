"""The one way redline prints to a terminal: every string is text, never markup.

Test names, server error replies, file paths, make output and C++ symbols may hold square
brackets, which rich would read as markup (`[/bold]` closes a tag that was never opened and
raises, mid-suite). Consoles made here have markup off, so any str — in a line, a table cell,
a title or a progress column — is printed as written; styles are given explicitly (`style=`,
`Text`, `Text.assemble`). They may also hold control characters (an escape sequence in a suite's
name would clear or recolour the terminal): whatever a console made here writes shows them as
`\x1b`, except newline and tab, and rich's own cursor control.
"""

from __future__ import annotations

from rich.console import Console
from rich.segment import Segment
from rich.text import Text

# C0 and C1 control characters and DEL, shown as \xNN; newline and tab keep their meaning
_CONTROL = {code: f"\\x{code:02x}" for code in (*range(0x20), 0x7F, *range(0x80, 0xA0)) if code not in (0x09, 0x0A)}


def printable(text: str) -> str:
    """`text` with its control characters (but newline and tab) shown as `\\xNN`."""
    return text.translate(_CONTROL)


class _TextConsole(Console):
    """A rich Console whose user text never reaches the terminal as control sequences."""

    def _render_buffer(self, buffer) -> str:
        return super()._render_buffer(segment if segment.control else Segment(printable(segment.text), segment.style)
                                      for segment in buffer)


def console(*, stderr: bool = False, **options) -> Console:
    return _TextConsole(stderr=stderr, highlight=False, markup=False, emoji=False, **options)


def styled(*parts: str | tuple[str, str]) -> Text:
    """A line from plain strings and (string, style) pairs; no part is read as markup."""
    return Text.assemble(*parts)
