"""`redline collector`: results into the store, exactly once; verdicts and the comment when a
work item is complete.

It reads the results stream in the `collector` group under one consumer name, first what it
had been given and not ACKed before a restart (XREADGROUP from 0), then new entries. An entry
is ACKed (and deleted: the stream only holds what is not stored yet) after its SQLite commit.
Exactly once: runs by uid, jobs by job_id (redline.fleet.ledger). With --export, what is stored
also goes to RedisTimeSeries before the ACK (redline.fleet.export).
"""

from __future__ import annotations

import hashlib
import json

import redis

from redline.analysis.comparison import FDR_Q, apply_false_discovery_control, compare_test, looks_confidence
from redline.fleet import github, keys
from redline.fleet.export import FleetExport
from redline.fleet.ledger import Ledger
from redline.fleet.process import Stopping, log, while_reachable
from redline.fleet.work import ensure_group
from redline.output.markdown import comparison_markdown
from redline.store.results import Store

READ_BLOCK_MS = 2000
COMMENTS_KEPT = 10_000       # the comments stream is capped (every comment is in the store first)


class BlobLost(Exception):
    pass


class Collector:
    def __init__(self, client: redis.Redis, *, store: Store, name: str, stopping: Stopping,
                 github_poster: github.Poster | None = None, export: FleetExport | None = None):
        self.client, self.store, self.name, self.stopping = client, store, name, stopping
        self.ledger = Ledger(store)
        self.github = github_poster
        self.export = export
        self.stream = keys.RESULTS.key()

    def say(self, event: str, **fields) -> None:
        log(f"collector {self.name}", event, **fields)

    def serve(self) -> None:
        ensure_group(self.client, self.stream, keys.COLLECTOR_GROUP)
        self.say("started", store=self.store.path)
        self.backlog = True                  # first the entries given to this consumer before a restart
        while not self.stopping.requested:
            while_reachable(self.stopping, self.say, self._step, during="collecting")
        self.say("stopped")

    def _step(self) -> None:
        """One read and its entries; after a Redis outage, from this consumer's pending entries
        again (one may have been stored and not ACKed: storing it again changes nothing)."""
        try:
            answer = self.client.xreadgroup(keys.COLLECTOR_GROUP, self.name,
                                            {self.stream: "0" if self.backlog else ">"},
                                            count=10, block=None if self.backlog else READ_BLOCK_MS)
        except redis.ResponseError as exc:      # a Redis restarted without its AOF lost the group
            if "NOGROUP" not in str(exc):
                raise
            ensure_group(self.client, self.stream, keys.COLLECTOR_GROUP)
            return
        entries = [entry for _, batch in answer or [] for entry in batch]
        self.backlog = bool(self.backlog and entries)
        for entry_id, fields in entries:
            try:
                self.handle(entry_id, fields)
            except (redis.ConnectionError, redis.TimeoutError):
                self.backlog = True
                raise
            if self.stopping.requested:
                break

    # -- one result ---------------------------------------------------------------------------
    def handle(self, entry_id: str, fields: dict) -> None:
        work_id, job_id = fields.get("work_id", ""), fields.get("job_id", "")
        work = self.client.hgetall(keys.WORK.key(work_id=work_id))
        if not work:
            self.say("result of an unknown work item, dropped", job=job_id, work=work_id)
            return self._done(entry_id, fields)
        session_id = self.ledger.session_of(work_id, work)
        if self.ledger.has_job(job_id):
            self.say("duplicate result ignored", job=job_id, agent=fields.get("agent"))
            if self.export:              # the entry again after a restart: its runs may not be exported yet
                try:
                    self._export_job(fields, session_id, self._runs(fields))
                except BlobLost:         # only a second result's blob can be gone: none of it is stored
                    pass
        elif fields.get("kind") == "dead":
            self.ledger.add_dead_job(work_id=work_id, entry=fields)
            self.say("job dead", job=job_id, error=fields.get("error"))
        else:
            try:
                runs = self._runs(fields)
            except BlobLost as exc:
                self.ledger.add_dead_job(work_id=work_id, entry={**fields, "error": str(exc)})
                self.say("job dead", job=job_id, error=exc)
            else:
                new = self.ledger.add_job(work_id=work_id, session_id=session_id, entry=fields, runs=runs)
                self.say("job stored", job=job_id, runs=new, agent=fields.get("agent"))
                if self.export:
                    self._export_job(fields, session_id, runs)
        self._progress(work_id, work, session_id)
        self._done(entry_id, fields)

    def _runs(self, fields: dict) -> list[dict]:
        if "runs" in fields:
            return json.loads(fields["runs"])
        payload = self.client.get(fields.get("runs_ref", ""))
        if payload is None:
            raise BlobLost(f"results blob {fields.get('runs_ref')} is missing")
        if hashlib.sha256(payload.encode()).hexdigest() != fields.get("runs_sha256"):
            raise BlobLost(f"results blob {fields.get('runs_ref')} does not match its sha256")
        return json.loads(payload)

    def _export_job(self, fields: dict, session_id: int, documents: list[dict]) -> None:
        """The job's runs as stored (by uid: a second agent's result for a stored job is not them)."""
        stored = self.ledger.stored_uids(fields["job_id"])
        runs = [self.ledger.run_of(document, session_id) for document in documents if document.get("uid") in stored]
        self.export.job_stored(job_id=fields["job_id"], platform=fields.get("platform", ""), session_id=session_id,
                               runs=runs)

    def _done(self, entry_id: str, fields: dict) -> None:
        with self.client.pipeline(transaction=True) as tx:
            tx.xack(self.stream, keys.COLLECTOR_GROUP, entry_id)
            tx.xdel(self.stream, entry_id)
            if fields.get("runs_ref"):
                tx.delete(fields["runs_ref"])
            tx.execute()

    # -- a work item's progress and end -------------------------------------------------------
    def _progress(self, work_id: str, work: dict, session_id: int) -> None:
        counts = self.ledger.counts(work_id)
        total = int(work.get("jobs_total") or 0)
        complete = counts["ok"] + counts["dead"] >= total
        state = ("failed" if counts["dead"] else "done") if complete else None
        update = {"jobs_done": str(counts["ok"]), "jobs_dead": str(counts["dead"]), "session_id": str(session_id)}
        if complete and work.get("state") not in ("done", "failed"):
            comment = self.ledger.comment(work_id) or self._finish(work_id, work, session_id, state)
            if self.export:
                platform_of = self.ledger.platforms_of_runs(work_id)
                platforms = len(set(platform_of.values()))
                self.export.work_complete(work_id, self.store.load_session(session_id), platform_of,
                                          lambda key, platform: verdict_label(key, platform, platforms))
            self.client.xadd(keys.COMMENTS.key(), {"work_id": work_id, "state": state, "markdown": comment,
                                                   "github": work.get("github", "")},
                             maxlen=COMMENTS_KEPT, approximate=True)
            update["state"] = state
            if self.github and work.get("github"):
                self._post(work["github"], comment)
        self.client.hset(keys.WORK.key(work_id=work_id), mapping=update)

    def _finish(self, work_id: str, work: dict, session_id: int, state: str) -> str:
        """Verdicts with false-discovery control over the whole work item, the comment, both stored."""
        by_platform = self.ledger.runs_by_platform(work_id, session_id)
        comparisons, records = [], []
        confidence = looks_confidence(int(work.get("runs") or 7), int(work.get("max_runs") or 15))
        for platform, runs in sorted(by_platform.items()):
            measured: dict[str, list] = {}
            for run in runs:
                if run.purpose == "measure":
                    measured.setdefault(run.key, []).append(run)
            for key, group in measured.items():
                comparisons += compare_test(verdict_label(key, platform, len(by_platform)), group, {},
                                            confidence=confidence)
            records += runs
        apply_false_discovery_control(comparisons, q=FDR_Q)
        self.store.save_comparisons(session_id, [c.as_json() for c in comparisons])
        comment = comparison_markdown(comparisons, records, baseline=work.get("baseline", ""),
                                      comparison=work.get("comparison", ""))
        dead = self.ledger.dead_jobs(work_id)
        if dead:
            comment += "\n**Jobs that failed on every attempt** (no verdict):\n\n" + "\n".join(
                f"- `{job_id}` on {platform}: {error}" for job_id, platform, error in dead) + "\n"
        self.ledger.finish(work_id, state=state, comment=comment)
        self.store.finish_session(session_id, "finished" if state == "done" else "failed")
        self.say("work item complete", work=work_id, state=state, comparisons=len(comparisons), dead=len(dead))
        return comment

    def _post(self, target: str, comment: str) -> None:
        try:
            url = self.github.post(target, comment)
            self.say("comment posted", github=target, url=url)
        except github.PostFailed as exc:
            self.say("comment not posted", github=target, error=exc)


def verdict_label(key: str, platform: str, platforms: int) -> str:
    """A test's name in the work item's comparisons: its key, with the platform when there are several."""
    return f"{key} on {platform}" if platforms > 1 else key
