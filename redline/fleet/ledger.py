"""The collector's side of the store: which work items and jobs are in, stored exactly once.

Three tables beside the store's own (created here, in the same SQLite file):
  fleet_work  one row per work item: its store session, the work hash, its comment once done
  fleet_jobs  one row per job that came in (ok or dead): the exactly-once key is job_id
  fleet_runs  run uid → the store's run row and its job (so verdicts know the platform)
A job's runs are stored run by run (each once, by uid), then its fleet_jobs row: a collector
killed in between stores the missing runs when the entry is delivered again, and a second
result for a job already in (an agent that published and died before its ACK, two agents on one
job) is recognised by job_id and dropped.
"""

from __future__ import annotations

import json
import time

from redline.core.run import Run
from redline.store.results import Store
from redline.system import machine

SCHEMA = """
CREATE TABLE IF NOT EXISTS fleet_work (
    work_id TEXT PRIMARY KEY,
    session_id INTEGER NOT NULL REFERENCES sessions(id),
    document TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'running',
    comment TEXT,
    finished_at REAL
);
CREATE TABLE IF NOT EXISTS fleet_jobs (
    job_id TEXT PRIMARY KEY,
    work_id TEXT NOT NULL REFERENCES fleet_work(work_id),
    platform TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('ok', 'dead')),
    agent TEXT,
    attempt INTEGER,
    error TEXT,
    submitted_at REAL,
    started_at REAL,
    stored_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS fleet_runs (
    uid TEXT PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id),
    job_id TEXT NOT NULL
);
"""


class Ledger:
    def __init__(self, store: Store):
        self.store = store
        self.db = store.db
        for statement in SCHEMA.split(";"):
            if statement.strip():
                self.db.execute(statement)

    # -- work items ---------------------------------------------------------------------------
    def session_of(self, work_id: str, document: dict) -> int:
        """The store session holding the work item's runs (begun when its first job comes in)."""
        row = self.db.execute("SELECT session_id FROM fleet_work WHERE work_id=?", (work_id,)).fetchone()
        if row:
            return row[0]
        session_id = self.store.begin_session(kind="fleet", argv=["fleet", work_id], machine=machine.facts())
        self.db.execute("INSERT INTO fleet_work(work_id, session_id, document) VALUES (?,?,?)",
                        (work_id, session_id, json.dumps(document)))
        return session_id

    def has_job(self, job_id: str) -> bool:
        return self.db.execute("SELECT 1 FROM fleet_jobs WHERE job_id=?", (job_id,)).fetchone() is not None

    def counts(self, work_id: str) -> dict[str, int]:
        rows = self.db.execute("SELECT status, count(*) FROM fleet_jobs WHERE work_id=? GROUP BY status", (work_id,))
        counted = dict(rows.fetchall())
        return {"ok": counted.get("ok", 0), "dead": counted.get("dead", 0)}

    def comment(self, work_id: str) -> str | None:
        row = self.db.execute("SELECT comment FROM fleet_work WHERE work_id=?", (work_id,)).fetchone()
        return row[0] if row else None

    def finish(self, work_id: str, *, state: str, comment: str) -> None:
        self.db.execute("UPDATE fleet_work SET state=?, comment=?, finished_at=? WHERE work_id=?",
                        (state, comment, time.time(), work_id))

    def dead_jobs(self, work_id: str) -> list[tuple[str, str, str]]:
        return self.db.execute("SELECT job_id, platform, error FROM fleet_jobs WHERE work_id=? AND status='dead' "
                               "ORDER BY job_id", (work_id,)).fetchall()

    # -- jobs ---------------------------------------------------------------------------------
    def add_job(self, *, work_id: str, session_id: int, entry: dict, runs: list[dict]) -> int:
        """Store a finished job's runs, each once, then the job. Returns how many runs were new."""
        new = sum(self._add_run(session_id, entry["job_id"], run) for run in runs)
        self._add_job_row(work_id, entry, status="ok")
        return new

    def add_dead_job(self, *, work_id: str, entry: dict) -> None:
        self._add_job_row(work_id, entry, status="dead")

    def _add_job_row(self, work_id: str, entry: dict, *, status: str) -> None:
        self.db.execute(
            "INSERT OR IGNORE INTO fleet_jobs(job_id, work_id, platform, status, agent, attempt, error, submitted_at,"
            " started_at, stored_at) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (entry["job_id"], work_id, entry.get("platform", ""), status, entry.get("agent"),
             int(entry.get("attempt") or 0), entry.get("error"), _number(entry.get("submitted_at")),
             _number(entry.get("started_at")), time.time()))

    @staticmethod
    def run_of(document: dict, session_id: int) -> Run:
        """A run document of a result as the store holds it: in the work item's session."""
        run = Run.from_json(document)
        run.session_id, run.run_id = session_id, None
        return run

    def _add_run(self, session_id: int, job_id: str, document: dict) -> bool:
        """One run document into the store, once by its uid (Store.add_run), and its job."""
        run = self.run_of(document, session_id)
        new = self.store.add_run(run)
        self.db.execute("INSERT OR IGNORE INTO fleet_runs(uid, run_id, job_id) SELECT uid, id, ? FROM runs WHERE uid=?",
                        (job_id, run.uid))
        return new

    # -- reading back -------------------------------------------------------------------------
    def stored_uids(self, job_id: str) -> set[str]:
        """The uids of the runs stored for a job."""
        return {row[0] for row in self.db.execute("SELECT uid FROM fleet_runs WHERE job_id=?", (job_id,))}

    def platforms_of_runs(self, work_id: str) -> dict[str, str]:
        """uid → the platform that measured it, for every stored run of the work item."""
        return dict(self.db.execute(
            "SELECT f.uid, j.platform FROM fleet_runs f JOIN fleet_jobs j ON j.job_id = f.job_id "
            "WHERE j.work_id=? AND j.status='ok'", (work_id,)).fetchall())

    def runs_by_platform(self, work_id: str, session_id: int) -> dict[str, list[Run]]:
        """Every stored run of the work item, by the platform that measured it."""
        platform_of = self.platforms_of_runs(work_id)
        out: dict[str, list[Run]] = {}
        for run in self.store.load_runs(session_id):
            if run.uid in platform_of:
                out.setdefault(platform_of[run.uid], []).append(run)
        return out


def _number(text) -> float | None:
    try:
        return float(text)
    except (TypeError, ValueError):
        return None
