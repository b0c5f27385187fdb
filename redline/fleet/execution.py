"""Where the fleet meets the engine: a job document in, the run documents out.

The one place an agent runs a job (the same engine as `redline run`/`compare`). Builds: each
agent builds a git:/src: target into its own build cache (redline.builder: keyed by commit and
variant), see docs/fleet.md "Builds".
"""

from __future__ import annotations

import uuid

from redline.comparison import compare_test, extra_runs_needed, looks_confidence
from redline.engine import Engine
from redline.errors import UsageError
from redline.fleet.work import suite_path
from redline.run_plan import Observer, RunSettings, Side
from redline.store import Store
from redline.suites import SpecError
from redline.suites.loader import load_test
from redline.targets import ensure_built, parse_target
from redline.topology import parse_topology

RUN_FORMAT = 1


class LogObserver(Observer):
    """The engine's events as the agent's log lines: one per run and per note (no progress bars)."""

    def __init__(self, say):
        self.say = say

    def detail(self, text: str) -> None:
        pass

    def test_skipped(self, test, reason: str) -> None:
        self.say("test skipped", test=test.name, reason=reason)

    def run_finished(self, record) -> None:
        self.say("run finished", test=record.test, side=record.side, run=record.run_index + 1, status=record.status,
                 ops_per_sec=record.metrics.get("ops_per_sec"))

    def note(self, text: str) -> None:
        self.say("note", text=text)


class JobRefused(Exception):
    """The job cannot run on this machine at all (its suite or target is not here): retrying it
    elsewhere may help, retrying it here will not."""


def execute(job: dict, *, store: Store, session_id: int, observer: Observer) -> list[dict]:
    """Run one job (one test, both sides interleaved, adaptive extra runs as `compare`) and return
    every run as a run document."""
    try:
        test = load_test(suite_path(job["suite"]))
        sides = [Side(ensure_built(parse_target(s["target"], s.get("config") or {}, s.get("variant"))), s["name"])
                 for s in job["sides"]]
    except (SpecError, UsageError, OSError) as exc:
        raise JobRefused(str(exc)) from exc
    if test.name != job["test"]:
        raise JobRefused(f"{job['suite']} holds test {test.name!r}, not {job['test']!r}")
    settings = job["settings"]
    confidence = looks_confidence(settings["runs"], job.get("max_runs") or settings["runs"])

    def more_runs(test, records, runs_so_far):
        if len(sides) < 2 or not job.get("max_runs"):
            return 0
        key = records[-1].key if records else test.name
        return extra_runs_needed(compare_test(key, [r for r in records if r.key == key], {}, confidence=confidence),
                                 runs_so_far, job["max_runs"], lone_p_value=job.get("lone_p_value") or 0.05)

    engine = Engine(store=store, observer=observer)
    records = engine.execute(tests=[test], sides=sides, session_id=session_id, more_runs=more_runs,
                             settings=RunSettings(runs=settings["runs"], duration_s=settings.get("duration_s"),
                                                  warmup_s=settings.get("warmup_s", 2.0), scale=settings.get("scale"),
                                                  profile=bool(settings.get("profile")),
                                                  topologies=(parse_topology(job["topology"]),),
                                                  snapshots=settings.get("snapshots", True)))
    documents = []
    for record in records:
        document = {"format": RUN_FORMAT, "uid": uuid.uuid4().hex, "suite_file": str(test.path), **record.as_json()}
        document.setdefault("facts", {})["state"] = record.state
        documents.append(document)
    return documents
