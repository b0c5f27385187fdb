"""`redline collector`: results into the store, exactly once; verdicts and the comment when a
work item is complete.

It reads the results stream in the `collector` group under one consumer name, first what it
had been given and not ACKed before a restart (XREADGROUP from 0), then new entries. An entry
is ACKed (and deleted: the stream only holds what is not stored yet) after its SQLite commit.
Exactly once: runs by uid, jobs by job_id (redline.store.fleet_ledger). A job's runs go through result
sinks, as the engine's do: the store (once by uid) and, with --export, RedisTimeSeries, before
the ACK (redline.fleet.export).

Every entry is checked before it is used (redline.fleet.entries): one that is malformed, or that
the collector fails on for any reason but a lost Redis or a failing store, is dead-lettered with
the reason and ACKed — it can never stop the collector nor come back at its next start.

A finished work item's side effects (the comments stream, the pull request comment, the export)
are recorded with its comment before any is made, and done in that order; a restart finishes
those not done, checking first whether the one it was in the middle of happened.
"""

from __future__ import annotations

import time

import redis

from redline.analysis.comparison import FDR_Q, apply_false_discovery_control, compare_test, looks_confidence
from redline.fleet import entries, github, keys, profiles, work as fleet_work
from redline.fleet.admission import DEFAULT_MAX_QUEUED, DEFAULT_STALL_AFTER_S
from redline.fleet.bisection import DEFAULT_MAX_CONCURRENT, DEFAULT_MAX_STEPS, DEFAULT_MEASURE, Decision, Loop
from redline.fleet.bisection import marker as bisection_marker
from redline.fleet.export import FleetExport
from redline.store.fleet_ledger import Ledger
from redline.fleet.process import Stopping, log, while_reachable
from redline.fleet.work import PLATFORM_NAME, ensure_group
from redline.output.markdown import comparison_markdown
from redline.output.markdown_text import literal
from redline.store.results import Store, StoreError

READ_BLOCK_MS = 2000
LOOP_TICK_S = 15.0           # the closed loop's periodic check (stalled platforms, agent time, the queue)
COMMENTS_KEPT = 10_000       # the comments stream is capped (every comment is in the store first)
ERROR_SHOWN = 300            # characters of a dead job's error in the comment


