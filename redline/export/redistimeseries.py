"""Writes runs and verdicts into RedisTimeSeries in the upstream scheme (redline.export.scheme).

Idempotent by construction: a sample's timestamp is its run's start (ms), fixed by the store, and
every sample is added with `ON_DUPLICATE BLOCK`. A sample already there with the same value is
counted as present and nothing is written; a different value at the same millisecond of the same
series (another run, from another store) is a conflict: reported, never overwritten, never moved
to another millisecond. No marker key is needed, so deleting series and exporting again restores
them, and exporting to a copy of the data set behaves the same.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import redis

from redline.core import metrics as metric_registry
from redline.core.errors import RunError, UsageError
from redline.core.redaction import redact
from redline.core.run import Run
from redline.export import scheme
from redline.export.runs import PlacementRules, history_series, placement_of, timestamp_ms
from redline.export.scheme import Placement, Project
from redline.store.session import SessionDocument

PIPELINE_BATCH = 500          # samples per round trip
DUPLICATE_ERROR = "DUPLICATE_POLICY"


class ExportError(RunError):
    """The RedisTimeSeries server refused or failed: exit 1, one line."""


@dataclass(frozen=True)
class Sample:
    key: str
    timestamp_ms: int
    value: float
    labels: dict[str, str]


@dataclass
class ExportCounts:
    written: int = 0               # samples added
    present: int = 0               # samples already there with the same value
    runs: int = 0                  # runs exported
    skipped_runs: int = 0          # failed, skipped, interrupted or profile runs, or no branch/version/hash
    verdicts: int = 0              # comparison rows exported
    removed: int = 0               # change points the history no longer shows, removed
    conflicts: list[str] = field(default_factory=list)    # "key @ ms: stored X, this run Y"

    def add(self, other: ExportCounts) -> None:
        self.written += other.written
        self.present += other.present
        self.runs += other.runs
        self.skipped_runs += other.skipped_runs
        self.verdicts += other.verdicts
        self.removed += other.removed
        self.conflicts += other.conflicts


def connect(url: str, flag: str = "--redis") -> redis.Redis:
    """A client for URL (redis://[user:password@]host:port[/db], rediss:// for TLS, unix://),
    checked: the server answers and has the RedisTimeSeries module. `flag` names the option the
    URL came from in a refusal."""
    try:
        parts = urlsplit(url)
        parts.port                      # a port out of range or an unclosed [IPv6 bracket raise here
    except ValueError as exc:
        raise UsageError(f"{flag} {redact(url)}: not a URL ({exc})") from None
    if parts.scheme not in ("redis", "rediss", "unix"):
        raise UsageError(f"{flag} {redact(url)}: expected redis://HOST:PORT, rediss://HOST:PORT (TLS) or "
                         "unix://PATH")
    try:
        client = redis.Redis.from_url(url, socket_timeout=30, socket_connect_timeout=10)
        client.ping()
    except ValueError as exc:
        raise UsageError(f"{flag} {redact(url)}: {exc}") from None
    except redis.RedisError as exc:
        raise ExportError(f"RedisTimeSeries at {redact(url)}: {exc}") from None
    try:
        client.execute_command("TS.QUERYINDEX", f"{scheme.EXPORTER_LABEL[0]}={scheme.EXPORTER_LABEL[1]}")
    except redis.ResponseError as exc:
        raise ExportError(f"{redact(url)} has no RedisTimeSeries module ({exc}); "
                          "load it with --loadmodule redistimeseries.so") from None
    except redis.RedisError as exc:
        raise ExportError(f"RedisTimeSeries at {redact(url)}: {exc}") from None
    return client


def run_samples(run: Run, placement: Placement, project: Project) -> list[Sample]:
    """Every sample one run gives: for each by-kind it can be filed under, the upstream metrics,
    INFO used_memory, redline's own metrics, and the run's index and session."""
    at = timestamp_ms(run)
    samples: list[Sample] = []
    for by, value in placement.by_values().items():
        def add(metric: str, number: float | None, redline_metric: str, upstream=None) -> None:
            if number is not None:
                samples.append(Sample(scheme.series_key(project, placement, by, value, metric), at, float(number),
                                      scheme.result_labels(project, placement, by, value, metric, redline_metric,
                                                           upstream)))
        for upstream in scheme.UPSTREAM_METRICS:
            add(upstream.name, run.metrics.get(upstream.redline), upstream.redline, upstream)
        memory = run.metrics.get(scheme.MEMORY_METRIC[0])
        if memory is not None:
            samples.append(Sample(scheme.memory_key(project, placement, by, value), at, float(memory),
                                  scheme.memory_labels(project, placement, by, value)))
        for metric in metric_registry.REGISTRY:
            if metric.name not in scheme.UPSTREAM_BY_REDLINE and metric.name != scheme.MEMORY_METRIC[0]:
                add(scheme.REDLINE_METRIC_PREFIX + metric.name, run.metrics.get(metric.name), metric.name)
        add(scheme.RUN_INDEX_METRIC, run.run_index, "run_index")
        add(scheme.SESSION_METRIC, run.session_id, "session")
    return samples


def verdict_samples(session: SessionDocument, placements: dict[int, Placement], project: Project) -> list[Sample]:
    """The verdicts of a compare session as their own series, at the session's start: the verdict
    (scheme.VERDICT_CODES) and, where the statistics gave them, delta and interval in % and p."""
    at = int(round(session.started_at * 1000))
    samples = []
    for row in (c.as_json() for c in session.comparisons):
        sides = {run.side: placements[run.run_id] for run in session.runs
                 if run.key == row["test"] and run.run_id in placements}
        if "baseline" not in sides or "comparison" not in sides:
            continue
        baseline, comparison = sides["baseline"], sides["comparison"]
        values = {"verdict": scheme.VERDICT_CODES.get(row.get("verdict") or "inconclusive")}
        values.update({stat: row.get(stat) for stat in scheme.VERDICT_STATS})
        for stat, number in values.items():
            if number is not None:
                samples.append(Sample(scheme.verdict_key(project, baseline, comparison, row["metric"], stat), at,
                                      float(number),
                                      scheme.verdict_labels(project, baseline, comparison, row["metric"], stat)))
    return samples


def change_point_samples(all_series, project: Project, running_platform: str, metric: str) -> dict[str, list[Sample]]:
    """redline.analysis.history series (analysed) → {key: samples}: each change point at the start of the first
    session of its new level, valued by its step in %. Every analysed series has a key, with no
    samples when it has no change point (so that one found before and gone now can be removed)."""
    found = {}
    for series in all_series:
        if series.problem is not None:
            continue
        where = (series.test, running_platform, series.topology, series.target, metric)
        key, labels = scheme.change_point_key(project, *where), scheme.change_point_labels(project, *where)
        found[key] = [Sample(key, int(round(series.points[cp.index].started_at * 1000)), float(cp.delta_pct), labels)
                      for cp in series.change_points]
    return found


def exportable(run: Run) -> bool:
    return run.status == "ok" and run.purpose == "measure"


class RedisTimeSeriesExporter:
    """Writes runs (export_run) and a compare session's verdicts (export_comparisons) to one
    RedisTimeSeries server; usable as a result sink (one run at a time) or for stored sessions."""

    def __init__(self, client: redis.Redis, *, project: Project | None = None, rules: PlacementRules | None = None):
        self.client = client
        self.project = project or Project()
        self.rules = rules or PlacementRules()

    def export_run(self, run: Run) -> ExportCounts:
        placement = placement_of(run, self.rules) if exportable(run) else None
        if placement is None or not placement.by_values():      # no results, or nothing to file them under
            return ExportCounts(skipped_runs=1)
        counts = self._write(run_samples(run, placement, self.project))
        self._remember(placement, timestamp_ms(run))
        counts.runs = 1
        return counts

    def export_comparisons(self, session: SessionDocument) -> ExportCounts:
        placements = {run.run_id: placement_of(run, self.rules) for run in session.runs if exportable(run)}
        counts = self._write(verdict_samples(session, placements, self.project))
        counts.verdicts = len(session.comparisons)
        return counts

    def export_session(self, session: SessionDocument) -> ExportCounts:
        counts = ExportCounts()
        for run in session.runs:
            counts.add(self.export_run(run))
        if session.comparisons:
            counts.add(self.export_comparisons(session))
        return counts

    def export_history(self, store, tests: set[str]) -> ExportCounts:
        """The change points of these tests' history on this machine, for every compared metric."""
        where = scheme.slug(self.rules.running_platform or platform.node())
        counts = ExportCounts()
        for metric in metric_registry.COMPARED:
            analysed = history_series(store, metric.name, tests)
            counts.add(self.export_change_points(change_point_samples(analysed, self.project, where, metric.name)))
        return counts

    def export_change_points(self, by_key: dict[str, list[Sample]]) -> ExportCounts:
        """Change points as `redline history` finds them now: new ones added, ones the history no
        longer shows (more sessions moved them) removed from their series, the rest untouched."""
        counts = self._write([sample for samples in by_key.values() for sample in samples])
        pipe = self.client.pipeline(transaction=False)
        keys = [key for key in by_key if self.client.exists(key)]
        for key in keys:
            pipe.execute_command("TS.RANGE", key, "-", "+")
        for key, reply in zip(keys, self._execute(pipe)):
            wanted = {sample.timestamp_ms for sample in by_key[key]}
            for at, _ in reply if not isinstance(reply, Exception) else []:
                if int(at) not in wanted:
                    self.client.execute_command("TS.DEL", key, int(at), int(at))
                    counts.removed += 1
        return counts

    # -- writing ------------------------------------------------------------------------------
    def _write(self, samples: list[Sample]) -> ExportCounts:
        counts = ExportCounts()
        for start in range(0, len(samples), PIPELINE_BATCH):
            batch = samples[start:start + PIPELINE_BATCH]
            pipe = self.client.pipeline(transaction=False)
            for sample in batch:
                labels = [part for pair in sample.labels.items() for part in pair]
                pipe.execute_command("TS.ADD", sample.key, sample.timestamp_ms, repr(sample.value),
                                     "ON_DUPLICATE", "BLOCK", "LABELS", *labels)
            replies = self._execute(pipe)
            duplicates = []
            for sample, reply in zip(batch, replies):
                if not isinstance(reply, Exception):
                    counts.written += 1
                elif DUPLICATE_ERROR in str(reply):
                    duplicates.append(sample)
                else:
                    raise ExportError(f"RedisTimeSeries refused {sample.key}: {reply}")
            self._check_duplicates(duplicates, counts)
        return counts

    def _check_duplicates(self, duplicates: list[Sample], counts: ExportCounts) -> None:
        """A sample already at that millisecond: the same value is this run exported before."""
        if not duplicates:
            return
        pipe = self.client.pipeline(transaction=False)
        for sample in duplicates:
            pipe.execute_command("TS.RANGE", sample.key, sample.timestamp_ms, sample.timestamp_ms)
        for sample, reply in zip(duplicates, self._execute(pipe)):
            stored = float(reply[0][1]) if reply and not isinstance(reply, Exception) else None
            if stored == sample.value:
                counts.present += 1
            else:
                counts.conflicts.append(f"{sample.key} @ {sample.timestamp_ms}: stored {stored}, "
                                        f"this run {sample.value}")

    def _remember(self, placement: Placement, at_ms: int) -> None:
        """The secondary sets upstream's compare and dashboards list from (SADD/ZADD GT: the same
        export twice changes nothing)."""
        keys = scheme.set_keys(self.project)
        members = {"testcases": placement.test, "branches": placement.branch, "versions": placement.version,
                   "platforms": placement.running_platform, "build_variants": placement.build_variant}
        pipe = self.client.pipeline(transaction=False)
        for name, member in members.items():
            if member:
                pipe.sadd(keys[name], member)
                pipe.zadd(keys[name] + ":zset", {member: at_ms}, gt=True)
        pipe.zadd(keys["deployment_names"], {placement.deployment_name: at_ms}, gt=True)
        self._execute(pipe)

    @staticmethod
    def _execute(pipe) -> list:
        try:
            return pipe.execute(raise_on_error=False)
        except redis.RedisError as exc:
            raise ExportError(f"RedisTimeSeries: {exc}") from None
