"""The agent's claiming of abandoned jobs against a real redis-server: an abandoned entry behind
many entries of live agents is still found (XAUTOCLAIM's cursor walks the whole pending list)."""

from __future__ import annotations

import time

from redline.fleet import keys
from redline.fleet.agent import Agent
from redline.fleet.process import Stopping
from redline.fleet.work import ensure_group
from redline.store.results import Store
from tests.fleet_helpers import client, redis_with_aof

LIVE = 20          # XAUTOCLAIM looks at 10 × COUNT pending entries per call


def test_an_abandoned_job_behind_many_running_ones_is_claimed(tmp_path):
    with redis_with_aof(tmp_path / "aof") as url:
        r = client(url)
        stream = keys.JOBS.key(platform="p")
        ensure_group(r, stream, keys.AGENTS_GROUP)
        ids = [r.xadd(stream, {"job_id": f"j{n}", "work_id": "w", "attempt": "1", "job": "{}"}) for n in range(LIVE + 1)]
        r.xreadgroup(keys.AGENTS_GROUP, "live", {stream: ">"}, count=LIVE + 1)
        time.sleep(2.5)                                   # every entry idle now …
        r.xclaim(stream, keys.AGENTS_GROUP, "live", 0, ids[:LIVE], justid=True)   # … but the live agent's
        agent = Agent(r, platform="p", name="taker", store=Store(tmp_path / "agent.db"), claim_idle_s=2.0,
                      heartbeat_s=0.5, max_attempts=3, stopping=Stopping())
        claimed = []
        for _ in range(LIVE + 5):
            found = agent._claim_abandoned()
            if found:
                claimed.append(found[0])
            if ids[LIVE] in claimed:
                break
        assert ids[LIVE] in claimed
        (pending,) = r.xpending_range(stream, keys.AGENTS_GROUP, ids[LIVE], ids[LIVE], 1)
        assert pending["consumer"] == "taker" and pending["times_delivered"] == 2


class ProfileRefused:
    """A stand-in executor: the job's measured runs ok, its profiled runs failed (perf refused)."""

    def execute(self, document: dict, *, session_id: int) -> list[dict]:
        from redline.core.run import Run
        runs = [Run(test=document["test"], target=side["target"], side=side["name"], run_index=index, status="ok",
                    metrics={"ops_per_sec": 1000.0}) for index in range(2) for side in document["sides"]]
        for side in document["sides"]:
            run = Run(test=document["test"], target=side["target"], side=side["name"], run_index=2, purpose="profile")
            run.finish("failed", error="perf: not permitted (perf_event_paranoid)")
            runs.append(run)
        return [run.to_json() for run in runs]


def test_a_failed_profiled_run_does_not_fail_the_job(tmp_path):
    """The measured runs stand: the job's result is published once (no retry), its profiled runs with their error."""
    import json
    import shutil

    from redline.engine.job import SideSpec
    from redline.fleet import work
    from redline.suites import load_test
    from redline.suites.discovery import builtin_suites_dir
    server = f"bin:{shutil.which('redis-server')}"
    with redis_with_aof(tmp_path / "aof") as url:
        r = client(url)
        work.register_platform(r, "p")
        item = work.new_work(r, source="cli", sides=[SideSpec("baseline", server), SideSpec("comparison", server)],
                             platforms=["p"], tests=[load_test(builtin_suites_dir() / "quick" / "set-sadd.yml")],
                             topologies=None, settings=work.Settings(runs=2, max_runs=2, profile=True))
        work.enqueue(r, item)
        store = Store(tmp_path / "agent.db")
        agent = Agent(r, platform="p", name="profiler", store=store, claim_idle_s=60, heartbeat_s=5, max_attempts=3,
                      stopping=Stopping(), executor=ProfileRefused())
        entry = agent._read_new()
        agent._handle(*entry, session_id=store.begin_session(kind="agent", argv=["agent"], machine={}))
        (_, fields), = r.xrange(keys.RESULTS.key())
        assert fields["kind"] == "result" and fields["attempt"] == "1"
        documents = json.loads(fields["runs"])
        assert [d["status"] for d in documents if d["purpose"] == "profile"] == ["failed", "failed"]
        assert r.xlen(keys.JOBS.key(platform="p")) == 0                      # not queued again
