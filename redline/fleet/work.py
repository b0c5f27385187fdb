"""A work item and its jobs: what `redline submit` and the webhook enqueue.

A work item is one request (a push, a labelled pull request, a `submit`): a baseline, a
comparison, and the selected tests. It becomes one job per test × topology × platform; a job
runs both sides of one test interleaved on one machine, so every A/B pair is measured under the
same conditions (a fleet bisection's counted step has one side: the commit counted alone,
redline.fleet.bisection). The whole item is enqueued in one MULTI/EXEC transaction: either every
job is queued or none is.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

import redis

from redline.analysis.comparison import FDR_Q
from redline.core.errors import RunError, UsageError
from redline.engine.job import Job, SideSpec, suite_reference
from redline.fleet import keys

PLATFORM_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
BRANCH = re.compile(r"^(?!.*\.\.)[A-Za-z0-9_][A-Za-z0-9_./+-]{0,199}$")    # a push's branch in a work hash


@dataclass
class Settings:
    runs: int = 7
    max_runs: int = 15
    duration_s: float | None = None
    warmup_s: float = 2.0
    scale: float | None = None
    profile: bool = False
    snapshots: bool = True
    # "time" or "instructions" (the servers under callgrind, redline.instructions); None: each test's
    # own `redline: measure`, else time
    measure: str | None = None
    window_instructions: int | None = None       # counted: the window's size (None: the default)
    # counted: the request count per connection each test's jobs send (test name → count), fixed by
    # the submitter (a fleet bisection carries its confirmation's to every commit it counts)
    window_requests: dict[str, int] = field(default_factory=dict)


@dataclass
class WorkItem:
    work_id: str
    source: str                              # cli | push | pull_request
    sides: list[SideSpec]                    # baseline and comparison
    platforms: list[str]
    tests: list[tuple[str, str]]             # (suite reference, test name)
    topologies: list[str]
    settings: Settings
    github: str = ""                         # owner/repo#number for the comment, when from a pull request
    created_at: float = field(default_factory=time.time)
    bisection: str = ""                      # the fleet bisection this item is a step of (redline.fleet.bisection)
    step_rule: dict | None = None            # a bisection step's rule, carried by each of its jobs
    branch: str = ""                         # the branch a push went to: the fleet's history of it (closed loop)

    def job_documents(self) -> list[tuple[str, dict]]:
        """(platform, job document) for every test × topology × platform. The document is the
        job as data (redline.engine.job's format): what an agent needs to run it anywhere."""
        lone_p_value = FDR_Q / (max(1, len(self.tests) * len(self.topologies) * len(self.platforms))
                                * compared_metric_count())
        settings = {"runs": self.settings.runs, "duration_s": self.settings.duration_s,
                    "warmup_s": self.settings.warmup_s, "scale": self.settings.scale,
                    "profile": self.settings.profile, "snapshots": self.settings.snapshots}
        settings.update({name: getattr(self.settings, name) for name in ("measure", "window_instructions")
                         if getattr(self.settings, name) is not None})
        documents = []
        for platform in self.platforms:
            number = 0
            for suite, test in self.tests:
                for topology in self.topologies:
                    number += 1
                    fixed = self.settings.window_requests.get(test)
                    job = Job(suite=suite, test=test, sides=list(self.sides), topology=topology,
                              settings={**settings, **({"window_requests": fixed} if fixed else {})},
                              max_runs=self.settings.max_runs, lone_p_value=lone_p_value,
                              job_id=f"{self.work_id}:{platform}:{number}", step_rule=self.step_rule)
                    documents.append((platform, job.to_json()))
        return documents

    def summary(self, jobs_total: int) -> dict[str, str]:
        """The work hash's first fields (keys.WORK)."""
        label = {side.name: side.target for side in self.sides}
        return {"work_id": self.work_id, "created_at": repr(self.created_at), "source": self.source,
                "baseline": label.get("baseline", ""), "comparison": label.get("comparison", label.get(None, "")),
                "platforms": json.dumps(self.platforms), "jobs_total": str(jobs_total),
                "jobs_done": "0", "jobs_dead": "0", "state": "queued", "github": self.github,
                "runs": str(self.settings.runs), "max_runs": str(self.settings.max_runs),
                "sides": json.dumps([side.to_json() for side in self.sides]),
                "settings": json.dumps(asdict(self.settings)), "bisection": self.bisection,
                "branch": self.branch}


def new_work(client: redis.Redis, *, source: str, sides: list[SideSpec], platforms: list[str] | None, tests: list,
             topologies: list[str] | None, settings: Settings, github: str = "", branch: str = "") -> WorkItem:
    """A work item over `tests` (TestSpecs) on the platforms named, else every live one; a platform
    no agent registered recently is refused (a mistyped name would hold the work item open forever)."""
    live = live_platforms(client)
    unknown = sorted(set(platforms or []) - set(live))
    if unknown:
        raise UsageError(f"no agent of platform {', '.join(map(repr, unknown))} registered in the last "
                         f"{PLATFORM_TTL_S // 60} minutes (live: {', '.join(live) or 'none'})")
    platforms = sorted(set(platforms or live))
    if not platforms:
        raise UsageError(f"no agent registered with this Redis in the last {PLATFORM_TTL_S // 60} minutes: "
                         "start one (redline agent, or redline fleet local) first")
    return WorkItem(work_id=new_work_id(), source=source, sides=sides, platforms=platforms,
                    tests=[(suite_reference(t.path), t.name) for t in tests],
                    topologies=topologies or ["oss-standalone"], settings=settings, github=github,
                    branch=branch)


def suite_of(run) -> str:
    """How a job names the suite of a stored run (its suite file as the agent saw it)."""
    return suite_reference(Path(run.suite_file))


def compared_metric_count() -> int:
    from redline.analysis.comparison import COMPARED_METRICS
    return len(COMPARED_METRICS)


def new_work_id() -> str:
    """Sortable by time, unique across submitters."""
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-" + uuid.uuid4().hex[:8]


def ensure_group(client: redis.Redis, stream: str, group: str) -> None:
    """The consumer group on `stream`, created with the stream if missing, reading from its first
    entry (so nothing added before the group existed is skipped)."""
    try:
        client.xgroup_create(stream, group, id="0", mkstream=True)
    except redis.ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise


PLATFORM_TTL_S = 600        # a platform takes work while an agent of it registered this recently


def registration(tx, platform: str) -> None:
    """Queued on a pipeline: the platform is live for PLATFORM_TTL_S more (every agent heartbeat)."""
    tx.sadd(keys.PLATFORMS.key(), platform)
    tx.set(keys.PLATFORM.key(platform=platform), repr(time.time()), ex=PLATFORM_TTL_S)


def register_platform(client: redis.Redis, platform: str) -> None:
    with client.pipeline(transaction=True) as tx:
        registration(tx, platform)
        tx.execute()


def live_platforms(client: redis.Redis) -> list[str]:
    """The platforms an agent registered in the last PLATFORM_TTL_S."""
    names = sorted(client.smembers(keys.PLATFORMS.key()))
    with client.pipeline(transaction=False) as pipe:
        for name in names:
            pipe.exists(keys.PLATFORM.key(platform=name))
        alive = pipe.execute()
    return [name for name, live in zip(names, alive) if live]


def enqueue(client: redis.Redis, work: WorkItem) -> int:
    """Every job of the work item onto its platform's jobs stream, with the work hash, in one
    transaction. Returns the number of jobs."""
    documents = work.job_documents()
    if not documents:
        raise UsageError("the work item has no jobs (no test, topology or platform selected)")
    for platform in work.platforms:
        ensure_group(client, keys.JOBS.key(platform=platform), keys.AGENTS_GROUP)
    submitted_at = repr(time.time())
    try:
        with client.pipeline(transaction=True) as tx:
            tx.hset(keys.WORK.key(work_id=work.work_id), mapping=work.summary(len(documents)))
            tx.zadd(keys.WORKS.key(), {work.work_id: work.created_at})
            for platform, document in documents:
                tx.xadd(keys.JOBS.key(platform=platform),
                        {"job_id": document["job_id"], "work_id": work.work_id, "attempt": "1",
                         "submitted_at": submitted_at, "job": json.dumps(document)})
            tx.execute()
    except redis.RedisError as exc:
        raise RunError(f"enqueueing work item {work.work_id}: {exc} (nothing was queued)") from exc
    return len(documents)
