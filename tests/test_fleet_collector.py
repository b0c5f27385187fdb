"""`redline collector` against results written as an agent writes them (the test plays the agent):
a job published twice is stored once; a result too large to go inline goes by reference and is
stored whole; a reference whose sha256 does not match is a dead job, not a stored one.
Real redis-server (AOF), real collector process, real SQLite."""

from __future__ import annotations

import hashlib
import http.server
import json
import threading
import time

import pytest

from redline.fleet import keys, work
from redline.fleet.agent import INLINE_LIMIT
from redline.engine.job import SideSpec
from redline.core.run import Run
from redline.suites import load_test
from redline.suites.discovery import builtin_suites_dir
from tests.fleet_helpers import client, query, redis_with_aof, redline_process, stop, wait_for

SIDES = [SideSpec("baseline", "bin:/usr/bin/redis-server"), SideSpec("comparison", "bin:/usr/bin/redis-server")]


@pytest.fixture
def collector(tmp_path):
    with redis_with_aof(tmp_path / "aof") as url:
        store, log = tmp_path / "fleet.db", tmp_path / "collector.log"
        process = redline_process("collector", "--redis", url, "--store", store, log=log)
        yield client(url), store, log
        assert stop(process) == 0


def one_job_work(r, github: str = "") -> tuple[str, str]:
    test = load_test(builtin_suites_dir() / "quick" / "set-sadd.yml")
    item = work.new_work(r, source="cli", sides=SIDES, platforms=["p"], tests=[test], topologies=None,
                         settings=work.Settings(runs=2, max_runs=2), github=github)
    work.enqueue(r, item)
    return item.work_id, item.job_documents()[0][1]["job_id"]


def runs(series_length: int = 3) -> list[dict]:
    return [Run(test="quick-set-sadd", target="bin:/usr/bin/redis-server", side=side, run_index=index, status="ok",
                metrics={"ops_per_sec": 1000.0 + index}, series={"ops": [1.0] * series_length}).to_json()
            for side in ("baseline", "comparison") for index in range(2)]


def result(work_id: str, job_id: str, **fields) -> dict:
    return {"kind": "result", "job_id": job_id, "work_id": work_id, "platform": "p", "agent": "test", "attempt": "1",
            "submitted_at": repr(time.time()), "started_at": repr(time.time()), "finished_at": repr(time.time()),
            **fields}


def done(r, work_id):
    return r.hget(keys.WORK.key(work_id=work_id), "state") in ("done", "failed")


def test_a_job_published_twice_is_stored_once(collector):
    r, store, log = collector
    work_id, job_id = one_job_work(r)
    r.xadd(keys.RESULTS.key(), result(work_id, job_id, runs=json.dumps(runs())))
    r.xadd(keys.RESULTS.key(), result(work_id, job_id, runs=json.dumps(runs()), agent="second"))   # a re-run
    wait_for(lambda: r.xlen(keys.RESULTS.key()) == 0 and done(r, work_id), "both results handled")
    assert query(store, "SELECT count(*) FROM runs")[0][0] == 4
    assert query(store, "SELECT agent FROM fleet_jobs WHERE job_id=?", job_id) == [("test",)]
    assert "duplicate result ignored" in log.read_text()
    assert r.xlen(keys.COMMENTS.key()) == 1


def test_a_large_result_goes_by_reference_and_is_stored_whole(collector):
    r, store, log = collector
    work_id, job_id = one_job_work(r)
    documents = runs(series_length=60_000)
    payload = json.dumps(documents)
    assert len(payload) > INLINE_LIMIT
    digest = hashlib.sha256(payload.encode()).hexdigest()
    blob = keys.BLOB.key(sha256=digest)
    r.set(blob, payload)
    r.xadd(keys.RESULTS.key(), result(work_id, job_id, runs_ref=blob, runs_sha256=digest))
    wait_for(lambda: done(r, work_id), "the result stored")
    assert query(store, "SELECT count(*) FROM series WHERE name='ops'")[0][0] == 4 * 60_000
    assert not r.exists(blob)


def test_a_reference_that_does_not_match_its_sha256_is_a_dead_job(collector):
    r, store, log = collector
    work_id, job_id = one_job_work(r)
    blob = keys.BLOB.key(sha256="0" * 64)
    r.set(blob, json.dumps(runs()))
    r.xadd(keys.RESULTS.key(), result(work_id, job_id, runs_ref=blob, runs_sha256="0" * 64))
    wait_for(lambda: done(r, work_id), "the result handled")
    assert query(store, "SELECT status, error FROM fleet_jobs") == [("dead", f"results blob {blob} does not match its sha256")]
    assert query(store, "SELECT count(*) FROM runs")[0][0] == 0
    assert r.hget(keys.WORK.key(work_id=work_id), "state") == "failed"


class FakeGitHubRecorder(http.server.BaseHTTPRequestHandler):
    """A loopback HTTP endpoint standing in for api.github.com: records each request, answers 201."""

    received: list[tuple[str, str, dict]] = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.received.append((self.path, self.headers["Authorization"], body))
        answer = json.dumps({"html_url": "https://example.invalid/comment/1"}).encode()
        self.send_response(201)
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


def test_the_comment_of_a_pull_request_is_posted_with_the_token(tmp_path):
    github = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeGitHubRecorder)
    threading.Thread(target=github.serve_forever, daemon=True).start()
    token = tmp_path / "token"
    token.write_text("t0ken\n")
    with redis_with_aof(tmp_path / "aof") as url:
        process = redline_process("collector", "--redis", url, "--store", tmp_path / "fleet.db",
                                  "--github-token-file", token, "--github-api", f"http://127.0.0.1:{github.server_port}",
                                  log=tmp_path / "collector.log")
        try:
            r = client(url)
            work_id, job_id = one_job_work(r, github="redis/redis#7")
            r.xadd(keys.RESULTS.key(), result(work_id, job_id, runs=json.dumps(runs())))
            wait_for(lambda: FakeGitHubRecorder.received, "the comment to be posted")
            (path, authorization, body), = FakeGitHubRecorder.received
            assert path == "/repos/redis/redis/issues/7/comments" and authorization == "Bearer t0ken"
            assert body["body"] == query(tmp_path / "fleet.db", "SELECT comment FROM fleet_work")[0][0]
            assert "comment posted" in (tmp_path / "collector.log").read_text()
        finally:
            assert stop(process) == 0
            github.shutdown()
