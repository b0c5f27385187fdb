"""The one run document: what one run of one test on one side was and what it gave.

The engine fills it, every result sink (the SQLite store, the fleet's results stream, exporters)
receives it, every output renders it, and `--json` emits it whole. Its JSON form carries a format
version, so a document written by one redline is read back by another or refused in one line.

Models: pyperf's Run/Benchmark JSON and hyperfine's BenchmarkResult — identity, settings-derived
facts, every measured value, and nothing that has to be recomputed to be understood.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field

from redline.core import metrics

RUN_FORMAT = 1
STATUSES = ("running", "ok", "failed", "interrupted", "skipped")
PURPOSES = ("measure", "profile")
# How a run's server state was reached (facts.state.origin; redline.bench.state decides it).
RESTORED, PREPARED, EMPTY = "restored", "prepared", "empty"
# What identifies a run, in the order the JSON shows it (metrics follow, flat, as in round 1).
_IDENTITY = ("uid", "test", "target", "side", "run_index", "topology", "purpose", "suite_file", "session_id",
             "run_id", "started_at", "finished_at", "status")
_RESULT = ("flags", "error", "server_log_tail", "series", "facts", "profile")


def new_uid() -> str:
    return uuid.uuid4().hex


@dataclass
class Run:
    test: str
    target: str
    side: str | None                     # None for a plain run, 'baseline'/'comparison' in an A/B
    run_index: int
    topology: str = "oss-standalone"
    purpose: str = "measure"             # or "profile": never part of a metric
    suite_file: str | None = None
    uid: str = field(default_factory=new_uid)      # unique across machines: the key for storing once
    session_id: int | None = None
    run_id: int | None = None            # the store's row id, once stored
    started_at: float | None = None
    finished_at: float | None = None
    status: str = "running"
    metrics: dict[str, float | None] = field(default_factory=dict)
    series: dict[str, list[float]] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)
    facts: dict = field(default_factory=dict)
    error: str | None = None
    server_log_tail: str | None = None
    profile: dict | None = None          # ProfileResult.as_json() of a profiled run

    @property
    def key(self) -> str:
        """What a result is a result of: the test, and its topology unless standalone."""
        return run_key(self.test, self.topology)

    @property
    def state(self) -> dict | None:
        """How the run's server state was reached (redline.bench.state)."""
        return self.facts.get("state")

    def start(self) -> None:
        self.started_at, self.status = time.time(), "running"

    def measure_again(self) -> None:
        """Forget what the run measured, to measure it again (a window too short for the test's
        calls: redline.bench.window_fit); when it started stays."""
        self.status, self.finished_at, self.error, self.server_log_tail = "running", None, None, None
        self.metrics, self.series, self.flags, self.profile = {}, {}, [], None

    def finish(self, status: str, *, error: str | None = None) -> None:
        if status not in STATUSES:
            raise ValueError(f"not a run status: {status!r}")
        self.status, self.finished_at = status, time.time()
        if error is not None:
            self.error = error

    # -- JSON ---------------------------------------------------------------------------------
    def to_json(self) -> dict:
        """The whole document. Every metric of the registry is a top-level key (the round-1 keys
        `test`, `target`, `run_index`, `status`, `ops_per_sec`, `p50_ms` … keep their names)."""
        out: dict = {"format": RUN_FORMAT}
        out.update({name: getattr(self, name) for name in _IDENTITY})
        out.update({name: self.metrics.get(name) for name in metrics.NAMES})
        out.update({name: getattr(self, name) for name in _RESULT})
        return out

    @classmethod
    def from_json(cls, document: dict) -> Run:
        version = document.get("format")
        if version != RUN_FORMAT:
            raise ValueError(f"run document format {version!r}: this redline reads format {RUN_FORMAT}")
        fields = {name: document.get(name) for name in _IDENTITY + _RESULT if name in document}
        fields["metrics"] = {name: document[name] for name in metrics.NAMES if document.get(name) is not None}
        for name, empty in (("series", {}), ("facts", {}), ("flags", [])):
            if fields.get(name) is None:
                fields[name] = empty
        return cls(**fields)


def run_key(test: str, topology: str) -> str:
    """A run's key (Run.key) from its test and topology."""
    return test if topology == "oss-standalone" else f"{test}@{topology}"
