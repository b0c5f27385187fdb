"""The closed loop through the real collector (redline/fleet/collector.py + redline/fleet/bisection.py):
real redis-server (AOF), real `redline collector` processes, a real git repository (the collector
walks its ancestry path), real SQLite. The test plays the agents: it takes each job from the jobs
stream as an agent does (XREADGROUP in the `agents` group), answers it with runs made from a model
of the repository (GET's server CPU per op 5x from commit 12 of 16), and publishes the result as an
agent does. What is checked: a push work item's regression opens a bisection (its comment says so),
the confirmation and k = 2 commits per round are queued as work items, a result published twice and
a collector restarted mid-bisection change nothing, the report names commit 12 on the comments
stream, `fleet status` shows the stages; and the same loop counted (GET with pipeline 1, which counts
can see): a counted confirmation, then each commit counted alone by one run with the confirmation's
request count. Timing is never asserted."""

from __future__ import annotations

import hashlib
import json
import subprocess
import time

import pytest

from redline.core.run import Run
from redline.engine.job import SideSpec
from redline.fleet import keys, work
from redline.suites import load_test
from redline.suites.discovery import builtin_suites_dir
from tests.fleet_helpers import client, query, redis_with_aof, redline, redline_process, stop, wait_for

GET = "quick-string-get-100B-pipeline-10"
SET = "quick-string-set-100B-pipeline-10"
GET1, SET1 = "quick-string-get-100B-pipeline-1", "quick-string-set-100B-pipeline-1"     # counts can see them
METRIC = "server_cpu_us_per_op"
COUNTED_METRIC = "instructions_per_op"
REQUESTS = 777              # the request count per connection the played agents' counted runs choose


