"""Self-contained HTML reports: one per session (run, compare, calibrate) and the history page.
See docs/report.md."""

from __future__ import annotations

from pathlib import Path

from redline.output import files
from redline.store.results import Store


def write_session_report(store: Store, session_id: int, path: Path) -> None:
    from redline.output.html.session_report import session_page
    from redline.output.html.source import read_session
    files.write_output(path, session_page(read_session(store, session_id)).render())


def write_history_report(all_series, path: Path, *, metric: str, p_value: float, argv: list[str]) -> None:
    from redline.output.html.history_report import history_page
    files.write_output(path, history_page(all_series, metric=metric, p_value=p_value, argv=argv).render())
