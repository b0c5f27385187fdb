"""`redline agent`: takes its platform's jobs, runs them, publishes their runs.

One loop, all of it Redis Streams:
  XAUTOCLAIM  entries of this platform idle longer than --claim-idle (their agent died) …
  XREADGROUP  … else the next new entry (BLOCK: Redis wakes the agent when one arrives)
  heartbeat   a thread: the agent's hash (with a TTL) and XCLAIM JUSTID of the running entry, which
              resets its idle time, so a live agent's long job is never taken from it
  outcome     in one MULTI/EXEC: the result on the results stream + XACK + XDEL of the job
              (a failure: the job again with attempt+1, or past --max-attempts the dead-letter
              stream and a `dead` result, + XACK + XDEL). Nothing is ACKed before its outcome is
              in Redis, and the two happen together or not at all.
A job SIGKILLed with its agent stays pending and is claimed by another agent after --claim-idle;
an entry delivered more than --max-attempts times (it kills its agents) is dead-lettered unrun.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform as host_platform
import threading
import time
import traceback

import redis

from redline.core.errors import RunError, UsageError
from redline.fleet import entries, keys
from redline.fleet.execution import Executor, JobRefused, LogObserver
from redline.fleet.policy import Refused, TargetPolicy
from redline.fleet.process import Stopping, log, while_reachable
from redline.fleet.work import ensure_group, register_platform, registration
from redline.store.results import Store
from redline.system import machine

INLINE_LIMIT = 512 * 1024        # results documents larger than this go by reference (keys.BLOB)
READ_BLOCK_MS = 2000


class Agent:
    def __init__(self, client: redis.Redis, *, platform: str, name: str, store: Store, claim_idle_s: float,
                 heartbeat_s: float, max_attempts: int, stopping: Stopping, executor=None,
                 policy: TargetPolicy | None = None):
        self.client, self.platform, self.name, self.store = client, platform, name, store
        self.policy = policy or TargetPolicy([])
        self.claim_idle_ms = int(claim_idle_s * 1000)
        self.heartbeat_s, self.max_attempts, self.stopping = heartbeat_s, max_attempts, stopping
        self.stream = keys.JOBS.key(platform=platform)
        self.agent_key = keys.AGENT.key(platform=platform, agent=name)
        self.current: tuple[str, str] | None = None          # (entry id, job id) being run
        self.claim_cursor = "0-0"
        self._lock = threading.Lock()
        # what runs a job: the engine (scripts/fleet_benchmark.py passes a stand-in to time the coordination alone)
        self.executor = executor or Executor(store, LogObserver(self.say))

    def say(self, event: str, **fields) -> None:
        log(f"agent {self.platform}/{self.name}", event, **fields)

    # -- the loop -----------------------------------------------------------------------------
    def serve(self) -> None:
        ensure_group(self.client, self.stream, keys.AGENTS_GROUP)
        register_platform(self.client, self.platform)
        session_id = self.store.begin_session(kind="agent", argv=["agent", self.platform, self.name],
                                              machine=machine.facts())
        beating = threading.Thread(target=self._heartbeat_loop, name="heartbeat", daemon=True)
        beating.start()
        self.say("started", stream=self.stream, claim_idle=f"{self.claim_idle_ms / 1000:g}s",
                 allowed=self.policy.describe())
        try:
            while not self.stopping.requested:
                entry = while_reachable(self.stopping, self.say, lambda: self._claim_abandoned() or self._read_new(),
                                        during="reading jobs")
                if entry:
                    self._handle_safely(*entry, session_id=session_id)
        finally:
            self.store.finish_session(session_id, "finished")
            self._leave()
            self.say("stopped")

    def _claim_abandoned(self) -> tuple[str, dict, int] | None:
        """One entry idle past --claim-idle, if any. XAUTOCLAIM looks at a bounded stretch of the
        pending entries per call; the cursor walks the whole list over successive calls."""
        self.claim_cursor, claimed, *_ = self.client.xautoclaim(
            self.stream, keys.AGENTS_GROUP, self.name, min_idle_time=self.claim_idle_ms, start_id=self.claim_cursor,
            count=1)
        for entry_id, fields in claimed:
            if not fields:            # deleted while pending: nothing to run
                self.client.xack(self.stream, keys.AGENTS_GROUP, entry_id)
                continue
            pending = self.client.xpending_range(self.stream, keys.AGENTS_GROUP, entry_id, entry_id, 1)
            deliveries = pending[0]["times_delivered"] if pending else 1
            self.say("claimed abandoned job", job=fields.get("job_id"), entry=entry_id, deliveries=deliveries)
            return entry_id, fields, deliveries
        return None

    def _read_new(self) -> tuple[str, dict, int] | None:
        answer = self.client.xreadgroup(keys.AGENTS_GROUP, self.name, {self.stream: ">"}, count=1,
                                        block=READ_BLOCK_MS)
        for _, batch in answer or []:
            for entry_id, fields in batch:
                return entry_id, fields, 1
        return None

    # -- one job ------------------------------------------------------------------------------
    def _handle_safely(self, entry_id: str, fields: dict, deliveries: int, *, session_id: int) -> None:
        """One entry; whatever it holds, it cannot stop the agent: an entry it cannot handle is
        dead-lettered with the reason (a lost Redis or a stop request still end the loop)."""
        try:
            self._handle(entry_id, fields, deliveries, session_id=session_id)
        except (redis.ConnectionError, redis.TimeoutError, RunError, KeyboardInterrupt):
            raise
        except Exception as exc:        # noqa: BLE001 — an agent bug on one entry is that entry's dead letter
            where = traceback.extract_tb(exc.__traceback__)[-1].name
            self._dead(entry_id, fields, deliveries, f"the agent could not handle this entry: "
                                                     f"{type(exc).__name__}: {exc} ({where})")

    def _handle(self, entry_id: str, fields: dict, deliveries: int, *, session_id: int) -> None:
        try:
            entry = entries.job_entry(fields)
        except entries.Malformed as exc:
            return self._dead(entry_id, fields, deliveries, f"malformed job entry: {exc}")
        try:
            self.policy.check(entry.job)
        except Refused as exc:
            return self._dead(entry_id, fields, deliveries, f"refused: {exc}")
        job_id, job = entry.job_id, entry.job.to_json()
        attempt = entry.attempt + deliveries - 1    # earlier deliveries died with their agent
        if attempt > self.max_attempts:
            return self._dead(entry_id, fields, attempt - 1,
                              f"delivered {attempt - 1} times, each time its agent stopped before an outcome")
        started_at = time.time()
        self._set_current(entry_id, job_id)
        while_reachable(self.stopping, self.say, lambda: self.client.hsetnx(
            keys.WORK.key(work_id=entry.work_id), "started_at", repr(started_at)), during="starting a job")
        self.say("job started", job=job_id, test=job.get("test"), attempt=attempt)
        try:
            with self.stopping.interruptible():
                runs = self.executor.execute(job, session_id=session_id)
        except KeyboardInterrupt:
            self._set_current(None, None)
            return self._requeue(entry_id, fields, "the agent was stopped (SIGTERM) during the job")
        except JobRefused as exc:
            error = str(exc)
        except (RunError, UsageError, OSError) as exc:
            error = str(exc) or type(exc).__name__
        except Exception as exc:        # an engine bug must not take the agent down: it is the job's error
            error = f"{type(exc).__name__}: {exc} ({traceback.extract_tb(exc.__traceback__)[-1].name})"
        else:
            # a profiled run that failed (perf refused) does not fail the job: the measured runs stand
            failed = [r for r in runs if r.get("status") in ("failed", "interrupted")
                      and r.get("purpose", "measure") == "measure"]
            error = (f"{len(failed)} of {len(runs)} runs failed: {failed[0].get('error')}" if failed else None)
        finally:
            self._set_current(None, None)
        if error is None:
            return self._publish(entry_id, fields, attempt, runs, started_at)
        if attempt >= self.max_attempts:
            return self._dead(entry_id, fields, attempt, error)
        self._retry(entry_id, fields, attempt, error)

    def _set_current(self, entry_id: str | None, job_id: str | None) -> None:
        with self._lock:
            self.current = (entry_id, job_id) if entry_id else None
        try:
            self._beat()
        except redis.RedisError as exc:        # the heartbeat thread tries again
            self.say("heartbeat failed", error=exc)

    def _result_fields(self, fields: dict, attempt: int, kind: str, started_at: float | None) -> dict:
        return {"kind": kind, "job_id": fields.get("job_id", ""), "work_id": fields.get("work_id", ""),
                "platform": self.platform, "agent": self.name, "attempt": str(attempt),
                "submitted_at": fields.get("submitted_at", ""), "started_at": repr(started_at or 0.0),
                "finished_at": repr(time.time())}

    def _publish(self, entry_id: str, fields: dict, attempt: int, runs: list[dict], started_at: float) -> None:
        result = self._result_fields(fields, attempt, "result", started_at)
        payload = json.dumps(runs)
        blob = None
        if len(payload) > INLINE_LIMIT:          # by reference, never truncated
            digest = hashlib.sha256(payload.encode()).hexdigest()
            blob = keys.BLOB.key(sha256=digest)
            result.update(runs_ref=blob, runs_sha256=digest)
        else:
            result["runs"] = payload

        def commands(tx):
            if blob:
                tx.set(blob, payload)
            tx.xadd(keys.RESULTS.key(), result)
            self._finish_entry(tx, entry_id)
        self._transact(commands, during="publishing a result")
        self.say("job done", job=fields.get("job_id"), runs=len(runs), seconds=f"{time.time() - started_at:.1f}")

    def _retry(self, entry_id: str, fields: dict, attempt: int, error: str) -> None:
        def commands(tx):
            tx.xadd(self.stream, {**fields, "attempt": str(attempt + 1), "last_error": error})
            self._finish_entry(tx, entry_id)
        self._transact(commands, during="queueing a failed job again")
        self.say("job failed, queued again", job=fields.get("job_id"), attempt=attempt, error=error)

    def _requeue(self, entry_id: str, fields: dict, reason: str) -> None:
        """Back on the stream as it was (the same attempt): stopping an agent is not the job's fault."""
        def commands(tx):
            tx.xadd(self.stream, {**fields, "last_error": reason})
            self._finish_entry(tx, entry_id)
        self._transact(commands, during="giving a job back")
        self.say("job given back", job=fields.get("job_id"), reason=reason)

    def _dead(self, entry_id: str, fields: dict, attempts: int, error: str) -> None:
        """To the dead-letter stream with the reason; its work item learns it through a `dead`
        result (when the entry names a job and a work item at all)."""
        error = error[:entries.ERROR_LIMIT]
        named = all(entries.IDENTIFIER.match(str(fields.get(name, ""))) for name in ("job_id", "work_id"))

        def commands(tx):
            tx.xadd(keys.DEAD.key(), {"job_id": str(fields.get("job_id", ""))[:200],
                                      "work_id": str(fields.get("work_id", ""))[:200],
                                      "platform": self.platform, "agent": self.name, "attempts": str(attempts),
                                      "error": error, "job": str(fields.get("job", ""))[:entries.ERROR_LIMIT]})
            if named:
                tx.xadd(keys.RESULTS.key(), {**self._result_fields(fields, attempts, "dead", None), "error": error})
            self._finish_entry(tx, entry_id)
        self._transact(commands, during="dead-lettering a job")
        self.say("job dead-lettered", job=fields.get("job_id"), attempts=attempts, error=error)

    def _transact(self, commands, *, during: str) -> None:
        """`commands(tx)` queued and executed as one MULTI/EXEC, again while Redis is away."""
        def attempt():
            with self.client.pipeline(transaction=True) as tx:
                commands(tx)
                tx.execute()
        while_reachable(self.stopping, self.say, attempt, during=during)

    def _finish_entry(self, tx, entry_id: str) -> None:
        tx.xack(self.stream, keys.AGENTS_GROUP, entry_id)
        tx.xdel(self.stream, entry_id)

    # -- liveness -----------------------------------------------------------------------------
    def _beat(self) -> None:
        with self._lock:
            current = self.current
        now = repr(time.time())
        if current and not self.client.xpending_range(self.stream, keys.AGENTS_GROUP, current[0], current[0], 1,
                                                      consumername=self.name):
            current = None     # taken over while this agent was frozen: its heartbeat must not take it back
        with self.client.pipeline(transaction=True) as tx:
            tx.hset(self.agent_key, mapping={"agent": self.name, "platform": self.platform,
                                             "host": host_platform.node(), "pid": str(os.getpid()),
                                             "job_id": current[1] if current else "", "heartbeat_at": now})
            if current:
                tx.hsetnx(self.agent_key, "job_started_at", now)
            else:
                tx.hdel(self.agent_key, "job_started_at")
            tx.expire(self.agent_key, max(1, int(self.heartbeat_s * 3)))
            registration(tx, self.platform)
            if current:      # resets the entry's idle time: XAUTOCLAIM leaves a live agent's job alone
                tx.xclaim(self.stream, keys.AGENTS_GROUP, self.name, 0, [current[0]], justid=True)
            tx.execute()

    def _heartbeat_loop(self) -> None:
        while not self.stopping.event.wait(self.heartbeat_s):
            try:
                self._beat()
            except redis.RedisError as exc:
                self.say("heartbeat failed", error=exc)

    def _leave(self) -> None:
        try:
            self.client.delete(self.agent_key)
            pending = self.client.xpending_range(self.stream, keys.AGENTS_GROUP, "-", "+", 1, consumername=self.name)
            if not pending:
                self.client.xgroup_delconsumer(self.stream, keys.AGENTS_GROUP, self.name)
        except redis.RedisError as exc:
            self.say("could not deregister", error=exc)
