"""The bisection section of a `bisect` session's HTML report: the same sentences and step table as
the terminal and markdown (redline/output/bisect_report.py), the build log tails of skipped steps,
and the remainder check's differential flame graph (--profile)."""

from __future__ import annotations

from redline.output.bisect_report import STEP_HEADER, step_rows, summary
from redline.output.html.page import Page, table, text


def bisection_section(page: Page, document: dict) -> str:
    parts = ["".join(f"<p>{text(line)}</p>" for line in summary(document))]
    rows = step_rows(document)
    if rows:
        parts.append(table(STEP_HEADER, [[text(cell) for cell in row] for row in rows], numeric={7, 9}))
    for step in document["steps"]:
        if step["note"]:
            parts.append(f"<details><summary>step {step['number']} ({text(step['candidate']['sha'][:12])}): "
                         f"{text(step['note'].splitlines()[0])}</summary><pre>{text(step['note'])}</pre></details>")
    remainder = document.get("remainder") or {}
    for test, change in (remainder.get("changes") or {}).items():
        parts.append(page.flame_graph(change.get("diff_flamegraph"),
                                      f"{test}: culprit against {remainder['before']['sha'][:12]} (differential)"))
    return "".join(parts)
