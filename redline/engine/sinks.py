"""Where run documents go as the engine produces them. The SQLite store is one sink; exporters
and the fleet's collector are others. A sink hears a session begin and end, and every run three
ways: when it starts (a store keeps a 'running' row that recovery can find), when it is finished
(ok, failed or skipped: the whole document), and when redline is interrupted during it.

The session events carry the stored session document (redline.store.session.SessionDocument):
at its start without runs, at its end whole — runs, verdicts and named documents — so a sink that
exports a compare's verdicts or a history's change points does it there. `session_finished`
returns a problem line (an export that failed) or None; the command's exit status counts it."""

from __future__ import annotations

from typing import Protocol

from redline.core.run import Run


class ResultSink(Protocol):
    def session_started(self, session) -> None: ...
    def run_started(self, run: Run) -> None: ...
    def run_finished(self, run: Run) -> None: ...
    def run_interrupted(self, run: Run, reason: str) -> None: ...
    def session_finished(self, session) -> str | None: ...
