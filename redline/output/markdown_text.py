"""Untrusted text made safe for markdown (GitHub comments, pages): the one quoting every markdown
renderer uses (redline.output.markdown, bisect_report, the fleet's reports)."""

from __future__ import annotations

import re


def literal(text: str) -> str:
    """Untrusted text (a test name, a target, an error or build log, a commit subject) as one inline
    code span: on GitHub its @mentions, images, links and HTML stay inert text. The fence is longer
    than any run of backticks inside; newlines become spaces; '|' is escaped (a table cell)."""
    text = " ".join(str(text).split()).replace("|", "\\|")
    if not text:
        return "` `"
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"
