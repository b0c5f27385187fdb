"""Client groups and redline-load's roles (issue #22), against real Debian redis-servers:
counts that must hold exactly (messages published × subscribers = received; BLPOP pops =
pushes − what is left), the ACL split of tracking invalidations, and every upstream suite with
several clients or another tool through `redline run` at a short duration."""
from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import REPO, start_redis_server
from redline.load.groups import GroupRequest, group_durations, run_groups
from redline.load.redline_load import LoadRequest, loadgen_binary, run_load
from redline.suites import load_test, roles

UPSTREAM = REPO.parent / "shared" / "upstream-suites" / "test-suites"
needs_upstream = pytest.mark.skipif(
    not UPSTREAM.is_dir(), reason=f"upstream suites not found at {UPSTREAM} (../shared/upstream-suites)")


def _wait_for(condition, what: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _role_in_background(request: LoadRequest) -> tuple[threading.Thread, dict]:
    out: dict = {}
    thread = threading.Thread(target=lambda: out.update(result=run_load(request, timeout_s=60)), daemon=True)
    thread.start()
    return thread, out


@pytest.fixture
def server(tmp_path):
    server = start_redis_server(tmp_path)
    yield server
    server.stop()


def test_every_message_published_reaches_each_subscriber_of_its_channel(server, tmp_path):
    request = LoadRequest(arguments=["-clients", "6", "-channel-minimum", "1", "-channel-maximum", "3",
                                     "-subscriber-prefix", "ch-", "-mode", "subscribe"],
                          host=server.host, port=server.port, json_path=tmp_path / "sub.json", duration_s=3,
                          role="pubsub-sub-bench")
    thread, out = _role_in_background(request)
    client = server.client()
    _wait_for(lambda: all(n == 2 for _, n in client.pubsub_numsub("ch-1", "ch-2", "ch-3")), "6 subscribers")
    delivered = 0
    for index in range(300):
        delivered += client.publish(f"ch-{index % 3 + 1}", f"redline-ts:{int(time.time() * 1e6)}:{index}")
    thread.join(timeout=60)
    counts = out["result"].report.role_counts
    assert delivered == 300 * 2                          # each channel has 2 subscribers
    assert counts["received_total"] == delivered
    assert counts["every_subscriber_got_every_message"] is True
    assert all(c["received"] == 200 for c in counts["per_channel"].values())
    assert out["result"].report.percentile_ms(50) is not None     # the payloads carried their send time


def _tracking_run(server, tmp_path, patterns: str | None, writes: int) -> dict:
    arguments = ["--listener-count", "4", "--tracking-prefix", "bench:"]
    if patterns:
        arguments += ["--acl-user-patterns", patterns]
    request = LoadRequest(arguments=arguments, host=server.host, port=server.port,
                          json_path=tmp_path / "tracking.json", duration_s=3, role="bcast-listener")
    thread, out = _role_in_background(request)
    client = server.client()
    _wait_for(lambda: client.info("clients").get("tracking_clients") == 4, "4 tracking listeners")
    for index in range(writes):
        client.set(f"bench:hot:{index}", "v")
    thread.join(timeout=60)
    assert client.acl_users() == ["default"]              # the run's ACL users are gone
    return out["result"].report.role_counts


def test_acl_half_filtered_tracking_gets_half_the_invalidations_where_the_server_filters(server, tmp_path):
    writes = 200
    unfiltered = _tracking_run(server, tmp_path, None, writes)
    half = _tracking_run(server, tmp_path, "bench:hot:*;bench:cold:*", writes)
    assert unfiltered["invalidation_messages"] == 4 * writes       # BCAST: every listener, every write
    hot, cold = half["by_acl_pattern"]["bench:hot:*"], half["by_acl_pattern"]["bench:cold:*"]
    assert hot["listeners"] == cold["listeners"] == 2
    assert hot["invalidations"] == 2 * writes
    # Send-time ACL filtering (redis/redis#15122) drops the cold users' invalidations; a server
    # without it (Debian's 7.0) sends them all. Either way the ratio is one of the two, not between.
    ratio = half["invalidation_messages"] / unfiltered["invalidation_messages"]
    filters = cold["invalidations"] == 0
    assert ratio == pytest.approx(0.5 if filters else 1.0, abs=0.1)


def test_blpop_consumers_pop_exactly_what_the_producer_pushed_minus_what_is_left(server, tmp_path):
    def group(label, arguments, seconds):
        return GroupRequest(label, LoadRequest(arguments=arguments, host=server.host, port=server.port,
                                               json_path=tmp_path / f"{label}.json", duration_s=seconds))
    producer = group("producer", ["--data-size", "32", "--command", "LPUSH blpop:key:1 __data__", "-c", "1", "-t", "1"], 3)
    consumers = group("consumers", ["--command", "BLPOP blpop:key:1 0", "-c", "5", "-t", "2"], 2)
    result = run_groups([producer, consumers])
    client = server.client()
    stats = client.info("commandstats")
    pushes, pops, left = stats["cmdstat_lpush"]["calls"], stats["cmdstat_blpop"]["calls"], client.llen("blpop:key:1")
    # every pushed element woke a consumer or is still in the list; commandstats may also count a
    # BLPOP whose connection closed while it was blocked (at most one per consumer connection)
    assert pushes - left <= pops <= pushes - left + 10
    counted = result.groups[1]["ops"]
    assert result.headline == "consumers" and counted == result.report.ops
    assert 0 < counted <= pops <= counted + 10               # at most one reply per connection unread at its end
    assert 0 < result.groups[0]["ops"] <= pushes


def _every_job_fetched_exactly_once(server, tmp_path, role: str, flags: list[str]) -> dict:
    """3,000 measured jobs after 100 warm-up jobs on 8 workers: each fetched once, with latency;
    the role's counts."""
    request = LoadRequest(arguments=["--workers", "8", "--jobs", "3000", "--warmup-jobs", "100", *flags, "--quiet"],
                          host=server.host, port=server.port, json_path=tmp_path / "jobs.json", role=role)
    result = run_load(request, timeout_s=300)
    counts = result.report.role_counts
    assert counts["enqueued"] == counts["fetched"] == counts["fetched_once"] == 3100
    assert counts["fetched_twice_or_more"] == counts["never_fetched"] == 0 and counts["exactly_once"] is True
    assert result.report.ops == 3000 and result.report.percentile_ms(50) is not None    # the measured jobs, with latency
    client = server.client()
    assert all(client.llen(key) == 0 for key in counts["fetch_keys"])
    return counts


@pytest.mark.parametrize("role, flags", [
    ("sidekiq-bench", ["--num-queues", "3"]),
    ("celery-bench", ["--priorities", "4", "--brpop-timeout-secs", "1"]),
    ("resque-bench", ["--num-queues", "2", "--poll-interval-ms", "5", "--idle-poll-duration-s", "1"]),
    ("bullmq-bench", ["--num-queues", "2"]),
])
def test_every_enqueued_job_is_fetched_exactly_once(server, tmp_path, role, flags):
    counts = _every_job_fetched_exactly_once(server, tmp_path, role, flags)
    if role == "resque-bench":
        assert counts["idle_polls_per_sec"] > 0


@pytest.mark.parametrize("queues, pop, not_sent", [(1, "blmove", "blpop"), (2, "blpop", "blmove")])
def test_rq_jobs_are_fetched_once_and_left_as_rq_leaves_finished_jobs(server, tmp_path, queues, pop, not_sent):
    """RQ's semantics after every job succeeded (default result TTL 500 s): the queues (and the
    intermediate queue BLMOVE fills) are empty, so gone; each job is in its queue's finished
    registry, scored at its expiry, its hash `finished` and expiring, its one result in a
    stream; the started registry is empty and the workers are registered as dead."""
    before = time.time()
    counts = _every_job_fetched_exactly_once(server, tmp_path, "rq-bench", ["--num-queues", str(queues)])
    after = time.time()
    client = server.client()
    names = ["default"] if queues == 1 else [f"q{n}" for n in range(1, queues + 1)]
    assert counts["library"] == "rq" and client.keys("rq:queue:*") == []
    assert client.smembers("rq:queues") == {f"rq:queue:{name}".encode() for name in names}
    stats = client.info("commandstats")
    assert stats[f"cmdstat_{pop}"]["calls"] >= 3100 and f"cmdstat_{not_sent}" not in stats
    finished = {}
    for name in names:
        assert client.zcard(f"rq:wip:{name}") == 0
        for job_id, expires in client.zrange(f"rq:finished:{name}", 0, -1, withscores=True):
            assert before + 500 - 1 <= expires <= after + 500 + 1
            finished[job_id.decode()] = name
    assert len(finished) == 3100                          # warm-up and measured jobs alike
    pipe = client.pipeline(transaction=False)
    for job_id in finished:
        pipe.hmget(f"rq:job:{job_id}", "status", "origin", "data")
        pipe.ttl(f"rq:job:{job_id}")
        pipe.xlen(f"rq:results:{job_id}")
    replies = iter(pipe.execute())
    tags = []
    for job_id, name in finished.items():
        (status, origin, data), ttl, results = next(replies), next(replies), next(replies)
        assert (status, origin.decode(), results) == (b"finished", name, 1) and 0 < ttl <= 500
        tags.append(int(json.loads(data)["redline"].split(":")[0]))
    assert sorted(tags) == list(range(3100))              # every job redline enqueued, once
    workers = [key for key in client.keys("rq:worker:*") if not key.endswith(b":executions")]
    assert len(workers) == 8 and client.scard("rq:workers") == 0
    assert all(client.hexists(key, "death") and 0 < client.ttl(key) <= 60 for key in workers)
    assert sum(int(client.hget(key, "successful_job_count")) for key in workers) == 3100
    assert client.keys("rq:execution*") == [] and client.keys("rq:worker:*:executions") == []


def test_a_job_queue_run_for_a_time_accounts_for_every_job_it_enqueued(server, tmp_path):
    request = LoadRequest(arguments=["--workers", "4", "--jobs", "100000000", "--num-queues", "2"], host=server.host,
                          port=server.port, json_path=tmp_path / "jobs.json", duration_s=1.5, role="sidekiq-bench")
    counts = run_load(request, timeout_s=120).report.role_counts
    assert 0 < counts["enqueued"] < 100000000
    assert counts["fetched"] == counts["enqueued"] and counts["exactly_once"] is True


def test_an_unknown_role_is_refused_in_one_line():
    proc = subprocess.run([str(loadgen_binary()), "--role", "arq-bench", "--workers", "2"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == ["redline-load: unknown role 'arq-bench' (roles: pubsub-sub-bench, bcast-listener, "
                                        "sidekiq-bench, celery-bench, resque-bench, bullmq-bench, rq-bench)"]


RQ_SUITE = REPO / "tests" / "suites" / "rq-bench-blocking-blmove-1queue-50workers.yml"


def test_an_rq_bench_suite_validates_and_a_wrong_flag_is_refused_in_one_line(redline_cli, tmp_path):
    assert redline_cli("suites", "validate", RQ_SUITE).returncode == 0
    wrong = tmp_path / "wrong.yml"
    wrong.write_text(RQ_SUITE.read_text().replace("--num-queues 1", "--num-queues 1 --priorities 4"))
    line = next(n for n, text in enumerate(wrong.read_text().splitlines(), 1) if "arguments:" in text)
    proc = redline_cli("suites", "validate", wrong)
    assert proc.returncode == 1
    assert [text for text in proc.stdout.splitlines() if ": error: " in text] == \
        [f"{wrong}:{line}: error: clientconfig.arguments: rq-bench: unknown flag '--priorities'"]
    load = subprocess.run([str(loadgen_binary()), "--role", "rq-bench", "--workers", "2", "--priorities", "4"],
                          capture_output=True, text=True, timeout=60)
    assert load.returncode == 2
    assert load.stderr.splitlines() == ["redline-load: rq-bench: unknown flag '--priorities'"]


def test_a_role_over_the_file_descriptor_limit_says_what_it_needs(server, tmp_path):
    import resource

    low = lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (100, 100))   # noqa: E731
    proc = subprocess.run([str(loadgen_binary()), "--role", "pubsub-sub-bench", "-clients", "500", "-test-time", "1",
                           "--port", str(server.port)], capture_output=True, text=True, timeout=60, preexec_fn=low)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("redline-load: pubsub-sub-bench: 500 connections need 564 file descriptors; "
                                   "the limit is 100 (hard 100): raise it with `ulimit -n 564`")


@needs_upstream
def test_group_lengths_keep_the_suites_proportions():
    test = load_test(UPSTREAM / "memtier_benchmark-Nclients-blpop-1key-rotated-pipeline-1.yml")
    assert group_durations(test.clients, 2.0) == [pytest.approx(2.0 * 125 / 120), 2.0]
    assert group_durations(test.clients, None) == [125.0, 120.0]
    tracking = load_test(UPSTREAM / "memtier_benchmark-set-bcast-tracking-100-listeners.yml")
    assert group_durations(tracking.clients, 2.0) == [2.0, 2.0]          # the listener has no length of its own


def test_role_flags_are_checked_like_redline_load_does():
    assert [p.message for p in roles.check_arguments("sidekiq-bench", ["--workers", "5", "--priorities", "4"])] == \
        ["sidekiq-bench: unknown flag '--priorities'"]
    assert roles.check_arguments("pubsub-sub-bench", ["-mode", "psubscribe"])[0].message == \
        "pubsub-sub-bench: -mode must be subscribe or ssubscribe, got 'psubscribe'"
    owned = roles.check_arguments("bcast-listener", ["--server", "10.0.0.1", "--listener-count", "3"])
    assert [p.owned for p in owned] == [True]
    assert roles.without_owned("bcast-listener", ["--server", "10.0.0.1", "--listener-count", "3"]) == \
        ["--listener-count", "3"]


def test_every_role_of_the_flag_table_lists_the_commands_it_sends():
    # what the server must know and whether a run writes (docs/architecture.md, "A role")
    assert sorted(roles.ROLE_COMMANDS) == roles.roles()
    assert all(roles.role_commands(role) for role in roles.roles())


GROUP_SUITES = sorted(path.name for path in UPSTREAM.glob("*.yml") if "clientconfigs:" in path.read_text())
ROLE_SUITES = sorted(path.name for path in UPSTREAM.glob("*.yml")
                     if any(f"tool: {tool}" in path.read_text() for tool in roles.JOB_QUEUE_ROLES))


@needs_upstream
def test_the_eighteen_suites_validate(redline_cli):
    assert len(GROUP_SUITES) == 13 and len(ROLE_SUITES) == 5
    proc = redline_cli("suites", "validate", *[UPSTREAM / name for name in GROUP_SUITES + ROLE_SUITES])
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


def _runs_by_test(store: Path) -> dict[str, dict]:
    """Every stored run's status, error and facts by test name (the one place this file reads the store)."""
    with sqlite3.connect(store) as db:
        rows = db.execute("SELECT test, status, error, facts FROM runs").fetchall()
    return {test: {"status": status, "error": error, "facts": json.loads(facts or "{}")} for test, status, error, facts in rows}


@pytest.fixture(scope="module")
def grouped_runs(tmp_path_factory):
    """The 18 suites, unchanged, through one `redline run` of 2 s each."""
    import os

    from conftest import REDLINE
    workdir = tmp_path_factory.mktemp("groups")
    suites = workdir / "suites"
    suites.mkdir()
    for name in GROUP_SUITES + ROLE_SUITES:
        shutil.copy(UPSTREAM / name, suites / name)
    proc = subprocess.run([*REDLINE, "run", str(suites), "--duration", "2s", "--warmup", "0s"], cwd=workdir,
                          capture_output=True, text=True, timeout=900, env={**os.environ, "COLUMNS": "200"})
    return proc, _runs_by_test(workdir / "redline.db")


@pytest.mark.parametrize("name", GROUP_SUITES + ROLE_SUITES)
def test_each_suite_runs_with_every_group_measured(grouped_runs, name):
    proc, runs = grouped_runs
    run = runs[name.removesuffix(".yml")]
    assert run["status"] == "ok", (run["error"], proc.stderr[-2000:])
    groups = run["facts"]["groups"]
    assert len(groups) == len(load_test(UPSTREAM / name).clients)
    assert run["facts"]["headline_group"] == groups[-1]["group"]
    for group in groups:
        assert group["ops"] and group["ops_per_sec"] > 0, group
        if group["role_counts"] and "exactly_once" in group["role_counts"]:
            assert group["role_counts"]["exactly_once"] is True, group
