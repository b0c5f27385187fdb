"""The fleet's delivery guarantees with real parts: `redline fleet local` (a redis-server with AOF,
a collector, agents as subprocesses), real jobs measuring Debian's redis-server, the real SQLite
store. Every wait is on a condition with a generous bound; nothing asserts a duration."""

from __future__ import annotations

import json
import os
import signal

import pytest

from redline.fleet import keys
from redline.fleet.local import start_redis
from redline.server.process import free_port
from tests.fleet_helpers import (QUICK, SERVER, assert_every_job_once, client, finished, fleet_local, query, redis_arguments,
                                 redline, redline_process, stop, stop_an_agent_mid_job, submit, wait_for)

TESTS = ("quick-string-get-100B-pipeline-1", "quick-set-sadd", "quick-hash-hset-100B")
THREE_TESTS = ["--name", "string-get-100B-pipeline-1$|set-sadd|hash-hset"]
PLATFORM = "ci"


@pytest.fixture
def fleet(tmp_path):
    """`redline fleet local --agents 2`: (redis URL, store path, process, log path)."""
    store, log = tmp_path / "fleet.db", tmp_path / "fleet.log"
    process, url = fleet_local("--agents", 2, "--store", store, "--platform", PLATFORM, "--claim-idle", "5s",
                               "--max-attempts", 2, "--dir", tmp_path / "redis", log=log)
    assert url.startswith("redis://127.0.0.1:")
    r = client(url)
    wait_for(lambda: len(list(r.scan_iter(match=keys.AGENT.key(platform=PLATFORM, agent="*")))) == 2,
             "both agents' heartbeats")
    yield url, store, process, log
    assert stop(process) == 0
    assert "fleet local: stopped" in log.read_text()


KILLS = 3


def test_sigkilled_agents_every_job_stored_once_with_verdicts_and_comment(fleet):
    """Three agents SIGKILLed in the middle of three different jobs of one work item (fleet local
    starts a new agent each time): every job stored once, re-run by another agent."""
    url, store, process, log = fleet
    r = client(url)
    work = submit(url, "--baseline", SERVER, "--comparison", SERVER, *THREE_TESTS, *QUICK)
    assert work["jobs"] == 3
    victims = []
    for _ in range(KILLS):
        victim = wait_for(lambda: stop_an_agent_mid_job(r, PLATFORM, {v["job_id"] for v in victims}),
                          "an agent in the middle of a job not killed before")
        os.kill(int(victim["pid"]), signal.SIGKILL)
        victims.append(victim)

    state = wait_for(lambda: finished(url, work["work_id"]), "the work item to finish")
    assert state == {**state, "state": "done", "jobs_total": 3, "jobs_done": 3, "jobs_dead": 0}
    assert_every_job_once(store, work["work_id"], jobs=3, runs_per_side=2)
    for victim in victims:     # each killed job was run again, by another agent, after the idle timeout
        (agent, attempt), = query(store, "SELECT agent, attempt FROM fleet_jobs WHERE job_id=?", victim["job_id"])
        assert agent != victim["agent"] and attempt == 2
    text = log.read_text()
    assert text.count("claimed abandoned job") >= KILLS and text.count("exited, started again") >= KILLS
    # verdicts (FDR over the work item) and the comment, in the store and on the comments stream
    session, comment = query(store, "SELECT session_id, comment FROM fleet_work WHERE work_id=?", work["work_id"])[0]
    verdicts = query(store, "SELECT test, metric, detail FROM comparisons WHERE session_id=?", session)
    assert {test for test, _, _ in verdicts} == set(TESTS)
    assert all(json.loads(detail)["comparisons_in_session"] >= 1 for _, _, detail in verdicts)
    assert all(test in comment for test in TESTS)
    published = [f for _, f in r.xrange(keys.COMMENTS.key()) if f["work_id"] == work["work_id"]]
    assert len(published) == 1 and published[0]["markdown"] == comment and published[0]["state"] == "done"
    # every stream holds only what is not stored yet
    assert r.xlen(keys.RESULTS.key()) == 0 and r.xlen(keys.JOBS.key(platform=PLATFORM)) == 0