@pytest.fixture
def repository(tmp_path):
    """16 commits after GOOD (a file per commit): their shas, GOOD first."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git = lambda *a: subprocess.run(["git", "-C", str(repo), *a], check=True, capture_output=True, text=True)  # noqa: E731
    git("init", "-q", "-b", "main")
    git("config", "user.email", "t@example.com")
    git("config", "user.name", "t")
    shas = []
    for index in range(17):
        (repo / f"f{index}").write_text(str(index))
        git("add", ".")
        git("commit", "-q", "-m", f"fixture commit {index}")
        shas.append(git("rev-parse", "HEAD").stdout.strip())
    return repo, shas


def value(shas: list[str], sha: str, test: str) -> float:
    return 10.0 * (5.0 if test in (GET, GET1) and shas.index(sha) >= 12 else 1.0)


JOB_SPAN_S = 7.0       # each played job: its last run ends this long after the job started (its agent time)


def runs_for(shas: list[str], job: dict, suite_file: str, started_at: float) -> list[dict]:
    if job["settings"].get("measure") == "instructions":
        return counted_runs_for(shas, job, suite_file, started_at)
    baseline, comparison = (side["target"].rsplit("@", 1)[1] for side in job["sides"])
    out = []
    for index in range(job["settings"]["runs"]):
        for side, sha in (("baseline", baseline), ("comparison", comparison)):
            noise = int(hashlib.sha1(f"{job['job_id']}{side}{index}".encode()).hexdigest()[:4], 16) / 65535
            out.append(Run(test=job["test"], target=f"git:x@{sha}", side=side, run_index=index, status="ok",
                           suite_file=suite_file, metrics={METRIC: value(shas, sha, job["test"]) * (0.99 + 0.02 * noise),
                                                           "ops_per_sec": 1000.0 + noise},
                           started_at=started_at + 1.0, finished_at=started_at + JOB_SPAN_S).to_json())
    return out


def counted_runs_for(shas: list[str], job: dict, suite_file: str, started_at: float) -> list[dict]:
    """A counted job's runs as callgrind gives them: its one or two sides, the count within ±0.05%,
    the request count per connection it was given, else its own choice."""
    requests = job["settings"].get("window_requests") or REQUESTS
    out = []
    for index in range(job["settings"]["runs"]):
        for side in job["sides"]:
            sha = side["target"].rsplit("@", 1)[1]
            noise = int(hashlib.sha1(f"{job['job_id']}{side['name']}{index}".encode()).hexdigest()[:4], 16) / 65535
            out.append(Run(test=job["test"], target=f"git:x@{sha}", side=side["name"], run_index=index, status="ok",
                           suite_file=suite_file,
                           metrics={COUNTED_METRIC: 250 * value(shas, sha, job["test"]) * (0.9995 + 0.001 * noise)},
                           facts={"instructions": {"requests_per_connection": requests}},
                           started_at=started_at + 1.0, finished_at=started_at + JOB_SPAN_S).to_json())
    return out


def play_agent(r, shas: list[str], suite_file: str | dict[str, str], *,
               publish_twice: set[str] = frozenset()) -> list[dict]:
    """Every job waiting on platform p, answered and published as an agent does; the jobs taken.
    `suite_file`: the one suite file of every job's runs, or each test's."""
    stream = keys.JOBS.key(platform="p")
    work.ensure_group(r, stream, keys.AGENTS_GROUP)
    taken = []
    for _, entries in r.xreadgroup(keys.AGENTS_GROUP, "test-agent", {stream: ">"}, count=100) or []:
        for entry_id, fields in entries:
            job, started_at = json.loads(fields["job"]), time.time()
            result = {"kind": "result", "job_id": fields["job_id"], "work_id": fields["work_id"], "platform": "p",
                      "agent": "test-agent", "attempt": "1", "submitted_at": fields["submitted_at"],
                      "started_at": repr(started_at), "finished_at": repr(started_at + JOB_SPAN_S),
                      "runs": json.dumps(runs_for(shas, job, suite_file[job["test"]] if isinstance(suite_file, dict)
                                                  else suite_file, started_at))}
            with r.pipeline(transaction=True) as tx:
                tx.xadd(keys.RESULTS.key(), result)
                if fields["work_id"] in publish_twice:
                    tx.xadd(keys.RESULTS.key(), {**result, "agent": "late-agent"})
                tx.xack(stream, keys.AGENTS_GROUP, entry_id)
                tx.xdel(stream, entry_id)
                tx.execute()
            taken.append(job)
    return taken


def bisection_comment(r) -> dict | None:
    return next((f for _, f in r.xrange(keys.COMMENTS.key()) if f.get("bisection")), None)


def played_until_reported(r, play, log, *, attempts: int) -> dict:
    """The agents played (`play()`, every job waiting answered) until a bisection's report is on the
    comments stream; the report."""
    for _ in range(attempts):
        play()
        report = bisection_comment(r)
        if report:
            return report
        time.sleep(0.5)
    raise AssertionError(f"no bisection report after {attempts} rounds of the agents:\n{log.read_text()[-3000:]}")


def test_a_pushed_regression_is_confirmed_bisected_and_reported_by_the_fleet(tmp_path, repository):
    repo, shas = repository
    get, setter = (load_test(builtin_suites_dir() / "quick" / f"{name}.yml")
                   for name in ("string-get-100B-pipeline-10", "string-set-100B-pipeline-10"))
    suite_file = str(get.path)
    with redis_with_aof(tmp_path / "aof") as url:
        r = client(url)
        store, log = tmp_path / "fleet.db", tmp_path / "collector.log"
        collector = redline_process("collector", "--redis", url, "--store", store, log=log)
        try:
            work.register_platform(r, "p")
            for name in ("a1", "a2"):            # two live agents of the platform: k = 2
                r.hset(keys.AGENT.key(platform="p", agent=name), mapping={"agent": name, "job_id": "",
                                                                          "heartbeat_at": repr(time.time())})
            item = work.new_work(r, source="push", platforms=["p"], tests=[get, setter], topologies=None,
                                 sides=[SideSpec("baseline", f"git:{repo}@{shas[0]}", (), "libc-malloc"),
                                        SideSpec("comparison", f"git:{repo}@{shas[-1]}", (), "libc-malloc")],
                                 settings=work.Settings(runs=5, max_runs=5, duration_s=1.0, warmup_s=0.0))
            work.enqueue(r, item)
            first = play_agent(r, shas, suite_file)
            assert {job["test"] for job in first} == {GET, SET}
            # the work item's comment says a bisection was opened
            comment = wait_for(lambda: next((f for _, f in r.xrange(keys.COMMENTS.key())
                                             if f["work_id"] == item.work_id and not f.get("bisection")), None),
                               "the work item's comment")
            assert "fleet bisection" in comment["markdown"], comment["markdown"]
            # the confirmation: GOOD against BAD again, on GET alone (SET did not move)
            confirmation = wait_for(lambda: r.xlen(keys.JOBS.key(platform="p")) and
                                    [json.loads(f["job"]) for _, f in r.xrange(keys.JOBS.key(platform="p"))],
                                    "the confirmation's job")
            assert [job["test"] for job in confirmation] == [GET]
            assert [s["target"] for s in confirmation[0]["sides"]] == [f"git:{repo}@{shas[0]}", f"git:{repo}@{shas[-1]}"]
            assert all(s["variant"] == "libc-malloc" for s in confirmation[0]["sides"])
            confirmation_work = play_agent(r, shas, suite_file)[0]["job_id"].split(":")[0]
            # round 1: k = 2 commits; the first published twice (a late agent), then the collector restarts
            round1 = wait_for(lambda: r.xlen(keys.JOBS.key(platform="p")) >= 2 and
                              [json.loads(f["job"]) for _, f in r.xrange(keys.JOBS.key(platform="p"))],
                              "round 1's two jobs")
            assert len(round1) == 2
            # each carries its step rule: measured against GOOD or BAD, the half-way point of the whole change
            for job in round1:
                rule, reference = job["step_rule"], job["sides"][0]["target"].rsplit("@", 1)[1]
                assert reference in (shas[0], shas[-1]) and rule["against_bad"] == (reference == shas[-1])
                assert rule["halves"] == {GET: 0.5} and rule["metric"] == METRIC
            assert "step_rule" not in confirmation[0]
            twice = {round1[0]["job_id"].split(":")[0]}
            play_agent(r, shas, suite_file, publish_twice=twice)
            wait_for(lambda: r.xlen(keys.RESULTS.key()) == 0, "round 1 stored")
            assert stop(collector) == 0
            status = redline("fleet", "status", "--redis", url)
            assert status.returncode == 0 and "bisection" in status.stdout, status.stdout + status.stderr
            collector = redline_process("collector", "--redis", url, "--store", store, log=log)
            # the agents answer every round until the report is on the comments stream
            report = played_until_reported(r, lambda: play_agent(r, shas, suite_file), log, attempts=40)
            assert f"culprit: {shas[12][:12]}" in report["markdown"], report["markdown"]
            assert report["work_id"] == item.work_id and report["state"] == "done"
        finally:
            assert stop(collector) == 0
        # stored once: the twice-published job's runs once, one comment, every pair its own work item
        dup = query(store, "SELECT count(*) FROM fleet_jobs WHERE work_id=?", next(iter(twice)))
        assert dup == [(1,)]
        assert len([f for _, f in r.xrange(keys.COMMENTS.key()) if f.get("bisection")]) == 1
        state = json.loads(query(store, "SELECT document FROM session_documents WHERE name='fleet_bisection'")[0][0])
        assert state["stage"] == "reported" and state["per_round"] == 2
        assert state["pairs"][f"{shas[0]}..{shas[-1]}"]["work_id"] == confirmation_work
        assert len({p["work_id"] for p in state["pairs"].values()}) == len(state["pairs"])
        status = redline("fleet", "status", "--redis", url)
        assert f"reported: culprit {shas[12][:12]}" in status.stdout, status.stdout
        listed, = json.loads(redline("fleet", "status", "--redis", url, "--json").stdout)["bisections"]
        assert listed == {**listed, "stage": "reported", "culprit": shas[12], "work_id": item.work_id, "per_round": 2,
                          "steps": len(state["pairs"])}
        assert "duplicate result ignored" in log.read_text()


def test_a_pull_requests_regression_is_bisected_and_the_culprit_posted_on_the_pull_request(tmp_path, repository):
    """A pull request's work item (head commit 14 against merge base commit 10), one live agent
    (k = 1), a collector with a GitHub token (a loopback stand-in for the API): the pull request gets
    the work item's comment, which links the bisection, then the bisection's report naming commit 12,
    each once."""
    from tests.test_fleet_collector import collector_with_github, github_server
    repo, shas = repository
    get = load_test(builtin_suites_dir() / "quick" / "string-get-100B-pipeline-10.yml")
    posted: list[dict] = []

    def routes(method, path, body):
        if method == "POST":
            posted.append({"path": path, "body": body["body"], "html_url": f"https://example.invalid/c/{len(posted) + 1}"})
            return 201, {}, posted[-1]
        return 200, {}, posted
    github, _ = github_server(routes)
    try:
        with redis_with_aof(tmp_path / "aof") as url:
            r = client(url)
            collector = collector_with_github(tmp_path, url, f"http://127.0.0.1:{github.server_port}")
            try:
                work.register_platform(r, "p")
                r.hset(keys.AGENT.key(platform="p", agent="a1"), mapping={"agent": "a1", "job_id": ""})
                item = work.new_work(r, source="pull_request", platforms=["p"], tests=[get], topologies=None,
                                     sides=[SideSpec("baseline", f"git:{repo}@{shas[10]}"),
                                            SideSpec("comparison", f"git:{repo}@{shas[14]}")],
                                     settings=work.Settings(runs=5, max_runs=5), github="redis/redis#7")
                work.enqueue(r, item)
                for _ in range(60):
                    play_agent(r, shas, str(get.path))
                    if bisection_comment(r) and len(posted) >= 2:
                        break
                    time.sleep(0.5)
            finally:
                assert stop(collector) == 0
    finally:
        github.shutdown()
    assert [p["path"] for p in posted] == ["/repos/redis/redis/issues/7/comments"] * 2, posted
    work_comment, report = posted[0]["body"], posted[1]["body"]
    assert "fleet bisection" in work_comment and f"redline work item {item.work_id}" in work_comment
    assert f"culprit: {shas[12][:12]}" in report and "<!-- redline bisection" in report
    state = json.loads(query(tmp_path / "fleet.db", "SELECT document FROM session_documents "
                                                    "WHERE name='fleet_bisection'")[0][0])
    assert state["per_round"] == 1 and state["published"] == posted[1]["html_url"]
    rounds = [pair["round"] for pair in state["pairs"].values() if pair["purpose"] == "step"]
    assert rounds and len(rounds) == len(set(rounds))            # k = 1: one commit a round


def test_a_change_past_the_cap_is_queued_shown_by_fleet_status_and_opened_when_the_first_ends(tmp_path, repository):
    """--bisect-max-concurrent 1: of two pushes that moved GET, the second is queued (its comment and
    `fleet status` say where: 1st of 1 for the repository), opened by the collector when the first
    bisection ends, and both reports name commit 12. Each pair's agent time is its jobs' spans as
    the stored runs and jobs give them (JOB_SPAN_S a job)."""
    repo, shas = repository
    get = load_test(builtin_suites_dir() / "quick" / "string-get-100B-pipeline-10.yml")
    with redis_with_aof(tmp_path / "aof") as url:
        r = client(url)
        store, log = tmp_path / "fleet.db", tmp_path / "collector.log"
        collector = redline_process("collector", "--redis", url, "--store", store, "--bisect-max-concurrent", "1",
                                    "--bisect-agent-time", "24h", log=log)
        try:
            work.register_platform(r, "p")
            r.hset(keys.AGENT.key(platform="p", agent="a1"), mapping={"agent": "a1", "job_id": ""})
            items = [work.new_work(r, source="push", platforms=["p"], tests=[get], topologies=None,
                                   sides=[SideSpec("baseline", f"git:{repo}@{shas[0]}"),
                                          SideSpec("comparison", f"git:{repo}@{shas[-1]}")],
                                   settings=work.Settings(runs=5, max_runs=5)) for _ in range(2)]
            for item in items:
                work.enqueue(r, item)
            first_jobs = {job["job_id"].split(":")[0] for job in play_agent(r, shas, str(get.path))}
            assert first_jobs == {item.work_id for item in items}

            def comment_of(work_id):
                return next((f["markdown"] for _, f in r.xrange(keys.COMMENTS.key())
                             if f["work_id"] == work_id and not f.get("bisection")), None)
            comments = [wait_for(lambda: comment_of(item.work_id), "the work item's comment") for item in items]
            opened, queued = sorted(comments, key=lambda markdown: "queued" in markdown)
            assert "the fleet confirms it and bisects the range" in opened
            assert "it is queued for a fleet bisection" in queued and "1st of 1 waiting for this repository" in queued
            assert "--bisect-max-concurrent" in queued
            status = redline("fleet", "status", "--redis", url)
            assert f"queued: 1st of 1 for {repo};" in " ".join(status.stdout.split()), status.stdout + status.stderr
            listed = json.loads(redline("fleet", "status", "--redis", url, "--json").stdout)["bisections"]
            assert sorted(b["stage"] for b in listed) == ["confirming", "queued"]
            reports = []
            for _ in range(80):
                play_agent(r, shas, str(get.path))
                reports = [f for _, f in r.xrange(keys.COMMENTS.key()) if f.get("bisection")]
                if len(reports) == 2:
                    break
                time.sleep(0.5)
            assert len(reports) == 2, log.read_text()[-3000:]
        finally:
            assert stop(collector) == 0
        assert all(f"culprit: {shas[12][:12]}" in report["markdown"] for report in reports)
        assert {report["work_id"] for report in reports} == {item.work_id for item in items}
        states = [json.loads(row[0]) for row in query(store, "SELECT document FROM session_documents "
                                                             "WHERE name='fleet_bisection' ORDER BY session_id")]
        assert [state["stage"] for state in states] == ["reported", "reported"]
        assert states[1]["queued_at"] < states[0]["ended_at"] <= states[1]["opened_at"]     # opened when the first ended
        for state in states:          # one job per pair (GET alone): its agent time is one job's span
            assert [pair["agent_s"] for pair in state["pairs"].values()] == [JOB_SPAN_S] * len(state["pairs"])
        status = redline("fleet", "status", "--redis", url)
        assert status.stdout.count(f"reported: culprit {shas[12][:12]}") == 2, status.stdout
def test_a_step_in_a_branchs_history_is_bisected_by_the_real_collector(tmp_path, repository):
    """The second trigger through the real collector: ten pushes of one commit each to branch main,
    GET 30% more CPU per op from commit 6 on. The push of commit 6 lost its GET job (dead on every
    attempt: no verdict, so no bisection of its own); the branch's history (redline history's
    detector over the collector's store) shows the step between the pushes of commits 5 and 7, and
    the collector opens one bisection from commit 5 (GOOD) to 7 (BAD) by itself, confirms it and
    reports commit 6. Each push's check after it does not open it again."""
    repo, shas = repository
    get, setter = (load_test(builtin_suites_dir() / "quick" / f"{name}.yml")
                   for name in ("string-get-100B-pipeline-10", "string-set-100B-pipeline-10"))
    suite_file = str(get.path)
    stepped = lambda sha, test: 10.0 * (1.3 if test == GET and shas.index(sha) >= 6 else 1.0)   # noqa: E731
    dead_job = {"test": GET, "commit": 6}
    with redis_with_aof(tmp_path / "aof") as url:
        r = client(url)
        store, log = tmp_path / "fleet.db", tmp_path / "collector.log"
        collector = redline_process("collector", "--redis", url, "--store", store, log=log)
        try:
            work.register_platform(r, "p")
            pushes = []
            for at in range(1, 11):
                item = work.new_work(r, source="push", branch="main", platforms=["p"], tests=[get, setter],
                                     topologies=None, settings=work.Settings(runs=5, max_runs=5, duration_s=1.0,
                                                                             warmup_s=0.0),
                                     sides=[SideSpec("baseline", f"git:{repo}@{shas[at - 1]}", (), "libc-malloc"),
                                            SideSpec("comparison", f"git:{repo}@{shas[at]}", (), "libc-malloc")])
                work.enqueue(r, item)
                pushes.append(item.work_id)
                play_branch_agent(r, shas, suite_file, stepped, dead=dead_job)
                wait_for(lambda: r.hget(keys.WORK.key(work_id=item.work_id), "state") in ("done", "failed"),
                         f"push {at} stored")
            # the agents answer the bisection's work items until its report is on the comments stream
            report = played_until_reported(r, lambda: play_branch_agent(r, shas, suite_file, stepped), log,
                                           attempts=60)
        finally:
            assert stop(collector) == 0
        assert "of a `redline history` change point" in report["markdown"], report["markdown"]
        assert f"culprit: {shas[6][:12]}" in report["markdown"], report["markdown"]
        states = [json.loads(d) for d, in query(store, "SELECT document FROM session_documents "
                                                       "WHERE name='fleet_bisection'")]
        assert len(states) == 1, states
        state = states[0]
        assert state["origin"]["kind"] == "history" and state["keys"] == [GET] and state["metric"] == METRIC
        assert state["good"]["sha"] == shas[5] and [c["sha"] for c in state["path"]] == [shas[6], shas[7]]
        assert state["work_id"] == pushes[6] and state["stage"] == "reported"
        assert state["pairs"][f"{shas[5]}..{shas[7]}"]["purpose"] == "confirmation"
        decided = [c for d, in query(store, "SELECT document FROM session_documents WHERE name='history_change_points'")
                   for c in json.loads(d)["change_points"]]
        assert len(decided) == 1 and decided[0]["bisection"] == state["bisection"], decided
        effects = query(store, "SELECT state, count(*) FROM fleet_effects WHERE kind='history' GROUP BY state")
        assert effects == [("done", 10)], effects
        assert "history check failed" not in log.read_text()


