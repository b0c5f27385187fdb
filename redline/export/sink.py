"""`--export URL` on run and compare: the exporter as a result sink. Each run is exported as soon
as the engine has stored it; a compare session's verdicts when they are saved. A failing
RedisTimeSeries server never costs a measurement: the first failure stops exporting, the session
goes on, and the command names the `redline export` line that exports the session later."""

from __future__ import annotations

from redline.core import terminal
from redline.core.run import Run
from redline.export.options import exporter_from
from redline.export.redistimeseries import ExportCounts, ExportError, RedisTimeSeriesExporter, redacted
from redline.export.runs import read_session

EXIT_EXPORT_FAILED = 1


class RedisTimeSeriesSink:
    """redline.engine.sinks.ResultSink writing each finished run to RedisTimeSeries."""

    def __init__(self, exporter: RedisTimeSeriesExporter, url: str):
        self.exporter, self.url = exporter, url
        self.counts = ExportCounts()
        self.failure: str | None = None

    def run_started(self, run: Run) -> None:
        """Nothing to write before a run has results."""

    def run_interrupted(self, run: Run, reason: str) -> None:
        """An interrupted run has no results to export."""

    def run_finished(self, run: Run) -> None:
        self._export(lambda: self.exporter.export_run(run))

    def _export(self, work) -> None:
        if self.failure is None:
            try:
                self.counts.add(work())
            except ExportError as exc:
                self.failure = str(exc)

    def finish(self, store, session_id: int, code: int) -> int:
        """After the session (and a compare's verdicts) is stored: export the verdicts, say what
        was exported, and the command's exit status (1 when exporting failed or conflicted)."""
        session = read_session(store, session_id)
        if session is not None and session.comparisons:
            self._export(lambda: self.exporter.export_comparisons(session))
        if session is not None:
            self._export(lambda: self.exporter.export_history(store, {run.test for run in session.runs}))
        out = terminal.console(stderr=True)
        counts = self.counts
        out.print(f"exported to {redacted(self.url)}: {counts.runs} runs, {counts.written} samples"
                  + (f", {counts.verdicts} verdicts" if counts.verdicts else ""), soft_wrap=True)
        problem = self.failure or (f"{len(counts.conflicts)} samples conflict with other values at the same "
                                   f"millisecond, first: {counts.conflicts[0]}" if counts.conflicts else None)
        if problem is None:
            return code
        out.print(f"export incomplete: {problem}; the runs are stored: `redline export redistimeseries "
                  f"{session_id} --store {store.path} --redis URL` exports them again", style="red", soft_wrap=True)
        return code or EXIT_EXPORT_FAILED


def live_export(args) -> RedisTimeSeriesSink | None:
    """The sink for --export URL (connected and checked before anything is measured), or None."""
    if not getattr(args, "export", None):
        return None
    return RedisTimeSeriesSink(exporter_from(args, args.export), args.export)
