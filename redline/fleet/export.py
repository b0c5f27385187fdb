"""`redline collector --export URL`: what the collector stores also goes to RedisTimeSeries, through
redline.export's exporter (the one writer of the upstream scheme; idempotent: a sample already
there with the same value is counted, not written again).

- each job's runs, once they are committed to the store and before the result is ACKed: a
  collector killed in between is given the entry again after its restart, finds the job stored
  and exports the same runs again, which writes nothing new;
- a complete work item's verdicts, per platform, with every run of the item once more (nothing
  new is written for runs already there; runs a failed export missed are written then).

Runs are placed under the fleet platform that measured them (the scheme's running_platform),
unless --platform names one. A failing RedisTimeSeries server never holds up the fleet: the
failure is one log line naming the `redline export redistimeseries` command that exports the
work item later, and the collector goes on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from redline.core.redaction import redact
from redline.export.redistimeseries import ExportCounts, ExportError, RedisTimeSeriesExporter
from redline.export.runs import PlacementRules
from redline.export.sink import RedisTimeSeriesSink
from redline.store.session import SessionDocument


class FleetExport:
    def __init__(self, exporter: RedisTimeSeriesExporter, url: str, *, store_path, say):
        """`exporter`: connected, with the project and the rules --platform/--branch give; its
        running_platform, when None, becomes each run's fleet platform."""
        self.base, self.url, self.store_path, self.say = exporter, url, store_path, say
        self.exporters: dict[str, RedisTimeSeriesExporter] = {}

    def exporter(self, platform: str) -> RedisTimeSeriesExporter:
        """The exporter placing runs under `platform` (or under --platform when it was given)."""
        if platform not in self.exporters:
            rules = self.base.rules
            if rules.running_platform is None:
                rules = PlacementRules(running_platform=platform, branch=rules.branch)
            self.exporters[platform] = RedisTimeSeriesExporter(self.base.client, project=self.base.project, rules=rules)
        return self.exporters[platform]

    def sink(self, platform: str) -> RedisTimeSeriesSink:
        """A result sink exporting one job's runs under `platform` (the collector gives it the runs
        it stored for the job, also when they were exported before: nothing new is written)."""
        return RedisTimeSeriesSink(self.exporter(platform), self.url, self.store_path)

    def job_exported(self, sink: RedisTimeSeriesSink, *, job_id: str, platform: str, session_id: int) -> None:
        self._said(sink.counts, sink.failure, session_id, platform, job=job_id)

    def work_complete(self, work_id: str, session: SessionDocument, platform_of: dict[str, str],
                      label: Callable[[str, str], str]) -> bool:
        """A complete work item: per platform, its runs and the verdicts of its tests (the
        comparisons' test is `label(key, platform)`, the collector's name for it). False when an
        export failed (said in the log)."""
        ok = True
        for platform in sorted(set(platform_of.values())):
            runs = [run for run in session.runs if platform_of.get(run.uid) == platform]
            names = {label(key, platform): key for key in {run.key for run in runs}}
            rows = [replace(c, test=names[c.test]) for c in session.comparisons if c.test in names]
            part = replace(session, runs=runs, comparisons=rows)
            try:
                counts, failure = self.exporter(platform).export_session(part), None
            except ExportError as exc:
                counts, failure = ExportCounts(), str(exc)
            ok = self._said(counts, failure, session.session_id, platform, work=work_id) and ok
        return ok

    def _said(self, counts: ExportCounts, failure: str | None, session_id: int, platform: str, **where) -> bool:
        if failure is not None:
            self.say("export failed", **where, error=failure,
                     later=f"redline export redistimeseries {session_id} --store {self.store_path} "
                           f"--redis {redact(self.url)} --platform {platform}")
            return False
        self.say("exported", **where, platform=platform, runs=counts.runs, verdicts=counts.verdicts or None,
                 written=counts.written, present=counts.present, conflicts=len(counts.conflicts) or None,
                 first_conflict=counts.conflicts[0] if counts.conflicts else None)
        return True


def fleet_export(args, *, store_path, say) -> FleetExport | None:
    """The collector's link for --export URL (connected and checked at start), or None."""
    if not getattr(args, "export", None):
        return None
    from redline.export.options import exporter_from
    return FleetExport(exporter_from(args, args.export), args.export, store_path=store_path, say=say)