def play_branch_agent(r, shas: list[str], suite_file: str, value_of, *, dead: dict | None = None) -> None:
    """Every job waiting on platform p answered with runs of `value_of(sha, test)`; the job of
    `dead["test"]` in the push of commit `dead["commit"]` published as dead (failed on every attempt)."""
    stream = keys.JOBS.key(platform="p")
    work.ensure_group(r, stream, keys.AGENTS_GROUP)
    for _, found in r.xreadgroup(keys.AGENTS_GROUP, "test-agent", {stream: ">"}, count=100) or []:
        for entry_id, fields in found:
            job = json.loads(fields["job"])
            baseline, comparison = (side["target"].rsplit("@", 1)[1] for side in job["sides"])
            common = {"job_id": fields["job_id"], "work_id": fields["work_id"], "platform": "p", "agent": "test-agent",
                      "attempt": "1", "submitted_at": fields["submitted_at"], "started_at": repr(time.time()),
                      "finished_at": repr(time.time())}
            if dead and job["test"] == dead["test"] and comparison == shas[dead["commit"]] and not job.get("step_rule") \
                    and shas.index(baseline) == dead["commit"] - 1:
                result = {**common, "kind": "dead", "error": "build failed on every attempt (test)"}
            else:
                runs = []
                for index in range(job["settings"]["runs"]):
                    for side, sha in (("baseline", baseline), ("comparison", comparison)):
                        noise = int(hashlib.sha1(f"{job['job_id']}{side}{index}".encode()).hexdigest()[:4], 16) / 65535
                        runs.append(Run(test=job["test"], target=f"git:x@{sha}", side=side, run_index=index,
                                        status="ok", suite_file=suite_file, started_at=time.time(),
                                        metrics={METRIC: value_of(sha, job["test"]) * (0.99 + 0.02 * noise),
                                                 "ops_per_sec": 1000.0 + noise}).to_json())
                result = {**common, "kind": "result", "runs": json.dumps(runs)}
            with r.pipeline(transaction=True) as tx:
                tx.xadd(keys.RESULTS.key(), result)
                tx.xack(stream, keys.AGENTS_GROUP, entry_id)
                tx.xdel(stream, entry_id)
                tx.execute()


