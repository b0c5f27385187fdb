"""The fleet's trust boundary with real parts (issue #30): one `redline fleet local` for the module
(a real redis-server with a generated password, a real collector exporting to a real
RedisTimeSeries that needs a password of its own, a real agent), real `redline` commands, the real
SQLite store. What is asked of it:

- it runs in the README's order (`fleet local … &`, then `submit` at once);
- its Redis refuses a client without the password, which lives in a file only its user reads;
- no password or token shows in what any command prints, in the store, in the HTML report, or on
  the command line of any of its children (sampled from /proc while the fleet works);
- an agent runs only targets and suites its owner allowed, and never what a job merely names;
- malformed jobs and results, written straight into Redis as anyone who reaches it could, are
  dead-lettered with their reason and stop neither the agent nor the collector;
- a platform no agent registered takes no work; untrusted text is inert in the comment.
Every wait is on a condition with a generous bound."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import threading
from pathlib import Path

import pytest

from redline.fleet import keys
from redline.output.markdown_text import literal
from tests.fleet_helpers import (QUICK, SERVER, FleetURL, client, finished, fleet_local, query, redis_arguments,
                                 redline, stop, submit, wait_for)
from timeseries_server import TimeSeriesServer

PLATFORM = "ci"
EXPORT_PASSWORD = "ts-Secret-4f9c1e"          # the RedisTimeSeries server's; the fleet's is generated


def descendants(root: int) -> list[int]:
    """Every live process below `root`, from /proc."""
    parent_of = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                parent_of[int(entry.name)] = int(fields[1])
            except (OSError, IndexError, ValueError):
                continue
    found, frontier = [], [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parent_of.items() if ppid == parent]
        found += children
        frontier += children
    return found


class CommandLines(threading.Thread):
    """Samples the command lines of every descendant of a process until stopped."""

    def __init__(self, root: int):
        super().__init__(daemon=True)
        self.root, self.seen, self.done = root, set(), threading.Event()

    def run(self):
        while not self.done.wait(0.05):
            for pid in descendants(self.root):
                try:
                    self.seen.add((Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
                                   .decode(errors="replace").strip()))
                except OSError:
                    continue


class Fleet:
    def __init__(self, directory: Path, timeseries: TimeSeriesServer):
        self.directory, self.store, self.log = directory, directory / "fleet.db", directory / "fleet.log"
        self.export_url = f"redis://:{EXPORT_PASSWORD}@127.0.0.1:{timeseries.port}/0"
        self.process, self.url = fleet_local("--agents", 1, "--store", self.store, "--platform", PLATFORM,
                                             "--claim-idle", "5s", "--max-attempts", 2, "--dir", directory / "redis",
                                             "--export", self.export_url, "--branch", "hardening", log=self.log)
        self.commands = CommandLines(self.process.pid)
        self.commands.start()
        # the README's order: submit as soon as fleet local printed its URL, before any agent started
        self.first = redline("submit", *redis_arguments(self.url), "--json", "--baseline", SERVER, "--comparison",
                             SERVER, "--name", "set-sadd$", *QUICK)
        self.password = self.url.password_file.read_text().strip()

    def redis(self):
        return client(self.url)

    def agent_pid(self) -> str:
        (key,) = self.redis().scan_iter(match=keys.AGENT.key(platform=PLATFORM, agent="*"))
        return self.redis().hget(key, "pid")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    directory = tmp_path_factory.mktemp("fleet")
    timeseries = TimeSeriesServer(directory / "timeseries")
    timeseries.client().config_set("requirepass", EXPORT_PASSWORD)
    running = Fleet(directory, timeseries)
    try:
        yield running
    finally:
        code = stop(running.process)
        running.commands.done.set()
        timeseries.stop()
    assert code == 0


def test_submit_right_after_fleet_local_printed_its_url_is_accepted(fleet):
    """README: `redline fleet local … &` then `redline submit …` at once; fleet local registers its
    platform before it prints the URL, so no agent needs to have started yet."""
    assert fleet.first.returncode == 0, fleet.first.stderr
    work = json.loads(fleet.first.stdout)
    assert work["platforms"] == [PLATFORM] and work["jobs"] == 1
    state = wait_for(lambda: finished(fleet.url, work["work_id"]), "the first work item")
    assert state["state"] == "done" and state["jobs_done"] == 1


def test_the_fleet_redis_needs_the_password_that_only_its_user_can_read(fleet):
    password_file = fleet.url.password_file
    assert stat.S_IMODE(password_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(password_file.parent.stat().st_mode) == 0o700
    assert len(fleet.password) >= 32 and fleet.password not in fleet.url
    refused = redline("fleet", "status", "--redis", fleet.url)                 # no password given
    assert refused.returncode == 2 and refused.stderr.splitlines() == [
        f"redline: error: Redis at {fleet.url} requires a password: give --redis-password-file FILE (or "
        "$REDLINE_REDIS_PASSWORD_FILE, or the password in the URL of $REDLINE_REDIS)"]
    wrong = redline("fleet", "status", "--redis", fleet.url.replace("redis://", "redis://:not-it@"))
    assert wrong.returncode == 2 and "refused the password" in wrong.stderr and "not-it" not in wrong.stderr
    import redis
    with pytest.raises(redis.AuthenticationError):
        redis.Redis.from_url(str(fleet.url)).ping()
    # the environment is the other way to give it: the whole URL in REDLINE_REDIS
    environment = {**os.environ, "REDLINE_REDIS": str(fleet.url).replace("redis://", f"redis://:{fleet.password}@")}
    import subprocess
    import sys
    status = subprocess.run([sys.executable, "-m", "redline.cli", "fleet", "status", "--json"], capture_output=True,
                            text=True, timeout=120, env=environment)
    assert status.returncode == 0 and PLATFORM in status.stdout and fleet.password not in status.stdout + status.stderr


def test_no_password_or_token_in_output_store_report_or_any_childs_command_line(fleet, tmp_path):
    wait_for(lambda: finished(fleet.url, json.loads(fleet.first.stdout)["work_id"]), "the first work item")
    secrets = (fleet.password, EXPORT_PASSWORD)
    # the fleet's children, sampled from /proc while it worked: Redis, the collector, the agent and
    # what its job started (redis-server, redline-load); none was given a secret on its command line
    seen = " | ".join(fleet.commands.seen)
    for child in ("redis-server", "redline.cli collector", "redline.cli agent", "redline-load"):
        assert child in seen, (child, seen[:2000])
    assert "--export" not in seen and "--redis-password-file" in seen
    # a run exporting with the password in the URL, and one with the password as a URL parameter
    store, report = tmp_path / "run.db", tmp_path / "run.html"
    port = fleet.export_url.rsplit(":", 1)[1].split("/")[0]
    outputs = []
    for export in (fleet.export_url, f"redis://127.0.0.1:{port}/0?password={EXPORT_PASSWORD}"):
        done = redline("run", "quick", "--name", "set-sadd$", "--runs", "1", "--duration", "1s", "--warmup", "0s",
                       "--store", store, "--html", report, "--export", export)
        assert done.returncode == 0, done.stderr[-3000:]
        assert "exported to redis://" in done.stderr
        outputs += [done.stdout, done.stderr]
    # error paths name the URL without its password
    for arguments in (("submit", "--redis", f"redis://:{fleet.password}@127.0.0.1:1/0", "--comparison", SERVER),
                      ("run", "quick", "--export", f"redis://:{EXPORT_PASSWORD}@127.0.0.1:1/0", "--store", store)):
        done = redline(*arguments)
        assert done.returncode == 1 and ":***@127.0.0.1:1" in done.stderr, done.stderr
        outputs += [done.stdout, done.stderr]
    texts = {"fleet log": fleet.log.read_text(), "run output": "\n".join(outputs), "report": report.read_text()}
    for path in (fleet.store, store):
        with sqlite3.connect(path) as db:
            tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
            texts[f"store {path.name}"] = "\n".join(repr(row) for table in tables
                                                    for row in db.execute(f"SELECT * FROM {table}"))
    assert "set-sadd" in texts["report"] and "--export" in texts[f"store {store.name}"]
    for where, text in texts.items():
        for secret in secrets:
            assert secret not in text, where


def evil_server(directory: Path) -> tuple[Path, Path]:
    """A 'server binary' that only leaves a mark when it is executed."""
    mark, program = directory / "executed", directory / "evil-server"
    program.write_text(f"#!/bin/sh\ntouch {mark}\nexec /usr/bin/redis-server \"$@\"\n")
    program.chmod(0o755)
    return program, mark


def job_entry(job_id: str, document_id: str | None = None, **overrides) -> dict:
    """A job document as submit writes it, with `overrides` (and another job_id inside it)."""
    job = {"format": 1, "suite": "builtin:quick/set-sadd.yml", "test": "quick-set-sadd", "topology": "oss-standalone",
           "sides": [{"name": "baseline", "target": SERVER, "config": {}, "variant": None},
                     {"name": "comparison", "target": SERVER, "config": {}, "variant": None}],
           "settings": {"runs": 2, "duration_s": 1.0, "warmup_s": 0.0}, "max_runs": 2, "lone_p_value": 0.01,
           "job_id": document_id or job_id, **overrides}
    return {"job_id": job_id, "work_id": "hostile", "attempt": "1", "submitted_at": "0", "job": json.dumps(job)}


def dead_letters(r, since: str = "-") -> dict[str, str]:
    return {fields["job_id"]: fields["error"] for _, fields in r.xrange(keys.DEAD.key(), min=since)}


def test_an_agent_runs_only_what_its_owner_allowed(fleet, tmp_path):
    """Submitted through `redline submit` (a binary that exists on the submitter) and written
    straight into the jobs stream: each job naming what the agent's owner did not allow (by default
    only the redis-server on PATH) is dead-lettered with the reason, and nothing it named ran."""
    r = fleet.redis()
    program, mark = evil_server(tmp_path)
    work = submit(fleet.url, "--baseline", SERVER, "--comparison", f"bin:{program}", "--name", "set-sadd$", *QUICK)
    state = wait_for(lambda: finished(fleet.url, work["work_id"]), "the refused work item to end")
    assert state["state"] == "failed" and state["jobs_dead"] == 1
    stream = keys.JOBS.key(platform=PLATFORM)
    hostile = {"loadmodule": job_entry("h-module", sides=[{"name": None, "target": SERVER,
                                                           "config": {"loadmodule": str(tmp_path / "x.so")}}]),
               "suite": job_entry("h-suite", suite="builtin:../../../../../../etc/passwd"),
               "variant": job_entry("h-variant", sides=[{"name": None, "target": SERVER,
                                                         "variant": str(tmp_path / "cc.yml")}]),
               "git": job_entry("h-git", sides=[{"name": None, "target": f"git:{tmp_path}@HEAD"}])}
    for fields in hostile.values():
        r.xadd(stream, fields)
    letters = wait_for(lambda: (lambda d: d if set(d) >= {"h-module", "h-suite", "h-variant", "h-git"} else None)(
        dead_letters(r)), "the hostile jobs dead-lettered")
    assert "loadmodule loads code named by the job" in letters["h-module"]
    assert "suite 'builtin:../../../../../../etc/passwd' is not allowed" in letters["h-suite"]
    assert "agent" in letters["h-git"] and "is not allowed on this agent" in letters["h-git"]
    assert letters["h-variant"] == (f"refused: build variant '{tmp_path}/cc.yml' is a file: a job may name only "
                                    "the shipped variants")
    (refused,) = [error for job, error in dead_letters(r).items() if job.startswith(work["work_id"])]
    assert refused.startswith(f"refused: target 'bin:{program}' is not allowed on this agent (allowed: bin:")
    assert not mark.exists(), "the agent executed a program a job merely named"


def test_malformed_job_entries_are_dead_lettered_and_the_agent_goes_on(fleet):
    r = fleet.redis()
    pid = fleet.agent_pid()
    stream = keys.JOBS.key(platform=PLATFORM)
    poison = {"p-attempt": {**job_entry("p-attempt"), "attempt": "one"},
              "p-json": {**job_entry("p-json"), "job": "[1, 2"},
              "p-list": {**job_entry("p-list"), "job": "[1, 2]"},
              "p-sides": job_entry("p-sides", sides="baseline"),
              "p-runs": job_entry("p-runs", settings={"runs": "many"}),
              "p-id": job_entry("p-id", "another"),
              "p-deep": {**job_entry("p-deep"), "job": "[" * 100_000 + "]" * 100_000}}
    for fields in poison.values():
        r.xadd(stream, fields)
    r.xadd(stream, {"no": "fields of a job"})
    letters = wait_for(lambda: (lambda d: d if set(d) >= set(poison) else None)(dead_letters(r)),
                       "every malformed job dead-lettered")
    assert letters["p-attempt"] == "malformed job entry: attempt: 'one' is not a whole number"
    assert letters["p-json"].startswith("malformed job entry: job: not JSON")
    assert letters["p-list"] == "malformed job entry: job: expected a JSON object"
    assert letters["p-sides"] == "malformed job entry: job.sides: expected a list of one or two sides"
    assert letters["p-runs"] == "malformed job entry: job.settings.runs: 'many' is not a whole number"
    assert letters["p-id"] == "malformed job entry: job: its job_id 'another' is not the entry's 'p-id'"
    assert letters["p-deep"].startswith("malformed job entry: job: not JSON")
    wait_for(lambda: r.xlen(stream) == 0, "the jobs stream empty")
    assert fleet.agent_pid() == pid and "exited, started again" not in fleet.log.read_text()


def hostile_work(r, work_id: str) -> None:
    """A work item of one job, written as submit writes its hash."""
    r.hset(keys.WORK.key(work_id=work_id), mapping={"work_id": work_id, "created_at": "0", "source": "cli",
                                                   "baseline": SERVER, "comparison": SERVER,
                                                   "platforms": json.dumps([PLATFORM]), "jobs_total": "1",
                                                   "jobs_done": "0", "jobs_dead": "0", "state": "queued",
                                                   "github": "", "runs": "2", "max_runs": "2"})


def result_fields(work_id: str, job_id: str, **fields) -> dict:
    return {"kind": "result", "job_id": job_id, "work_id": work_id, "platform": PLATFORM, "agent": "someone",
            "attempt": "1", "submitted_at": "0", "started_at": "0", "finished_at": "0", **fields}


def test_malformed_results_are_dead_lettered_and_never_stop_the_collector(fleet):
    r = fleet.redis()
    for work_id in ("w-runs", "w-doc", "w-ref", "w-attempt", "w-mention"):
        hostile_work(r, work_id)
    results = keys.RESULTS.key()
    mention = "@octocat ![x](http://evil.example/x.png) [click](http://evil.example) <img src=x> `"
    entries = [result_fields("w-runs", "w-runs:1", runs="not json"),
               result_fields("w-doc", "w-doc:1", runs=json.dumps([{"format": 1, "uid": "x"}])),
               result_fields("w-ref", "w-ref:1", runs_ref="redline:blob:nothing", runs_sha256="0" * 64),
               result_fields("w-attempt", "w-attempt:1", attempt="first", runs="[]"),
               {"kind": "surprise"},
               result_fields("w-mention", "w-mention:1", kind="dead", error=mention)]
    for fields in entries:
        r.xadd(results, fields)
    for work_id in ("w-runs", "w-doc", "w-ref", "w-attempt", "w-mention"):
        wait_for(lambda: r.hget(keys.WORK.key(work_id=work_id), "state") == "failed", f"{work_id} failed")
    wait_for(lambda: r.xlen(results) == 0, "the results stream empty")
    letters = dead_letters(r)
    errors = dict(query(fleet.store, "SELECT job_id, error FROM fleet_jobs WHERE status='dead'"))
    expected = {"w-runs:1": "runs: not JSON (Expecting value: line 1 column 1 (char 0))",
                "w-doc:1": "runs[0].uid: 'x' is not of the expected form",
                "w-ref:1": "malformed result entry: runs_ref 'redline:blob:nothing' is not the blob key of its sha256",
                "w-attempt:1": "malformed result entry: attempt: 'first' is not a whole number"}
    for job_id, error in expected.items():       # on the dead-letter stream and as the job's error in the store
        assert letters[job_id] == errors[job_id] == error, job_id
    assert "malformed result entry: kind: 'surprise' is neither result nor dead" in letters.values()
    assert "collector exited" not in fleet.log.read_text() and "collector refused" not in fleet.log.read_text()
    # untrusted text in the comment: inside a code span, where mentions, images and links are inert
    comment, = query(fleet.store, "SELECT comment FROM fleet_work WHERE work_id='w-mention'")[0]
    assert literal(mention) in comment
    outside = comment.replace(literal(mention), "")
    for live in ("@octocat", "![x]", "](http://evil.example", "<img"):
        assert live not in outside, live


def test_a_platform_no_agent_registered_takes_no_work(fleet):
    r = fleet.redis()
    typo = redline("submit", *redis_arguments(fleet.url), "--platform", "cii", "--comparison", SERVER, "--name",
                   "set-sadd$")
    assert typo.returncode == 2 and typo.stderr.splitlines() == [
        f"redline: error: no agent of platform 'cii' registered in the last 10 minutes (live: {PLATFORM})"]
    assert not r.sismember(keys.PLATFORMS.key(), "cii") and not r.exists(keys.JOBS.key(platform="cii"))
    assert 0 < r.ttl(keys.PLATFORM.key(platform=PLATFORM)) <= 600      # renewed by the agent's heartbeat


def test_fleet_local_refuses_a_port_where_another_server_listens(tmp_path):
    from conftest import start_redis_server
    other = start_redis_server(tmp_path)
    try:
        done = redline("fleet", "local", "--port", other.port, "--store", tmp_path / "fleet.db", timeout_s=120)
        assert done.returncode == 2 and done.stderr.splitlines() == [
            f"redline: error: --port {other.port}: 127.0.0.1:{other.port} is in use (another server listens "
            "there); choose another port or leave --port out"]
        assert other.client().dbsize() == 0 and not (tmp_path / "fleet.db").exists()
    finally:
        other.stop()

