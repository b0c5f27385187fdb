"""Self-contained HTML reports: a stored session's report, `render(session) -> str`
(redline.output.FORMATS), and the history page. See docs/report.md."""

from __future__ import annotations

from pathlib import Path

from redline.output import files
from redline.store.session import SessionDocument


def render(session: SessionDocument) -> str:
    if session.kind == "gate" and "gate" in session.documents:
        from redline.output.html.gate_page import gate_page
        return gate_page(session.documents["gate"]).render()
    from redline.output.html.session_report import session_page
    return session_page(session).render()


def write_history_report(all_series, path: Path, *, metric: str, p_value: float, argv: list[str]) -> None:
    from redline.output.html.history_report import history_page
    files.write_output(path, history_page(all_series, metric=metric, p_value=p_value, argv=argv).render())