def test_a_pushed_regression_counts_can_see_is_bisected_counted(tmp_path, repository):
    """GET with pipeline 1 (every followed test can be counted): the collector's loop sends a counted
    confirmation (GOOD and BAD interleaved, 5 runs per side, under callgrind), then every commit
    counted alone by one run with the confirmation's request count per connection, as job documents
    an agent accepts; the report, counted, names commit 12. Each commit counted once."""
    from redline.fleet import entries
    repo, shas = repository
    get, setter = (load_test(builtin_suites_dir() / "quick" / f"{name}.yml")
                   for name in ("string-get-100B-pipeline-1", "string-set-100B-pipeline-1"))
    suites = {GET1: str(get.path), SET1: str(setter.path)}
    with redis_with_aof(tmp_path / "aof") as url:
        r = client(url)
        store, log = tmp_path / "fleet.db", tmp_path / "collector.log"
        collector = redline_process("collector", "--redis", url, "--store", store, log=log)
        jobs: list[dict] = []
        try:
            work.register_platform(r, "p")
            for name in ("a1", "a2"):
                r.hset(keys.AGENT.key(platform="p", agent=name), mapping={"agent": name, "job_id": ""})
            item = work.new_work(r, source="push", platforms=["p"], tests=[get, setter], topologies=None,
                                 sides=[SideSpec("baseline", f"git:{repo}@{shas[0]}", (), "libc-malloc"),
                                        SideSpec("comparison", f"git:{repo}@{shas[-1]}", (), "libc-malloc")],
                                 settings=work.Settings(runs=5, max_runs=5, duration_s=1.0, warmup_s=0.0))
            work.enqueue(r, item)
            report = played_until_reported(r, lambda: jobs.extend(play_agent(r, shas, suites)), log, attempts=80)
        finally:
            assert stop(collector) == 0
    markdown = report["markdown"]
    assert f"culprit: {shas[12][:12]}" in markdown and "Counted under callgrind" in markdown, markdown
    assert "## redline bisect: instructions_per_op" in markdown and "Measured by time" not in markdown
    counted = [job for job in jobs if job["settings"].get("measure") == "instructions"]
    assert counted and len(counted) == len(jobs) - 2                    # everything after the work item itself
    for job in counted:
        entries.job_document(json.loads(json.dumps(job)))                # what an agent checks before it runs one
    own = [job for job in counted if job["settings"].get("profile")]       # the culprit's own change, profiled
    confirmation, *steps = [job for job in counted if job not in own]
    assert own and all(len(job["sides"]) == 2 and job["settings"]["runs"] == 1 for job in own)
    assert [s["target"] for s in confirmation["sides"]] == [f"git:{repo}@{shas[0]}", f"git:{repo}@{shas[-1]}"]
    assert confirmation["test"] == GET1 and confirmation["settings"]["runs"] == 5
    assert "window_requests" not in confirmation["settings"]
    assert steps and all(len(job["sides"]) == 1 and job["sides"][0]["name"] is None and job["settings"]["runs"] == 1
                         and job["settings"]["window_requests"] == REQUESTS and job["test"] == GET1 for job in steps)
    targets = [job["sides"][0]["target"] for job in steps]
    assert len(targets) == len(set(targets))                             # each commit counted once
    state = json.loads(query(store, "SELECT document FROM session_documents WHERE name='fleet_bisection'")[0][0])
    assert state["stage"] == "reported" and state["measure"] == "instructions" and state["per_round"] == 2
    assert len({p["work_id"] for p in state["pairs"].values()}) == len(state["pairs"]) == len(counted)

