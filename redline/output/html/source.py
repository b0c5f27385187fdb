"""What a report reads from the store — in ONE function, `read_session`.

A session's runs are the store's run documents (`Store.load_runs`: `redline.core.run.Run`) in the
order they ran (interleaved A B B A for compare), each with its metrics, flags, facts (machine,
server, build, pinning, dataset, state), per-second series and profile; a compare session's
verdicts come back as the `TestComparison`s that compare printed (from the stored
`comparisons` rows), so the HTML says what the terminal, markdown and JSON said; a bisect
session's document (`Store.bisection`) comes with it."""

from __future__ import annotations

import json
from dataclasses import dataclass

from redline.analysis.comparison import TestComparison
from redline.core.errors import UsageError
from redline.core.run import Run
from redline.store.results import Store


@dataclass
class SessionData:
    session_id: int
    kind: str                        # run | compare | calibrate | bisect
    argv: list[str]
    machine: dict
    host: str
    started_at: float
    finished_at: float | None
    status: str
    runs: list[Run]
    comparisons: list[TestComparison]
    bisection: dict | None = None    # a bisect session's document (Store.bisection)

    @property
    def measured(self) -> list[Run]:
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
    runs = store.load_runs(session_id)
    comparisons = [TestComparison.from_json(json.loads(row["detail"])) for row in store.db.execute(
        "SELECT detail FROM comparisons WHERE session_id=? ORDER BY test, metric", (session_id,))]
    return SessionData(session_id, session["kind"], json.loads(session["argv"]), json.loads(session["machine"]),
                       session["host"], session["started_at"], session["finished_at"], session["status"], runs,
                       comparisons, store.bisection(session_id) if session["kind"] == "bisect" else None)