class Collector:
    def __init__(self, client: redis.Redis, *, store: Store, name: str, stopping: Stopping,
                 github_poster: github.Poster | None = None, export: FleetExport | None = None,
                 bisect_max_concurrent: int = DEFAULT_MAX_CONCURRENT, bisect_max_steps: int = DEFAULT_MAX_STEPS,
                 bisect_max_queued: int = DEFAULT_MAX_QUEUED, bisect_agent_time: float | None = None,
                 bisect_stall_after: float = DEFAULT_STALL_AFTER_S, bisect_history: bool = True,
                 bisect_measure: str = DEFAULT_MEASURE):
        self.client, self.store, self.name, self.stopping = client, store, name, stopping
        self.ledger = Ledger(store)
        self.github = github_poster
        self.export = export
        self.stream = keys.RESULTS.key()
        # the closed loop (redline.fleet.bisection): confirmation and bisection of a moved work item,
        # and of a change point of a push's branch history
        self.loop = Loop(store, CollectorFleet(self), max_concurrent=bisect_max_concurrent,
                         max_steps=bisect_max_steps, max_queued=bisect_max_queued, agent_time_s=bisect_agent_time,
                         stall_after_s=bisect_stall_after, say=self.say, history=bisect_history,
                         measure=bisect_measure)
        self.next_tick = 0.0                 # the loop's periodic check (monotonic): at the start, then every LOOP_TICK_S
        self.tick_failure: str | None = None

    def say(self, event: str, **fields) -> None:
        log(f"collector {self.name}", event, **fields)

    def serve(self) -> None:
        ensure_group(self.client, self.stream, keys.COLLECTOR_GROUP)
        self.say("started", store=self.store.path)
        while_reachable(self.stopping, self.say, self._finish_effects, during="finishing side effects")
        self.backlog = True                  # first the entries given to this consumer before a restart
        while not self.stopping.requested:
            while_reachable(self.stopping, self.say, self._step, during="collecting")
            if time.monotonic() >= self.next_tick:
                while_reachable(self.stopping, self.say, self._tick, during="the closed loop's periodic check")
        self.say("stopped")

    def _tick(self) -> None:
        """The closed loop's periodic check (redline.fleet.bisection.Loop.tick: stalled platforms,
        agent time freed, queued bisections opened), between two reads (each blocks at most
        READ_BLOCK_MS: no busy loop). A failure is one log line per different error, and the
        check is tried again at the next tick."""
        self.next_tick = time.monotonic() + LOOP_TICK_S
        try:
            self.loop.tick()
        except (redis.ConnectionError, redis.TimeoutError, StoreError, KeyboardInterrupt):
            raise
        except Exception as exc:        # noqa: BLE001 — the loop's check cannot stop the collector
            failure = f"{type(exc).__name__}: {shortened(str(exc))}"
            if failure != self.tick_failure:
                self.say("the closed loop's periodic check failed", error=failure)
            self.tick_failure = failure
            return
        self.tick_failure = None

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
        batch = [entry for _, found in answer or [] for entry in found]
        self.backlog = bool(self.backlog and batch)
        for entry_id, fields in batch:
            try:
                self.handle(entry_id, fields)
            except (redis.ConnectionError, redis.TimeoutError):
                self.backlog = True
                raise
            except (StoreError, KeyboardInterrupt):     # the store's fault, not the entry's: it stays pending
                raise
            except Exception as exc:        # noqa: BLE001 — whatever an entry holds, it cannot stop the collector
                self._reject(entry_id, fields, f"the collector could not handle this entry: {type(exc).__name__}: "
                                               f"{str(exc)[:500]}")
            if self.stopping.requested:
                break

    # -- one result ---------------------------------------------------------------------------
    def handle(self, entry_id: str, fields: dict) -> None:
        try:
            entry = entries.result_entry(fields)
        except entries.Malformed as exc:
            return self._reject(entry_id, fields, f"malformed result entry: {exc}")
        raw = self.client.hgetall(keys.WORK.key(work_id=entry.work_id))
        if not raw:
            self.say("result of an unknown work item, dropped", job=entry.job_id, work=entry.work_id)
            return self._done(entry_id, entry)
        try:
            work = entries.work_summary(raw, entry.work_id)
        except entries.Malformed as exc:
            return self._reject(entry_id, fields, f"work item {entry.work_id} is malformed: {exc}")
        session_id = self.ledger.session_of(entry.work_id, raw)
        if self.ledger.has_job(entry.job_id):
            self.say("duplicate result ignored", job=entry.job_id, agent=entry.agent)
            if self.export:              # the entry again after a restart: its runs may not be exported yet
                try:
                    runs = entries.run_documents(self._payload(entry))
                except entries.Malformed:        # only a second result can be broken: none of it is stored
                    runs = []
                self._export_job(entry, session_id, runs)
        elif entry.kind == "dead":
            self.ledger.add_job(work_id=entry.work_id, entry=fields, status="dead")
            self.say("job dead", job=entry.job_id, error=entry.error)
        else:
            try:
                runs = entries.run_documents(self._payload(entry))
            except entries.Malformed as exc:
                return self._reject(entry_id, fields, str(exc), entry)
            self._store_job(entry, session_id, runs)
        self._progress(work, session_id)
        self._done(entry_id, entry)

    def _payload(self, entry: entries.ResultEntry) -> str:
        if entry.inline is not None:
            return entry.inline
        return entries.blob_payload(self.client.get(entry.runs_ref), entry)

    def _store_job(self, entry: entries.ResultEntry, session_id: int, runs: list) -> None:
        """The job's runs through its result sinks (the store once by uid, then the export of
        what the store holds for the job), then its row."""
        stored = self.ledger.job_runs(session_id, entry.job_id)
        for run in [profiles.kept(run, self.store) for run in runs]:
            stored.run_started(run)
            stored.run_finished(run)
        self.ledger.add_job(work_id=entry.work_id, entry=entry.fields)
        self.say("job stored", job=entry.job_id, runs=stored.new, agent=entry.agent)
        if self.export:
            self._export_job(entry, session_id, runs)

    def _export_job(self, entry: entries.ResultEntry, session_id: int, runs: list) -> None:
        """The job's runs that are stored for it (by uid: a second agent's result for a stored job
        is not them) through the export sink."""
        stored = self.ledger.stored_uids(entry.job_id)
        sink = self.export.sink(entry.platform)
        for run in runs:
            if run.uid in stored:
                run.session_id, run.run_id = session_id, None
                sink.run_finished(run)
        self.export.job_exported(sink, job_id=entry.job_id, platform=entry.platform, session_id=session_id)

    def _done(self, entry_id: str, entry: entries.ResultEntry | None) -> None:
        with self.client.pipeline(transaction=True) as tx:
            tx.xack(self.stream, keys.COLLECTOR_GROUP, entry_id)
            tx.xdel(self.stream, entry_id)
            if entry is not None and entry.runs_ref:
                tx.delete(entry.runs_ref)
            tx.execute()

    def _reject(self, entry_id: str, fields: dict, reason: str, entry: entries.ResultEntry | None = None) -> None:
        """A result entry that cannot be used: dead-lettered with the reason and ACKed. When it
        names a job of a known work item, that job is dead (its work item can still complete)."""
        job_id, work_id = str(fields.get("job_id", ""))[:200], str(fields.get("work_id", ""))[:200]
        platform = str(fields.get("platform", ""))
        platform = platform if PLATFORM_NAME.match(platform) else ""
        self.client.xadd(keys.DEAD.key(), {"job_id": job_id, "work_id": work_id, "platform": platform,
                                           "agent": f"collector {self.name}", "attempts": "0",
                                           "error": reason[:entries.ERROR_LIMIT], "job": ""})
        self.say("result dead-lettered", entry=entry_id, job=job_id or None, error=reason)
        named = entries.IDENTIFIER.match(job_id) and entries.IDENTIFIER.match(work_id)
        raw = self.client.hgetall(keys.WORK.key(work_id=work_id)) if named else {}
        try:
            work = entries.work_summary(raw, work_id) if raw else None
        except entries.Malformed:
            work = None
        if work is not None and not self.ledger.has_job(job_id):
            session_id = self.ledger.session_of(work_id, raw)
            self.ledger.add_job(work_id=work_id, entry={**(entry.fields if entry else {}), "job_id": job_id,
                                                        "platform": platform, "error": reason}, status="dead")
            self.say("job dead", job=job_id, error=reason)
            self._progress(work, session_id)
        self._done(entry_id, entry)

    # -- a work item's progress and end -------------------------------------------------------
    def _progress(self, work: entries.WorkSummary, session_id: int) -> None:
        counts = self.ledger.counts(work.work_id)
        complete = counts["ok"] + counts["dead"] >= work.jobs_total
        update = {"jobs_done": str(counts["ok"]), "jobs_dead": str(counts["dead"]), "session_id": str(session_id)}
        if complete:
            state = "failed" if counts["dead"] else "done"
            if not self.ledger.finished(work.work_id):
                self._finish(work, session_id, state)
            self._finish_effects(work.work_id)
            update["state"] = state
        self.client.hset(keys.WORK.key(work_id=work.work_id), mapping=update)

    def _finish(self, work: entries.WorkSummary, session_id: int, state: str) -> None:
        """Verdicts with false-discovery control over the whole work item; the comment and the
        side effects still to do, recorded together."""
        by_platform = self.ledger.runs_by_platform(work.work_id, session_id)
        comparisons, records = [], []
        confidence = looks_confidence(work.runs, max(work.runs, work.max_runs))
        for platform, runs in sorted(by_platform.items()):
            measured: dict[str, list] = {}
            for run in runs:
                if run.purpose == "measure":
                    measured.setdefault(run.key, []).append(run)
            for key, group in measured.items():
                comparisons += compare_test(verdict_label(key, platform, len(by_platform)), group, {},
                                            confidence=confidence, runs_allowed=work.max_runs)
            records += runs
        apply_false_discovery_control(comparisons, q=FDR_Q)
        self.store.save_comparisons(session_id, [c.as_json() for c in comparisons])
        comment = comparison_markdown(comparisons, records, baseline=work.baseline, comparison=work.comparison)
        dead = self.ledger.dead_jobs(work.work_id)
        if dead:
            comment += "\n**Jobs that failed on every attempt** (no verdict):\n\n" + "\n".join(
                f"- {literal(job_id)} on {literal(platform or '?')}: {literal(shortened(error or ''))}"
                for job_id, platform, error in dead) + "\n"
        export = ["export"] if self.export else []
        if work.bisection:          # a pair of a fleet bisection: its answer goes to the bisection, not to a comment
            effects = export + ["bisection"]
        else:
            decision = self._trigger(work, comparisons, records)
            if decision is not None and decision.line:
                comment += f"\n{decision.line}\n"
            effects = export + ["comments"] + (["github"] if work.github and self.github else []) + (
                ["bisection"] if decision is not None and decision.bisection is not None else []) + (
                ["history"] if self.loop.checks_history(work) else [])
        comment += f"\n{marker(work.work_id)}\n"
        self.ledger.finish(work.work_id, state=state, comment=comment, effects=effects)
        self.store.finish_session(session_id, "finished" if state == "done" else "failed")
        self.say("work item complete", work=work.work_id, state=state, comparisons=len(comparisons), dead=len(dead))

    def _trigger(self, work: entries.WorkSummary, comparisons: list, records: list):
        """The closed loop's decision for a complete work item; a failure of it is one log line and a
        line in the comment, never the result entry's dead letter."""
        try:
            return self.loop.trigger(work, comparisons, records)
        except (redis.ConnectionError, redis.TimeoutError, StoreError, KeyboardInterrupt):
            raise
        except Exception as exc:        # noqa: BLE001 — the work item's verdicts stand whatever the loop does
            self.say("bisection not opened", work=work.work_id, error=f"{type(exc).__name__}: {exc}")
            return Decision(f"Not bisected: the collector's loop failed ({type(exc).__name__}: {shortened(str(exc))}).")

    # -- side effects, each once ------------------------------------------------------------------
    def _finish_effects(self, work_id: str | None = None) -> None:
        """The recorded effects not done yet (of one work item, or all of them at start), in order."""
        for work, kind, attempts in self.ledger.pending_effects(work_id):
            self.ledger.effect_attempted(work, kind)
            state, detail = getattr(self, f"_effect_{kind}")(work, again=attempts > 0)
            self.ledger.effect_ended(work, kind, state, detail)

    def _effect_export(self, work_id: str, *, again: bool) -> tuple[str, str | None]:
        if self.export is None:
            return "failed", "the collector has no --export now"
        session_id = self.ledger.session_of(work_id, {})
        platform_of = self.ledger.platforms_of_runs(work_id)
        platforms = len(set(platform_of.values()))
        done = self.export.work_complete(work_id, self.store.load_session(session_id), platform_of,
                                         lambda key, platform: verdict_label(key, platform, platforms))
        return ("done", None) if done else ("failed", "see the log's `export failed` line")

    def _effect_bisection(self, work_id: str, *, again: bool) -> tuple[str, str | None]:
        """The closed loop told that the work item is complete: a pair's answer recorded and its
        bisection advanced, or the bisection it opened started. Idempotent (redline.fleet.bisection);
        a failure is one log line and not retried (the bisection's state says where it stopped)."""
        try:
            self.loop.work_complete(entries.work_summary(self.ledger.document(work_id), work_id))
        except (redis.ConnectionError, redis.TimeoutError, StoreError, KeyboardInterrupt):
            raise
        except Exception as exc:        # noqa: BLE001 — one work item's loop cannot stop the collector
            self.say("bisection failed to advance", work=work_id, error=f"{type(exc).__name__}: {exc}")
            return "failed", shortened(f"{type(exc).__name__}: {exc}")
        return "done", None

    def _effect_history(self, work_id: str, *, again: bool) -> tuple[str, str | None]:
        """The closed loop's second trigger: the change points of the push's branch history, each
        bisected once (redline.fleet.bisection `history_check`, idempotent: what it decided is in the
        store). A failure is one log line and is not retried."""
        try:
            opened = self.loop.history_check(entries.work_summary(self.ledger.document(work_id), work_id))
        except (redis.ConnectionError, redis.TimeoutError, StoreError, KeyboardInterrupt):
            raise
        except Exception as exc:        # noqa: BLE001 — a history check cannot stop the collector
            self.say("history check failed", work=work_id, error=f"{type(exc).__name__}: {exc}")
            return "failed", shortened(f"{type(exc).__name__}: {exc}")
        return "done", f"{len(opened)} bisection(s) opened" if opened else None

    def _effect_comments(self, work_id: str, *, again: bool) -> tuple[str, str | None]:
        """The comment on the comments stream; tried before, it is looked for first."""
        if again and any(f.get("work_id") == work_id and not f.get("bisection")
                         for _, f in self.client.xrevrange(keys.COMMENTS.key(), count=COMMENTS_KEPT)):
            return "done", "found on the stream"
        document = self.ledger.document(work_id)
        state = "failed" if self.ledger.dead_jobs(work_id) else "done"
        self.client.xadd(keys.COMMENTS.key(), {"work_id": work_id, "state": state,
                                               "markdown": self.ledger.comment(work_id) or "",
                                               "github": document.get("github", "")},
                         maxlen=COMMENTS_KEPT, approximate=True)
        return "done", None

    def _effect_github(self, work_id: str, *, again: bool) -> tuple[str, str | None]:
        """The pull request's comment. Tried before (the collector stopped during the POST), it is
        looked for on the pull request first: posted then, it is not posted again. A failed post
        is one log line and is not retried (the comment is in the store and on the stream)."""
        target = self.ledger.document(work_id).get("github", "")
        if self.github is None:
            self.say("comment not posted", github=target, error="no --github-token-file")
            return "failed", "no --github-token-file"
        try:
            url = self.github.find(target, marker(work_id)) if again else None
            if url is not None:
                self.say("comment found posted before", github=target, url=url)
                return "done", url
            url = self.github.post(target, self.ledger.comment(work_id) or "")
        except github.PostFailed as exc:
            self.say("comment not posted", github=target, error=exc)
            return "failed", str(exc)
        self.say("comment posted", github=target, url=url)
        return "done", url


