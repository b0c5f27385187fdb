"""`redline collector` against results written as an agent writes them (the test plays the agent):
a job published twice is stored once; a result too large to go inline goes by reference and is
stored whole; a reference whose sha256 does not match is a dead job, not a stored one.
Real redis-server (AOF), real collector process, real SQLite."""

from __future__ import annotations

import hashlib
import http.server
import json
import signal
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
    work.register_platform(r, "p")            # as its agent would
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


def github_server(routes):
    """A loopback HTTP server standing in for a GitHub host: `routes(method, path, body)` answers
    (status, headers, JSON); every request is recorded as (method, path, Authorization, body)."""
    seen: list[tuple[str, str, str | None, object]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def _answer(self, method):
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            seen.append((method, self.path, self.headers.get("Authorization"), body))
            status, headers, document = routes(method, self.path, body)
            payload = json.dumps(document).encode()
            self.send_response(status)
            for name, value in {**headers, "Content-Length": str(len(payload))}.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)

        def do_POST(self):
            self._answer("POST")

        def do_GET(self):
            self._answer("GET")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, seen


def collector_with_github(tmp_path, url, api: str):
    token = tmp_path / "token"
    token.write_text("t0ken\n")
    return redline_process("collector", "--redis", url, "--store", tmp_path / "fleet.db", "--github-token-file", token,
                           "--github-api", api, log=tmp_path / "collector.log")


def test_a_collector_killed_during_the_pull_request_comment_posts_it_once(tmp_path):
    """The comment is recorded before it is posted; a collector SIGKILLed while GitHub holds its
    POST finds the comment on the pull request after its restart and does not post it again."""
    posted: list[dict] = []
    release = threading.Event()

    def routes(method, path, body):
        if method == "POST":
            posted.append({"body": body["body"], "html_url": f"https://example.invalid/c/{len(posted) + 1}"})
            if len(posted) == 1:
                release.wait(600)          # the collector is killed while it waits for this answer
            return 201, {}, posted[-1]
        return 200, {}, posted              # GET: the pull request's comments
    github, seen = github_server(routes)
    try:
        with redis_with_aof(tmp_path / "aof") as url:
            r = client(url)
            api = f"http://127.0.0.1:{github.server_port}"
            process = collector_with_github(tmp_path, url, api)
            work_id, job_id = one_job_work(r, github="redis/redis#7")
            r.xadd(keys.RESULTS.key(), result(work_id, job_id, runs=json.dumps(runs())))
            wait_for(lambda: posted, "the comment's POST")
            process.send_signal(signal.SIGKILL)
            process.wait()
            release.set()
            process = collector_with_github(tmp_path, url, api)
            try:
                wait_for(lambda: done(r, work_id) and query(tmp_path / "fleet.db", "SELECT state FROM fleet_effects "
                                                            "WHERE kind='github'") == [("done",)], "the effect done")
            finally:
                assert stop(process) == 0
            assert len(posted) == 1, "the comment was posted twice"
            assert [method for method, *_ in seen] == ["POST", "GET"]
            assert "comment found posted before" in (tmp_path / "collector.log").read_text()
            assert [f["work_id"] for _, f in r.xrange(keys.COMMENTS.key())] == [work_id]
    finally:
        release.set()
        github.shutdown()


