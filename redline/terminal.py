"""The one way redline prints to a terminal: every string is text, never markup.

Test names, server error replies, file paths, make output and C++ symbols may hold square
brackets, which rich would read as markup (`[/bold]` closes a tag that was never opened and
raises, mid-suite). Consoles made here have markup off, so any str — in a line, a table cell,
a title or a progress column — is printed as written; styles are given explicitly (`style=`,
`Text`, `Text.assemble`).
"""

from __future__ import annotations

from rich.console import Console
from rich.text import Text


def console(*, stderr: bool = False, **options) -> Console:
    return Console(stderr=stderr, highlight=False, markup=False, **options)


def styled(*parts: str | tuple[str, str]) -> Text:
    """A line from plain strings and (string, style) pairs; no part is read as markup."""
    return Text.assemble(*parts)