class CollectorFleet:
    """What the closed loop (redline.fleet.bisection.Fleet) needs of the fleet, from the collector:
    work items enqueued as `submit` does, the platform's live agents, a complete work item's stored
    runs and dead jobs, the stage mirrored for `fleet status`, the report as a comment."""

    def __init__(self, collector: Collector):
        self.collector = collector

    @property
    def client(self) -> redis.Redis:
        return self.collector.client

    def submit(self, item: fleet_work.WorkItem) -> None:
        if self.client.exists(keys.WORK.key(work_id=item.work_id)):
            return                          # enqueued before a restart: the same work id is not queued twice
        fleet_work.enqueue(self.client, item)

    def live_agents(self, platform: str) -> int:
        return sum(1 for _ in self.client.scan_iter(match=keys.AGENT.key(platform=platform, agent="*"), count=100))

    def agent_seconds(self, work_id: str) -> float:
        return self.collector.ledger.agent_seconds(work_id)

    def results(self, work_id: str):
        ledger = self.collector.ledger
        session_id = ledger.session_of(work_id, {})
        runs = [run for runs in ledger.runs_by_platform(work_id, session_id).values() for run in runs]
        return runs, ledger.dead_jobs(work_id)

    def mirror(self, state: dict) -> None:
        culprit = (state.get("culprit") or {}).get("sha", "")
        with self.client.pipeline(transaction=True) as tx:
            tx.hset(keys.BISECTION.key(bisection=str(state["bisection"])), mapping={
                "bisection": str(state["bisection"]), "work_id": state["work_id"], "repository": state["repository"],
                "platform": state["platform"], "per_round": str(state["per_round"]), "stage": state["stage"],
                "round": str(state["round"]), "rounds": str(state["rounds"]), "steps": str(len(state["pairs"])),
                "culprit": culprit, "note": state.get("note") or "", "updated_at": repr(state["updated_at"]),
                "position": str(state.get("position") or 0), "queued": str(state.get("queue_length") or 0),
                "frees_at": repr(state.get("frees_at") or 0.0)})
            tx.zadd(keys.BISECTIONS.key(), {str(state["bisection"]): state["started_at"]})
            tx.execute()

    def publish(self, state: dict, markdown: str, *, again: bool) -> str | None:
        """The report on the comments stream (looked for first when tried before), then on the pull
        request when the work item came from one and a token is given (found there: not posted
        again). A refused post is one log line, not retried."""
        collector, bisection = self.collector, str(state["bisection"])
        if not (again and any(f.get("bisection") == bisection for _, f in
                              self.client.xrevrange(keys.COMMENTS.key(), count=COMMENTS_KEPT))):
            self.client.xadd(keys.COMMENTS.key(), {"work_id": state["work_id"], "bisection": bisection,
                                                   "state": "done" if state["stage"] == "reported" else "failed",
                                                   "markdown": markdown, "github": state.get("github") or ""},
                             maxlen=COMMENTS_KEPT, approximate=True)
        target = state.get("github") or ""
        if not target or collector.github is None:
            return "comments"
        try:
            url = collector.github.find(target, bisection_marker(state["bisection"])) if again else None
            url = url or collector.github.post(target, markdown)
        except github.PostFailed as exc:
            collector.say("bisection comment not posted", github=target, error=exc)
            return "comments"
        collector.say("bisection comment posted", github=target, url=url)
        return url


def marker(work_id: str) -> str:
    """The invisible line that identifies a work item's comment on its pull request."""
    return f"<!-- redline work item {work_id} -->"


def shortened(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= ERROR_SHOWN else text[:ERROR_SHOWN] + "…"


def verdict_label(key: str, platform: str, platforms: int) -> str:
    """A test's name in the work item's comparisons: its key, with the platform when there are several."""
    return f"{key} on {platform}" if platforms > 1 else key
