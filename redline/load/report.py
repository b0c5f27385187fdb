"""redline-load's JSON report, read in one place.

redline-load writes memtier_benchmark's JSON — "ALL STATS" → "Totals" (Ops/sec, Percentile
Latencies, a per-second Time-Serie) and "Runtime" — and a section of its own, "redline": the
measured window, operations, client CPU, connections, error replies, warnings, what was sent,
and a role's counts (loadgen/src/report.rs, loadgen/src/roles/measure.rs). Every Python reader of
that file — the run's metrics and flags, the client groups' summaries, the topology helper, the
counted window, the preload — goes through `LoadReport`; nothing else indexes the raw document.
A value the report does not carry reads as None (or an empty collection), never as a KeyError:
memtier_benchmark's own file, which has no "redline" section, reads the same way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from redline.core.errors import RunError


@dataclass(frozen=True)
class LoadReport:
    document: dict          # the JSON as written; read it through the accessors below

    @classmethod
    def read(cls, path: Path) -> LoadReport:
        """The report redline-load wrote to `path`; RunError when there is none or it is not JSON."""
        try:
            return cls(json.loads(Path(path).read_text()))
        except (OSError, json.JSONDecodeError) as exc:
            raise RunError(f"redline-load wrote no readable JSON to {path}: {exc}") from exc

    # -- memtier's totals -----------------------------------------------------------------------
    @property
    def _all_stats(self) -> dict:
        return self.document.get("ALL STATS") or {}

    @property
    def totals(self) -> dict:
        """memtier's "Totals" object (every command of the workload together)."""
        return self._all_stats.get("Totals") or {}

    @property
    def ops_per_sec(self) -> float | None:
        return _number(self.totals.get("Ops/sec"))

    @property
    def count(self) -> int | None:
        """memtier's request count (Totals' Count)."""
        value = self.totals.get("Count")
        return int(value) if value is not None else None

    @property
    def runtime_s(self) -> float | None:
        """memtier's "Runtime" total duration, in seconds."""
        value = (self._all_stats.get("Runtime") or {}).get("Total duration")
        return value / 1000.0 if value is not None else None

    def percentile_ms(self, percentile: float) -> float | None:
        """The latency at `percentile` (50, 99.9 …) over the measured window, in ms."""
        return _number((self.totals.get("Percentile Latencies") or {}).get(f"p{percentile:.2f}"))

    def per_second(self) -> dict[str, list[float]]:
        """The measured window's per-second series (ops, p50_ms, p99_ms) from Totals' Time-Serie;
        a series with no point is left out."""
        series = self.totals.get("Time-Serie") or {}
        out: dict[str, list[float]] = {"ops": [], "p50_ms": [], "p99_ms": []}
        for second in sorted(series, key=int):
            point = series[second]
            out["ops"].append(float(point.get("Count", 0)))
            out["p50_ms"].append(float(point.get("p50.00", 0.0)))
            out["p99_ms"].append(float(point.get("p99.00", 0.0)))
        return {name: values for name, values in out.items() if values}

    # -- redline-load's own section -------------------------------------------------------------
    @property
    def facts(self) -> dict:
        """The "redline" section as written: what a run keeps of its load (facts.loadgen)."""
        return self.document.get("redline") or {}

    @property
    def ops(self) -> int | None:
        """Operations completed in the measured window."""
        return self.facts.get("ops")

    @property
    def warmup_s(self) -> float | None:
        return self.facts.get("warmup_seconds")

    @property
    def measured_s(self) -> float | None:
        return self.facts.get("measured_seconds")

    @property
    def client_cpu_s(self) -> float | None:
        """User + system CPU of the load generator over the measured window."""
        cpu = self.facts.get("client_cpu")
        return cpu["user_s"] + cpu["system_s"] if cpu else None

    @property
    def connections_opened(self) -> int:
        return (self.facts.get("connections") or {}).get("opened") or 0

    @property
    def connections_lost(self) -> int:
        """Connections the server closed during the run."""
        return (self.facts.get("connections") or {}).get("lost") or 0

    @property
    def errors(self) -> dict[str, int]:
        """Error replies by type ('ERR', 'WRONGTYPE' …)."""
        return self.facts.get("errors") or {}

    @property
    def error_examples(self) -> dict[str, str]:
        """The first error reply of each type, in the server's words."""
        return self.facts.get("error_examples") or {}

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())

    @property
    def warnings(self) -> list[str]:
        return self.facts.get("warnings") or []

    @property
    def io(self) -> dict | None:
        """The I/O path the load ran on: {"path", "requested", "note"} (note: why not io_uring)."""
        return self.facts.get("io")

    @property
    def role_counts(self) -> dict | None:
        """A role's own counts (messages published and received, jobs …); None in memtier mode."""
        return self.facts.get("role_counts")

    @property
    def pipeline(self) -> int:
        return (self.facts.get("send_pattern") or {}).get("pipeline") or 1

    @property
    def rate_limit_per_sec(self) -> float | None:
        """The requests per second the load was asked to keep (--rate-limiting is per connection),
        None for a load without a rate limit."""
        pattern = self.facts.get("send_pattern") or {}
        per_connection = pattern.get("rate_limit_per_conn")
        if not per_connection:
            return None
        return float(per_connection) * (pattern.get("threads") or 1) * (pattern.get("clients_per_thread") or 1)

    @property
    def command_types(self) -> list[str]:
        """The commands sent ('GET', 'BLPOP' …), in the workload's order."""
        return [command.get("type", "") for command in (self.facts.get("send_pattern") or {}).get("commands") or []]


def _number(value) -> float | None:
    return float(value) if value is not None else None
