"""What a report reads from the store — in ONE function, `read_session`, so that it can move to
the store's one run document (`Store.load_runs`) in one place.

A session's runs come back in the order they ran (interleaved A B B A for compare), each with
its metrics, flags, facts (machine, server, build, pinning, dataset, state), per-second series
and profile; a compare session's verdicts come back as the `TestComparison`s that compare
printed (from the stored `comparisons` rows), so the HTML says what the terminal and markdown
said."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from redline import metrics
from redline.comparison import TestComparison
from redline.errors import UsageError
from redline.run_record import RunRecord
from redline.store import Store


@dataclass
class ReportRun(RunRecord):
    """A stored run as the report shows it: the record, plus its facts and per-second series."""

    facts: dict = field(default_factory=dict)
    series: dict[str, list[float]] = field(default_factory=dict)
    started_at: float = 0.0


@dataclass
class SessionData:
    session_id: int
    kind: str                        # run | compare | calibrate
    argv: list[str]
    machine: dict
    host: str
    started_at: float
    finished_at: float | None
    status: str
    runs: list[ReportRun]
    comparisons: list[TestComparison]

    @property
    def measured(self) -> list[ReportRun]:
        return [r for r in self.runs if r.purpose == "measure"]

    def side_label(self, side: str) -> str | None:
        """The target label of a side ('baseline' / 'comparison'), as compare named it."""
        return next((r.target for r in self.runs if r.side == side), None)


def latest_session(store: Store) -> int:
    row = store.db.execute("SELECT max(session_id) FROM runs").fetchone()
    if row[0] is None:
        raise UsageError(f"no stored runs in {store.path}")
    return row[0]


def read_session(store: Store, session_id: int) -> SessionData:
    """The one reader of a session for the reports (see the module's docstring)."""
    session = store.db.execute("SELECT * FROM sessions WHERE id=?", (session_id,)).fetchone()
    if session is None:
        raise UsageError(f"no session {session_id} in {store.path}")
    profiles = {row["id"]: json.loads(row["detail"]) for row in store.profiles(session_id)}
    runs = []
    for row in store.runs(session_id):
        facts = json.loads(row["facts"]) if row["facts"] else {}
        runs.append(ReportRun(
            row["id"], row["test"], row["target"], row["side"], row["run_index"], row["status"],
            metrics=store.metrics(row["id"]), flags=list(facts.get("flags") or []), error=row["error"],
            purpose=row["purpose"], profile=profiles.get(row["id"]), topology=row["topology"],
            state=facts.get("state"), facts=facts, started_at=row["started_at"],
            series={s.name: values for s in metrics.SERIES if (values := store.series(row["id"], s.name))}))
    comparisons = [TestComparison.from_json(json.loads(row["detail"])) for row in store.db.execute(
        "SELECT detail FROM comparisons WHERE session_id=? ORDER BY test, metric", (session_id,))]
    return SessionData(session_id, session["kind"], json.loads(session["argv"]), json.loads(session["machine"]),
                       session["host"], session["started_at"], session["finished_at"], session["status"], runs,
                       comparisons)