def test_a_renamed_repository_is_followed_and_another_host_never_gets_the_token(tmp_path):
    """GitHub answers a renamed repository's comment URL with a redirect to the same host: the
    collector POSTs there (once). A redirect to another host is not followed: that host never
    sees a request, the token stays home, and the collector goes on."""
    elsewhere, stolen = github_server(lambda method, path, body: (200, {}, []))

    def routes(method, path, body):
        if path == "/repos/old/name/issues/7/comments":
            return 301, {"Location": "/repositories/42/issues/7/comments"}, {}
        if path == "/repos/moved/away/issues/8/comments":
            return 302, {"Location": f"http://127.0.0.1:{elsewhere.server_port}/steal"}, {}
        if path == "/repositories/42/issues/7/comments" and method == "POST":
            return 201, {}, {"html_url": "https://example.invalid/renamed/1"}
        return 200, {}, []
    github, seen = github_server(routes)
    try:
        with redis_with_aof(tmp_path / "aof") as url:
            r = client(url)
            process = collector_with_github(tmp_path, url, f"http://127.0.0.1:{github.server_port}")
            try:
                items = [one_job_work(r, github=target) for target in ("old/name#7", "moved/away#8")]
                for work_id, job_id in items:
                    r.xadd(keys.RESULTS.key(), result(work_id, job_id, runs=json.dumps(runs())))
                wait_for(lambda: all(done(r, work_id) for work_id, _ in items) and len(query(
                    tmp_path / "fleet.db", "SELECT 1 FROM fleet_effects WHERE kind='github' AND state != 'pending'"))
                    == 2, "both comments handled")
                assert process.poll() is None
            finally:
                assert stop(process) == 0
        assert stolen == [], "another host was sent a request"
        posts = [(path, authorization) for method, path, authorization, _ in seen if method == "POST"]
        assert posts == [("/repos/old/name/issues/7/comments", "Bearer t0ken"),
                         ("/repositories/42/issues/7/comments", "Bearer t0ken"),
                         ("/repos/moved/away/issues/8/comments", "Bearer t0ken")]
        log = (tmp_path / "collector.log").read_text()
        assert "comment posted github=old/name#7 url=https://example.invalid/renamed/1" in log
        assert (f"comment not posted github=moved/away#8 error=GitHub redirected to another host "
                f"(127.0.0.1:{elsewhere.server_port}): not followed, the token is sent to "
                f"127.0.0.1:{github.server_port} only") in log
    finally:
        github.shutdown()
        elsewhere.shutdown()


def profiled_runs(frame: str) -> list[dict]:
    """The measured runs and one profiled run per side, whose profile carries stacks as an agent ships them."""
    profiled = [Run(test="quick-set-sadd", target="bin:/usr/bin/redis-server", side=side, run_index=2,
                    purpose="profile", status="ok").to_json() for side in ("baseline", "comparison")]
    for document, count in zip(profiled, (100, 300)):
        document["profile"] = {"folded_path": "/on/the/agent.folded.gz", "svg_path": "/on/the/agent.svg",
                               "samples": 400, "event": "cycles", "stacks_merged": 0,
                               "stacks": [[f"main;call;{frame}", count], ["main;aeMain", 400 - count]]}
    return runs() + profiled


def test_shipped_stacks_are_kept_next_to_the_store_and_hostile_ones_are_a_dead_job(collector):
    from redline.profile.folding import read_folded
    r, store, log = collector
    work_id, job_id = one_job_work(r)
    r.xadd(keys.RESULTS.key(), result(work_id, job_id, runs=json.dumps(profiled_runs("saddCommand"))))
    wait_for(lambda: done(r, work_id), "the profiled result stored")
    rows = query(store, "SELECT r.side, p.folded_path, p.samples FROM profiles p JOIN runs r ON r.id = p.run_id "
                        "ORDER BY r.side")
    assert [(side, samples) for side, _, samples in rows] == [("baseline", 400), ("comparison", 400)]
    for (side, folded, _), count in zip(rows, (100, 300)):
        assert folded.startswith(str(store.with_name("fleet-artifacts") / "fleet-profiles"))    # not the agent's path
        assert read_folded(folded) == {"main;call;saddCommand": count, "main;aeMain": 400 - count}
    # a frame with a terminal escape: the whole result is dead-lettered with the reason, nothing stored
    work_id, job_id = one_job_work(r)
    r.xadd(keys.RESULTS.key(), result(work_id, job_id, runs=json.dumps(profiled_runs("sadd\x1b]0;owned\x07"))))
    wait_for(lambda: done(r, work_id), "the hostile result handled")
    (error,), = query(store, "SELECT error FROM fleet_jobs WHERE job_id=?", job_id)
    assert error == "runs[4].profile.stacks[0]: a frame name holds a control or unprintable character"
    assert query(store, "SELECT count(*) FROM runs")[0][0] == 6
