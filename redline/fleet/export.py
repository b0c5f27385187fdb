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

from redline.core.run import Run
from redline.export.redistimeseries import ExportCounts, ExportError, RedisTimeSeriesExporter, redacted
from redline.export.runs import PlacementRules
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

    def job_stored(self, *, job_id: str, platform: str, session_id: int, runs: list[Run]) -> None:
        """A job's stored runs (every one of them, also when it was exported before)."""
        exporter = self.exporter(platform)
        self._export(lambda: sum_counts(exporter.export_run(run) for run in runs), session_id, platform,
                     job=job_id)

    def work_complete(self, work_id: str, session: SessionDocument, platform_of: dict[str, str],
                      label: Callable[[str, str], str]) -> None:
        """A complete work item: per platform, its runs and the verdicts of its tests (the
        comparisons' test is `label(key, platform)`, the collector's name for it)."""
        for platform in sorted(set(platform_of.values())):
            runs = [run for run in session.runs if platform_of.get(run.uid) == platform]
            names = {label(key, platform): key for key in {run.key for run in runs}}
            rows = [replace(c, test=names[c.test]) for c in session.comparisons if c.test in names]
            part = replace(session, runs=runs, comparisons=rows)
            exporter = self.exporter(platform)
            self._export(lambda: exporter.export_session(part), session.session_id, platform, work=work_id)

    def _export(self, writing: Callable[[], ExportCounts], session_id: int, platform: str, **where) -> None:
        try:
            counts = writing()
        except ExportError as exc:
            self.say("export failed", **where, error=exc,
                     later=f"redline export redistimeseries {session_id} --store {self.store_path} "
                           f"--redis {redacted(self.url)} --platform {platform}")
            return
        self.say("exported", **where, platform=platform, runs=counts.runs, verdicts=counts.verdicts or None,
                 written=counts.written, present=counts.present, conflicts=len(counts.conflicts) or None,
                 first_conflict=counts.conflicts[0] if counts.conflicts else None)


def sum_counts(parts) -> ExportCounts:
    total = ExportCounts()
    for part in parts:
        total.add(part)
    return total


def fleet_export(args, *, store_path, say) -> FleetExport | None:
    """The collector's link for --export URL (connected and checked at start), or None."""
    if not getattr(args, "export", None):
        return None
    from redline.export.options import exporter_from
    return FleetExport(exporter_from(args, args.export), args.export, store_path=store_path, say=say)
