"""The closed loop for real (#34): `redline fleet local --agents 2` (real agents: real builds of the
16-commit fixture repository of tests/test_bisect.py, real redis-server, real interleaved timed
runs), `redline api` given a signed push event, and nothing else: the push's work item finds GET
slower, the collector confirms it and bisects the pushed range with the fleet's two agents, and
the report on the comments stream names commit 12 (GET made about 5x more expensive) and, from the
profiled runs of the culprit's own change that the agents shipped, the function the fixture's change
slowed among the moved functions, with the differential flame graph next to the store. One agent
is SIGKILLed in the middle of a round's step: `fleet local` starts another, the step is claimed
after --claim-idle and run again, and every step is stored once.

The pushed range is commit 9 → commit 16 (seven commits; commit 12 in it): a push's previous head
is where the fleet's last measurement was. Timed: GET and SET with pipeline 10, whose pipelining is
what counts cannot see (docs/fleet.md "The closed loop"). Cost on an idle 2-core machine: the builds
of about six commits (cached by redline's build cache across runs), the work item (2 jobs) and
about six one-test compares of 5 runs of 1 s per side (0.5 s of warm-up each).

The same push on GET and SET with pipeline 1 is bisected counted: the servers under valgrind, the
confirmation by 5 runs per side, each later commit alone by one run (10M-instruction windows).
Nothing here asserts a duration."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import signal
import socket
import subprocess
import urllib.request
import uuid


from redline.fleet import keys
from redline.output.markdown_text import literal
from redline.server.process import free_port
from tests.fleet_helpers import (client, fleet_local, query, redis_arguments, redline, redline_process, stop,
                                 stop_an_agent_mid_job, wait_for)
from tests.test_bisect import GET, SPIN, bisect_repo  # noqa: F401 — the fixture repository, shared

SECRET = b"loop secret"
TESTS = "string-(get|set)-100B-pipeline-10$"
# where scripts/make_redis_bisect_repo.sh puts commit 12's extra work (at the start of the function)
FIXTURE_FUNCTION = "getGenericCommand"
LONG_S = 3600               # a loaded shared machine builds and measures many times slower than an idle one


def signed_push(endpoint: str, before: str, after: str) -> tuple[int, dict]:
    body = json.dumps({"ref": "refs/heads/line", "before": before, "after": after,
                       "repository": {"full_name": "redis/redis", "default_branch": "line"}}).encode()
    request = urllib.request.Request(endpoint, data=body, method="POST", headers={
        "X-GitHub-Event": "push", "X-GitHub-Delivery": str(uuid.uuid4()), "Content-Type": "application/json",
        "X-Hub-Signature-256": "sha256=" + hmac.new(SECRET, body, hashlib.sha256).hexdigest()})
    with urllib.request.urlopen(request, timeout=60) as response:
        return response.status, json.loads(response.read())


@contextlib.contextmanager
def pushed(tmp_path, bisect_repo, *, tests: str, fleet_flags=(), api_flags=()):
    """A real `fleet local --agents 2` and `redline api`, both agents' heartbeats seen, then one
    signed push of commit 9 → 16: (Redis client, Redis URL, store, the push's work id, the culprit).
    Both processes are stopped on the way out."""
    repo, tags = bisect_repo
    before = subprocess.run(["git", "-C", str(repo), "rev-parse", "culprit~3"], capture_output=True, text=True,
                            check=True).stdout.strip()
    secret = tmp_path / "secret"
    secret.write_bytes(SECRET + b"\n")
    store, log = tmp_path / "fleet.db", tmp_path / "fleet.log"
    fleet, url = fleet_local("--agents", 2, "--store", store, "--platform", "ci", "--dir", tmp_path / "redis",
                             "--allow-target", f"git:{repo.parent}", *fleet_flags, log=log)
    port = free_port()
    api = redline_process("api", *redis_arguments(url), "--port", port, "--secret-file", secret, "--repository", repo,
                          "--branch", "line", "--platform", "ci", "--suite", "quick", "--name", tests,
                          "--runs", 5, "--max-runs", 5, "--duration", "1s", "--warmup", "0.5s", "--variant", "libc-malloc",
                          *api_flags,
                          log=log)
    try:
        def listening():
            with socket.socket() as sock:
                return sock.connect_ex(("127.0.0.1", port)) == 0
        wait_for(listening, "the webhook endpoint", timeout_s=120)
        r = client(url)
        wait_for(lambda: len(list(r.scan_iter(match=keys.AGENT.key(platform="ci", agent="*")))) == 2,
                 "both agents' heartbeats (k = 2)", timeout_s=300)
        status, answer = signed_push(f"http://127.0.0.1:{port}/webhook", before, tags["bad"])
        assert status == 202, answer
        yield r, url, store, answer["work_id"], tags["culprit"]
    finally:
        assert stop(api, 120) == 0
        stop(fleet)


def test_a_pushed_regression_is_bisected_by_a_real_local_fleet(tmp_path, bisect_repo):
    claim_quickly = ("--claim-idle", "5s")
    with pushed(tmp_path, bisect_repo, tests=TESTS, fleet_flags=claim_quickly) as (r, url, store, work_id, culprit):
        def comment(bisection: bool):
            return next((f for _, f in r.xrange(keys.COMMENTS.key())
                         if f["work_id"] == work_id and bool(f.get("bisection")) == bisection), None)
        own = wait_for(lambda: comment(False), "the work item's comment", timeout_s=LONG_S, every_s=2)
        assert "fleet bisection" in own["markdown"], own["markdown"]
        # an agent SIGKILLed in the middle of a round's step: another agent runs it again after --claim-idle
        bisection = wait_for(lambda: r.zrange(keys.BISECTIONS.key(), 0, 0), "the bisection's stage")[0]
        wait_for(lambda: r.hget(keys.BISECTION.key(bisection=bisection), "stage") == "bisecting",
                 "the first round", timeout_s=LONG_S, every_s=0.5)
        victim = wait_for(lambda: stop_an_agent_mid_job(r, "ci", set()), "an agent in the middle of a step", timeout_s=LONG_S)
        os.kill(int(victim["pid"]), signal.SIGKILL)
        report = wait_for(lambda: comment(True), "the bisection's report", timeout_s=LONG_S, every_s=2)
        assert f"culprit: {culprit[:12]}" in report["markdown"], report["markdown"]
        assert f"fixture: {SPIN} iterations of extra work on GET's code path" in report["markdown"]   # its subject
        assert GET in report["markdown"]
        # the moved functions of the culprit's own change: the agents' profiled runs, the collector's renderer
        assert f"| {literal(GET)} | {literal(FIXTURE_FUNCTION)} |" in report["markdown"], report["markdown"]
        assert f"Differential flame graph of {literal(GET)}" in report["markdown"]
        shown = redline("fleet", "status", *redis_arguments(url))
        assert f"reported: culprit {culprit[:12]}" in shown.stdout, shown.stdout
    # the killed step stored once, by another agent, attempt 2; every job of every pair stored once
    (agent, attempt), = query(store, "SELECT agent, attempt FROM fleet_jobs WHERE job_id=?", victim["job_id"])
    assert agent != victim["agent"] and attempt == 2
    state = json.loads(query(store, "SELECT document FROM session_documents WHERE name='fleet_bisection'")[0][0])
    # a pair's work item is one job per test the bisection follows: GET, and SET too when the push's
    # own five runs flagged it (at pipeline 10 a 2-core machine's noise can; the culprit stays GET's)
    jobs_per_pair = len(state["tests"]) * len(state["topologies"])
    assert [GET] == [name for _, name in state["tests"] if name == GET] and jobs_per_pair in (1, 2), state["tests"]
    for pair in state["pairs"].values():
        assert query(store, "SELECT count(*), count(DISTINCT job_id) FROM fleet_jobs WHERE work_id=? AND status='ok'",
                     pair["work_id"]) == [(jobs_per_pair, jobs_per_pair)], pair
    assert state["per_round"] == 2 and any(p["round"] == 1 for p in state["pairs"].values())
    assert victim["job_id"].split(":")[0] in {p["work_id"] for p in state["pairs"].values()}
    document = json.loads(query(store, "SELECT document FROM session_documents WHERE name='bisection'")[0][0])
    own = document["remainder"]["changes"][GET]
    assert FIXTURE_FUNCTION in [move["symbol"] for move in own["moved_symbols"]], own["moved_symbols"]
    assert own["diff_flamegraph"].startswith(str(tmp_path / "fleet-artifacts"))
    assert FIXTURE_FUNCTION in open(own["diff_flamegraph"]).read()
    profiled = [p for p in state["pairs"].values() if p["purpose"] == "own change"]
    assert len(profiled) == 1 and query(store, "SELECT count(*) FROM runs r JOIN profiles p ON p.run_id = r.id "
                                               "WHERE r.purpose = 'profile'")[0][0] == 2 * jobs_per_pair  # two sides
    print(report["markdown"])


COUNTABLE = "string-(get|set)-100B-pipeline-1$"     # pipeline 1: counts see GET's extra work


def test_a_pushed_regression_is_bisected_counted_by_a_real_local_fleet(tmp_path, bisect_repo):
    """The same push (commit 9 → 16) on the tests counts can see: the push's work item is timed, the
    collector's loop counts — the confirmation by 5 interleaved runs per side under callgrind, then
    each commit alone by one run with the confirmation's request count — on a real `fleet local
    --agents 2` (real agents, builds, valgrind), and the report names commit 12 from the counts.
    A 10M-instruction window keeps each counted run short (GET's change is about 5x)."""
    with pushed(tmp_path, bisect_repo, tests=COUNTABLE,
                api_flags=("--window-instructions", 10_000_000)) as (r, url, store, work_id, culprit):
        report = wait_for(lambda: next((f for _, f in r.xrange(keys.COMMENTS.key())
                                        if f["work_id"] == work_id and f.get("bisection")), None),
                          "the bisection's report", timeout_s=LONG_S, every_s=2)
    markdown = report["markdown"]
    assert f"culprit: {culprit[:12]}" in markdown and "Counted under callgrind" in markdown, markdown
    assert "Measured by time" not in markdown
    state = json.loads(query(store, "SELECT document FROM session_documents WHERE name='fleet_bisection'")[0][0])
    assert state["measure"] == "instructions" and state["per_round"] == 2
    assert all(key.startswith("counted:") for key in state["pairs"])
    requests = {json.dumps(requests) for (requests,) in query(
        store, "SELECT json_extract(facts, '$.instructions.requests_per_connection') FROM runs WHERE session_id IN "
               "(SELECT session_id FROM fleet_work WHERE work_id IN (%s)) AND status='ok'"
               % ",".join("?" * len(state["pairs"])), *[p["work_id"] for p in state["pairs"].values()])}
    assert len(requests) == 1, requests                 # the confirmation's request count throughout
    print(markdown)
