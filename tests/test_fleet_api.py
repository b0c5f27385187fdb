"""`redline api`: a real uvicorn server receiving signed GitHub webhooks over loopback HTTP, a real
redis-server, a real git repository for the pull request's merge base."""

from __future__ import annotations

import hashlib
import http.client
import hmac
import contextlib
import json
import socket
import subprocess
import urllib.error
import urllib.parse
import urllib.request
import uuid

import pytest

from redline.fleet import keys, work
from redline.fleet.api import MAX_BODY
from redline.server.process import free_port
from tests.fleet_helpers import REDLINE, client, redis_with_aof, redline_process, stop, wait_for

SECRET = b"webhook secret"
LABEL = "action run:benchmarks"


def git(repo, *arguments) -> str:
    return subprocess.run(["git", "-C", str(repo), *arguments], check=True, capture_output=True, text=True,
                          env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                               "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"}).stdout.strip()


@pytest.fixture
def repository(tmp_path):
    """main: A - B, feature: A - C (merge base A)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    commits = {}
    for name, branch in (("A", "main"), ("B", "main"), ("C", "feature")):
        if name == "C":
            git(repo, "checkout", "-q", "-b", "feature", commits["A"])
        (repo / "f").write_text(name)
        git(repo, "add", "f")
        git(repo, "commit", "-q", "-m", name)
        commits[name] = git(repo, "rev-parse", "HEAD")
    return repo, commits


@pytest.fixture
def api(tmp_path, repository):
    with serving(tmp_path, repository) as endpoint:
        yield endpoint


@contextlib.contextmanager
def serving(tmp_path, repository, *extra):
    """A real `redline api` over a real Redis: (endpoint, Redis client, commits, log)."""
    repo, commits = repository
    http_port = free_port()
    secret = tmp_path / "secret"
    secret.write_bytes(SECRET + b"\n")
    log = tmp_path / "api.log"
    with redis_with_aof(tmp_path / "aof") as url:
        work.register_platform(client(url), "ci")        # as an agent of the platform does
        process = redline_process("api", "--redis", url, "--port", http_port, "--secret-file", secret,
                                  "--repository", repo, "--branch", "main", "--platform", "ci", "--suite", "quick",
                                  "--name", "set-sadd", "--runs", 3, *extra, log=log)

        def listening():
            with socket.socket() as sock:
                return sock.connect_ex(("127.0.0.1", http_port)) == 0
        wait_for(listening, "the webhook endpoint", timeout_s=120)
        yield f"http://127.0.0.1:{http_port}/webhook", client(url), commits, log
        assert stop(process, 120) == 0


def post(endpoint: str, event: str, payload, *, delivery: str | None = None, secret: bytes = SECRET,
         body: bytes | None = None) -> tuple[int, dict]:
    body = body if body is not None else json.dumps(payload).encode()
    signature = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
    request = urllib.request.Request(endpoint, data=body, method="POST", headers={
        "X-GitHub-Event": event, "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
        "X-Hub-Signature-256": signature, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def oversized(endpoint: str) -> int:
    """The status for a request announcing a body over the limit (answered before it is sent)."""
    parts = urllib.parse.urlsplit(endpoint)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    connection.putrequest("POST", parts.path)
    for name, value in (("Content-Length", str(MAX_BODY + 1)), ("X-GitHub-Event", "push"),
                        ("X-GitHub-Delivery", "big"), ("X-Hub-Signature-256", "sha256=00")):
        connection.putheader(name, value)
    connection.endheaders()
    status = connection.getresponse().status
    connection.close()
    return status


def pr_event(commits, *, action="labeled", labels=(LABEL,), added=LABEL):
    return {"action": action, "number": 7, "label": {"name": added},
            "repository": {"full_name": "redis/redis", "default_branch": "main"},
            "pull_request": {"number": 7, "labels": [{"name": name} for name in labels],
                             "base": {"sha": commits["B"]}, "head": {"sha": commits["C"]}}}


def push_event(commits, ref="refs/heads/main"):
    return {"ref": ref, "before": commits["A"], "after": commits["B"],
            "repository": {"full_name": "redis/redis", "default_branch": "main"}}


def test_webhook_events_signatures_and_replays(api, repository):
    endpoint, r, commits, log = api
    repo, _ = repository

    status, body = post(endpoint, "push", push_event(commits), delivery="push-1")
    assert status == 202 and body["jobs"] == 1
    work = r.hgetall(keys.WORK.key(work_id=body["work_id"]))
    assert (work["source"], work["baseline"], work["comparison"]) == (
        "push", f"git:{repo}@{commits['A']}", f"git:{repo}@{commits['B']}")
    (_, entry), = r.xrange(keys.JOBS.key(platform="ci"))
    job = json.loads(entry["job"])
    assert job["test"] == "quick-set-sadd" and job["settings"]["runs"] == 3
    assert [side["target"] for side in job["sides"]] == [work["baseline"], work["comparison"]]

    assert post(endpoint, "push", push_event(commits), delivery="push-1")[0] == 409        # replayed
    assert post(endpoint, "push", push_event(commits, "refs/heads/other"))[0] == 200       # not benchmarked

    # a bad signature is refused before its delivery id is recorded: the real delivery still counts
    assert post(endpoint, "pull_request", pr_event(commits), delivery="pr-1", secret=b"wrong")[0] == 401
    status, body = post(endpoint, "pull_request", pr_event(commits), delivery="pr-1")
    assert status == 202
    work = r.hgetall(keys.WORK.key(work_id=body["work_id"]))
    assert work["github"] == "redis/redis#7" and work["source"] == "pull_request"
    assert work["baseline"] == f"git:{repo}@{commits['A']}"             # the merge base, not base's tip B
    assert work["comparison"] == f"git:{repo}@{commits['C']}"

    assert post(endpoint, "pull_request", pr_event(commits, action="opened", labels=()))[0] == 200
    assert post(endpoint, "pull_request", pr_event(commits, labels=(LABEL, "x"), added="x"))[0] == 200
    assert post(endpoint, "pull_request", pr_event(commits, action="closed"))[0] == 200
    assert post(endpoint, "issues", {"action": "opened"})[0] == 422
    assert post(endpoint, "ping", {"zen": "hi"})[0] == 200
    assert oversized(endpoint) == 413
    assert post(endpoint, "push", None, body=b"[not json")[0] == 400

    assert r.zcard(keys.WORKS.key()) == 2 and r.xlen(keys.JOBS.key(platform="ci")) == 2
    text = log.read_text()
    assert "status=401" in text and "status=409" in text and "enqueued" in text


def test_the_same_signed_body_with_another_delivery_id_is_a_replay(api):
    """The replay check keys on what the signature covers (the body), not on X-GitHub-Delivery,
    which anyone who saw one request can change."""
    endpoint, r, commits, log = api
    assert post(endpoint, "push", push_event(commits), delivery="first")[0] == 202
    status, body = post(endpoint, "push", push_event(commits), delivery="second")
    assert status == 409 and body["message"] == "this signed body was delivered before (replay)"
    assert r.zcard(keys.WORKS.key()) == 1 and r.xlen(keys.JOBS.key(platform="ci")) == 1


def test_malformed_events_are_400_and_a_lost_redis_is_503_never_a_500(api):
    endpoint, r, commits, log = api
    deep = b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    labelled = pr_event(commits)
    cases = {"deep": (post(endpoint, "push", None, body=deep), "the body is not a JSON object (or is nested too deeply)"),
             "pull_request": (post(endpoint, "pull_request", {**labelled, "pull_request": "7"}),
                              "not a GitHub pull_request event: pull_request is not an object"),
             "labels": (post(endpoint, "pull_request", {**labelled, "pull_request": {**labelled["pull_request"],
                                                                                       "labels": "x"}}),
                        "not a GitHub pull_request event: pull_request.labels is not a list"),
             "head": (post(endpoint, "pull_request", {**labelled, "pull_request": {
                 **labelled["pull_request"], "head": {"sha": "--upload-pack=touch /tmp/owned"}}}),
                      "not a GitHub pull_request event: pull_request.head.sha is not a commit sha"),
             "before": (post(endpoint, "push", {**push_event(commits), "before": "HEAD~1"}),
                        "not a GitHub push event: push.before is not a commit sha")}
    for name, ((status, body), message) in cases.items():
        assert (status, body.get("message")) == (400, message), name
    assert r.zcard(keys.WORKS.key()) == 0
    try:
        r.shutdown(nosave=True)
    except Exception:                      # the connection ends with the server
        pass
    status, body = post(endpoint, "push", push_event(commits))
    assert status == 503 and body["message"].startswith("Redis unavailable: ")
    assert "Traceback" not in log.read_text() and "status=500" not in log.read_text()


def test_an_event_of_another_repository_or_of_commits_it_does_not_hold_is_422_in_one_line(tmp_path, repository):
    """Pointed at the wrong endpoint, a webhook's events fail on GitHub's side (422 with the reason,
    one log line) instead of becoming jobs no agent can build: commits the repository does not hold,
    and with --github-repository, another repository's events."""
    with serving(tmp_path, repository, "--github-repository", "redis/redis") as (endpoint, r, commits, log):
        foreign = {**push_event(commits), "repository": {"full_name": "valkey-io/valkey", "default_branch": "main"}}
        status, body = post(endpoint, "push", foreign)
        assert (status, body["message"]) == (422, "not benchmarked here: an event of valkey-io/valkey; this endpoint "
                                                  "benchmarks redis/redis")
        status, body = post(endpoint, "pull_request", {**pr_event(commits), "repository": foreign["repository"]})
        assert status == 422 and "valkey-io/valkey" in body["message"]
        unknown = "f" * 40
        status, body = post(endpoint, "push", {**push_event(commits), "after": unknown})
        assert status == 422 and body["message"] == (
            f"not benchmarked here: commit {unknown[:12]} is not in {repository[0]} (an event of another "
            "repository, or a clone that has not fetched it yet)")
        status, body = post(endpoint, "pull_request", {**pr_event(commits), "pull_request": {
            **pr_event(commits)["pull_request"], "head": {"sha": unknown}}})
        assert status == 422 and unknown[:12] in body["message"]
        assert r.zcard(keys.WORKS.key()) == 0 and r.xlen(keys.JOBS.key(platform="ci")) == 0
        assert post(endpoint, "push", push_event(commits))[0] == 202           # its own repository's push
        assert log.read_text().count("not benchmarked here") == 4


def test_a_busy_port_is_refused_in_one_line_before_listening(tmp_path, repository):
    repo, _ = repository
    secret = tmp_path / "secret"
    secret.write_bytes(SECRET)
    with socket.socket() as taken, redis_with_aof(tmp_path / "aof") as url:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([*REDLINE, "api", "--redis", url, "--port", str(port), "--secret-file", str(secret),
                               "--repository", str(repo)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [f"redline: error: --port {port} on 127.0.0.1: Address already in use "
                                        "(another process listens there?)"]