def test_a_job_that_always_fails_is_retried_then_dead_lettered_and_other_work_goes_on(fleet):
    url, store, process, log = fleet
    broken = submit(url, "--baseline", SERVER, "--comparison", SERVER, "--comparison-config",
                    "maxmemory-policy=no-such-policy", "--name", "set-sadd", *QUICK)
    fine = submit(url, "--baseline", SERVER, "--comparison", SERVER, "--name", "string-get-100B-pipeline-1$", *QUICK)

    state = wait_for(lambda: finished(url, broken["work_id"]), "the broken work item to end")
    assert state == {**state, "state": "failed", "jobs_total": 1, "jobs_done": 0, "jobs_dead": 1}
    status = json.loads(redline("fleet", "status", *redis_arguments(url), "--json").stdout)
    dead = [d for d in status["dead_letters"] if d["work_id"] == broken["work_id"]]
    assert len(dead) == 1 and dead[0]["attempts"] == "2" and "failed" in dead[0]["error"]
    assert "job failed, queued again" in log.read_text()
    comment, = query(store, "SELECT comment FROM fleet_work WHERE work_id=?", broken["work_id"])[0]
    assert "failed on every attempt" in comment and dead[0]["job_id"] in comment

    wait_for(lambda: finished(url, fine["work_id"]), "the other work item")
    assert_every_job_once(store, fine["work_id"], jobs=1, runs_per_side=2)
    text = redline("fleet", "status", *redis_arguments(url)).stdout
    assert "dead letters: 1" in text and dead[0]["job_id"] in text


def test_a_live_agents_job_longer_than_the_claim_timeout_stays_with_it(fleet):
    """The heartbeat resets the job's idle time: a job lasting longer than --claim-idle (5 s) is
    never taken over while its agent lives."""
    url, store, process, log = fleet
    work = submit(url, "--baseline", SERVER, "--comparison", SERVER, "--name", "set-sadd", "--runs", 2,
                  "--max-runs", 2, "--duration", "3s", "--warmup", "0s")
    wait_for(lambda: finished(url, work["work_id"]), "the job")
    (attempt, started, stored), = query(store, "SELECT attempt, started_at, stored_at FROM fleet_jobs")
    assert stored - started > 5 * 2, "the job did not outlast the claim timeout: this test would show nothing"
    assert attempt == 1 and "claimed abandoned job" not in log.read_text()
    assert_every_job_once(store, work["work_id"], jobs=1, runs_per_side=2)


def test_collector_and_redis_restarted_mid_work_lose_nothing(tmp_path):
    port, aof = free_port(), tmp_path / "aof"
    aof.mkdir()
    server = start_redis(port, aof)
    url = f"redis://127.0.0.1:{port}/0"
    store, log = tmp_path / "fleet.db", tmp_path / "fleet.log"
    agent = redline_process("agent", "--redis", url, "--platform", PLATFORM, "--claim-idle", "5s",
                            "--store", tmp_path / "agent.db", log=log)
    collector = redline_process("collector", "--redis", url, "--store", store, log=log)
    try:
        wait_for(lambda: client(url).sismember(keys.PLATFORMS.key(), PLATFORM), "the agent to register")
        work = submit(url, "--baseline", SERVER, "--comparison", SERVER,
                      "--name", "string-get-100B-pipeline-1$|set-sadd|hash-hset", *QUICK)
        assert work["jobs"] == 3
        wait_for(lambda: store.exists() and query(store, "SELECT count(*) FROM sqlite_master WHERE name='fleet_jobs'")[0][0]
                 and query(store, "SELECT count(*) FROM fleet_jobs")[0][0] >= 1, "the first job stored")
        collector.send_signal(signal.SIGKILL)
        collector.wait()
        server.terminate()                      # Redis restarts from its AOF while the agent works
        server.wait(timeout=120)
        server = start_redis(port, aof)
        collector = redline_process("collector", "--redis", url, "--store", store, log=log)
        state = wait_for(lambda: finished(url, work["work_id"]), "the work item to finish")
        assert state["state"] == "done" and state["jobs_done"] == 3
        assert_every_job_once(store, work["work_id"], jobs=3, runs_per_side=2)
    finally:
        for process in (agent, collector):
            assert stop(process) == 0
        server.terminate()
        server.wait(timeout=120)


def test_sigterm_stops_every_fleet_process_cleanly(fleet):
    url, store, process, log = fleet
    assert stop(process) == 0
    text = log.read_text()
    assert text.count(": stopped") >= 4             # two agents, the collector, fleet local itself
    with pytest.raises(Exception):
        client(url).ping()
