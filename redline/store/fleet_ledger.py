"""The collector's side of the store: which work items and jobs are in, stored exactly once, and
the side effects of a finished work item.

Four tables of the store's schema (redline.store.results):
  fleet_work     one row per work item: its store session, the work hash, its comment once done
  fleet_jobs     one row per job that came in (ok or dead): the exactly-once key is job_id
  fleet_runs     run uid → the store's run row and its job (so verdicts know the platform)
  fleet_effects  what a finished work item does outside the store (the comments stream, the pull
                 request comment, the export), recorded with the comment before any is done
A job's runs go to the store run by run (each once, by uid: `JobRuns`, a result sink), then its
fleet_jobs row: a collector killed in between stores the missing runs when the entry is delivered
again, and a second result for a job already in is recognised by job_id and dropped.

An effect is `pending` until done; its attempts are counted before each try, so a collector
restarted after a try it cannot know the end of (killed during the pull request's POST) checks
first whether it happened (redline.fleet.collector) and finishes it instead of repeating it.
"""

from __future__ import annotations

import json
import time

from redline.core.run import Run
from redline.store.results import Store
from redline.system import machine

JOB_SPAN_LIMIT_S = 24 * 3600.0      # one job's agent time counted at most (a job is measured in far less)


class Ledger:
    def __init__(self, store: Store):
        self.store = store
        self.db = store.db

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

    def document(self, work_id: str) -> dict:
        """The work hash as it was when the work item's first job came in."""
        row = self.db.execute("SELECT document FROM fleet_work WHERE work_id=?", (work_id,)).fetchone()
        return json.loads(row[0]) if row else {}

    def has_job(self, job_id: str) -> bool:
        return self.db.execute("SELECT 1 FROM fleet_jobs WHERE job_id=?", (job_id,)).fetchone() is not None

    def counts(self, work_id: str) -> dict[str, int]:
        rows = self.db.execute("SELECT status, count(*) FROM fleet_jobs WHERE work_id=? GROUP BY status", (work_id,))
        counted = dict(rows.fetchall())
        return {"ok": counted.get("ok", 0), "dead": counted.get("dead", 0)}

    def comment(self, work_id: str) -> str | None:
        row = self.db.execute("SELECT comment FROM fleet_work WHERE work_id=?", (work_id,)).fetchone()
        return row[0] if row else None

    def finished(self, work_id: str) -> bool:
        row = self.db.execute("SELECT state FROM fleet_work WHERE work_id=?", (work_id,)).fetchone()
        return bool(row) and row[0] != "running"

    def finish(self, work_id: str, *, state: str, comment: str, effects: list[str]) -> None:
        """The work item's end, its comment and the effects still to do, in one transaction."""
        now = time.time()
        with self.store._transaction():
            self.db.execute("UPDATE fleet_work SET state=?, comment=?, finished_at=? WHERE work_id=?",
                            (state, comment, now, work_id))
            self.db.executemany("INSERT OR IGNORE INTO fleet_effects(work_id, kind, updated_at) VALUES (?,?,?)",
                                [(work_id, kind, now) for kind in effects])

    def dead_jobs(self, work_id: str) -> list[tuple[str, str, str]]:
        return self.db.execute("SELECT job_id, platform, error FROM fleet_jobs WHERE work_id=? AND status='dead' "
                               "ORDER BY job_id", (work_id,)).fetchall()

    def finished_work(self) -> list[tuple[str, int, dict]]:
        """(work_id, session, work hash as it came in) of every finished work item, in the order their
        first result came in; the hash is as untrusted as when it was read from Redis."""
        return [(work_id, session_id, json.loads(document)) for work_id, session_id, document in self.db.execute(
            "SELECT work_id, session_id, document FROM fleet_work WHERE state != 'running' ORDER BY rowid")]

    def comparison_values(self, work_ids: list[str], metrics: list[str], tests: list[str] | None = None) -> list:
        """Every measured run of the comparison side of these work items (of `tests` only, when given)
        with its value of each of `metrics`: work_id, platform, session_id, test, topology, suite_file,
        started_at, metric, value, identity, server_version (as Store.history's rows), oldest first."""
        return self.db.execute(
            "SELECT j.work_id, j.platform, r.session_id, r.test, r.topology, r.suite_file, r.target, r.started_at, "
            "m.name AS metric, m.value, json_extract(r.facts, '$.identity') AS identity, "
            "json_extract(r.facts, '$.server_version') AS server_version FROM runs r "
            "JOIN metrics m ON m.run_id = r.id JOIN fleet_runs f ON f.run_id = r.id "
            "JOIN fleet_jobs j ON j.job_id = f.job_id "
            "WHERE j.status='ok' AND r.status='ok' AND r.purpose='measure' AND r.side='comparison' "
            "AND m.value IS NOT NULL AND r.started_at IS NOT NULL AND j.work_id IN (SELECT value FROM json_each(?)) "
            "AND m.name IN (SELECT value FROM json_each(?)) "
            "AND (? IS NULL OR r.test IN (SELECT value FROM json_each(?))) ORDER BY r.started_at",
            (json.dumps(work_ids), json.dumps(metrics), None if tests is None else 1, json.dumps(tests or []))
        ).fetchall()

    # -- side effects ---------------------------------------------------------------------------
    def pending_effects(self, work_id: str | None = None) -> list[tuple[str, str, int]]:
        """(work_id, kind, attempts so far) of every effect not done yet, in the order recorded."""
        where, parameters = ("AND work_id=?", (work_id,)) if work_id else ("", ())
        return self.db.execute(f"SELECT work_id, kind, attempts FROM fleet_effects WHERE state='pending' {where} "
                               "ORDER BY rowid", parameters).fetchall()

    def effect_attempted(self, work_id: str, kind: str) -> None:
        """Counted (and committed) before the effect is tried."""
        self.db.execute("UPDATE fleet_effects SET attempts = attempts + 1, updated_at=? WHERE work_id=? AND kind=?",
                        (time.time(), work_id, kind))

    def effect_ended(self, work_id: str, kind: str, state: str, detail: str | None) -> None:
        self.db.execute("UPDATE fleet_effects SET state=?, detail=?, updated_at=? WHERE work_id=? AND kind=?",
                        (state, detail, time.time(), work_id, kind))

    # -- jobs ---------------------------------------------------------------------------------
    def add_job(self, *, work_id: str, entry: dict, status: str = "ok") -> None:
        """The job's row (after its runs, for an ok job): from now on it is in."""
        self.db.execute(
            "INSERT OR IGNORE INTO fleet_jobs(job_id, work_id, platform, status, agent, attempt, error, submitted_at,"
            " started_at, stored_at) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (entry["job_id"], work_id, entry.get("platform", ""), status, entry.get("agent"),
             _integer(entry.get("attempt")), entry.get("error"), _number(entry.get("submitted_at")),
             _number(entry.get("started_at")), time.time()))

    def job_runs(self, session_id: int, job_id: str) -> JobRuns:
        return JobRuns(self, session_id, job_id)

    # -- reading back -------------------------------------------------------------------------
    def jobs(self, work_id: str) -> list[dict]:
        """Every job row of the work item as stored: job id, status, agent, attempt."""
        rows = self.db.execute("SELECT job_id, status, agent, attempt FROM fleet_jobs WHERE work_id=? ORDER BY job_id",
                               (work_id,))
        return [dict(zip(("job_id", "status", "agent", "attempt"), row)) for row in rows]

    def stored_uids(self, job_id: str) -> set[str]:
        """The uids of the runs stored for a job."""
        return {row[0] for row in self.db.execute("SELECT uid FROM fleet_runs WHERE job_id=?", (job_id,))}

    def platforms_of_runs(self, work_id: str) -> dict[str, str]:
        """uid → the platform that measured it, for every stored run of the work item."""
        return dict(self.db.execute(
            "SELECT f.uid, j.platform FROM fleet_runs f JOIN fleet_jobs j ON j.job_id = f.job_id "
            "WHERE j.work_id=? AND j.status='ok'", (work_id,)).fetchall())

    def agent_seconds(self, work_id: str) -> float:
        """The wall time agents spent on the work item's stored jobs: each job from its start on the
        agent (the result's started_at: before its builds) to the end of its last stored run, at
        most JOB_SPAN_LIMIT_S (what an agent reports is not trusted to be sane). A job that died
        counts nothing (the collector does not know how long it ran), nor an earlier failed attempt."""
        rows = self.db.execute(
            "SELECT j.started_at, min(r.started_at), max(r.finished_at) FROM fleet_jobs j "
            "JOIN fleet_runs f ON f.job_id = j.job_id JOIN runs r ON r.id = f.run_id "
            "WHERE j.work_id=? AND j.status='ok' GROUP BY j.job_id", (work_id,)).fetchall()
        spans = [(finished or 0.0) - (job_started or first_run or finished or 0.0)
                 for job_started, first_run, finished in rows]
        return sum(min(max(0.0, span), JOB_SPAN_LIMIT_S) for span in spans)

    def runs_by_platform(self, work_id: str, session_id: int) -> dict[str, list[Run]]:
        """Every stored run of the work item, by the platform that measured it."""
        platform_of = self.platforms_of_runs(work_id)
        out: dict[str, list[Run]] = {}
        for run in self.store.load_runs(session_id):
            if run.uid in platform_of:
                out.setdefault(platform_of[run.uid], []).append(run)
        return out


class JobRuns:
    """The store as a result sink (redline.engine.sinks.ResultSink) for one job's runs, which
    arrive finished from an agent: each is stored once by its uid (`Store.add_run`, atomic) in the
    work item's session and tied to its job. `new` counts the runs stored now."""

    def __init__(self, ledger: Ledger, session_id: int, job_id: str):
        self.ledger, self.session_id, self.job_id = ledger, session_id, job_id
        self.new = 0

    def run_started(self, run: Run) -> None:
        """A run from an agent has started and ended elsewhere: it is stored whole when finished."""
        run.session_id, run.run_id = self.session_id, None

    def run_finished(self, run: Run) -> None:
        run.session_id, run.run_id = self.session_id, None
        self.new += self.ledger.store.add_run(run)
        self.ledger.db.execute("INSERT OR IGNORE INTO fleet_runs(uid, run_id, job_id) SELECT uid, id, ? FROM runs "
                               "WHERE uid=?", (self.job_id, run.uid))

    def run_interrupted(self, run: Run, reason: str) -> None:
        """Never: an agent publishes finished runs only."""


def _number(text) -> float | None:
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def _integer(text) -> int:
    try:
        return int(text)
    except (TypeError, ValueError):
        return 0
