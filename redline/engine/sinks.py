"""Where run documents go as the engine produces them. The SQLite store is one sink; the fleet's
results stream and exporters are others. A sink sees every run three ways: when it starts (a
store keeps a 'running' row that recovery can find), when it is finished (ok, failed or skipped:
the whole document), and when redline is interrupted during it."""

from __future__ import annotations

from typing import Protocol

from redline.core.run import Run


class ResultSink(Protocol):
    def run_started(self, run: Run) -> None: ...
    def run_finished(self, run: Run) -> None: ...
    def run_interrupted(self, run: Run, reason: str) -> None: ...
