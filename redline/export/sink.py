"""`--export URL` on run and compare: the exporter as a result sink. Each run is exported as soon
as the engine has stored it; a compare session's verdicts and the history's change points when
the session is finished. A failing RedisTimeSeries server never costs a measurement: the first
failure stops exporting, the session goes on, and the command names the `redline export` line
that exports the session later."""

from __future__ import annotations

from redline.core import terminal
from redline.core.run import Run
from redline.export.options import exporter_from
from redline.core.redaction import redact
from redline.export.redistimeseries import ExportCounts, ExportError, RedisTimeSeriesExporter
from redline.store.session import SessionDocument


class RedisTimeSeriesSink:
    """redline.engine.sinks.ResultSink writing each finished run to RedisTimeSeries."""

    def __init__(self, exporter: RedisTimeSeriesExporter, url: str, store_path):
        self.exporter, self.url, self.store_path = exporter, url, store_path
        self.counts = ExportCounts()
        self.failure: str | None = None

    def session_started(self, session: SessionDocument) -> None:
        """Nothing to write before a run has results."""

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

    def session_finished(self, session: SessionDocument) -> str | None:
        """The verdicts and the history's change points, then what was exported; the problem (the
        export failed or conflicted), which fails the command, or None."""
        from redline.store.results import Store
        if session.comparisons:
            self._export(lambda: self.exporter.export_comparisons(session))
        self._export(lambda: self.exporter.export_history(Store(self.store_path), {run.test for run in session.runs}))
        out = terminal.console(stderr=True)
        counts = self.counts
        out.print(f"exported to {redact(self.url)}: {counts.runs} runs, {counts.written} samples"
                  + (f", {counts.verdicts} verdicts" if counts.verdicts else ""), soft_wrap=True)
        problem = self.failure or (f"{len(counts.conflicts)} samples conflict with other values at the same "
                                   f"millisecond, first: {counts.conflicts[0]}" if counts.conflicts else None)
        if problem is None:
            return None
        return (f"export incomplete: {problem}; the runs are stored: `redline export redistimeseries "
                f"{session.session_id} --store {self.store_path} --redis URL` exports them again")


def live_export(args) -> RedisTimeSeriesSink | None:
    """The sink for --export URL (connected and checked before anything is measured), or None."""
    if not getattr(args, "export", None):
        return None
    return RedisTimeSeriesSink(exporter_from(args, args.export), args.export, args.store)
