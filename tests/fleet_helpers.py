"""What the fleet tests share: real processes (redis-server with AOF, `redline fleet local`,
agents, collectors) and waiting on conditions with generous bounds, never on durations."""

from __future__ import annotations

import json
import os
import select
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import redis

from redline.system.children import spawn
from redline.fleet import keys
from redline.fleet.local import start_redis
from redline.server.process import free_port

REDLINE = [sys.executable, "-m", "redline.cli"]
GENEROUS_S = 600            # a loaded 2-core machine runs these jobs many times slower than an idle one
SERVER = "bin:/usr/bin/redis-server"
QUICK = ["--duration", "1s", "--warmup", "0s", "--runs", "2", "--max-runs", "2"]


def wait_for(condition, what: str, timeout_s: float = GENEROUS_S, every_s: float = 0.2):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(every_s)
    raise AssertionError(f"waited {timeout_s:.0f}s for {what}")


def redline_process(*arguments, log: Path) -> subprocess.Popen:
    with open(log, "ab") as out:
        return spawn([*REDLINE, *map(str, arguments)], stdout=subprocess.PIPE, stderr=out, stdin=subprocess.DEVNULL,
                     env={**os.environ, "COLUMNS": "200"})


def first_lines(process: subprocess.Popen, count: int, timeout_s: float = 120) -> list[str]:
    """The first `count` lines the process writes on stdout (read unbuffered: nothing after them
    is read)."""
    data, deadline, descriptor = b"", time.monotonic() + timeout_s, process.stdout.fileno()
    while data.count(b"\n") < count:
        ready, _, _ = select.select([descriptor], [], [], max(0.0, deadline - time.monotonic()))
        assert ready, f"no {count} lines from the process in {timeout_s:.0f}s: {data!r}"
        chunk = os.read(descriptor, 4096)
        assert chunk, f"the process closed its stdout after {data!r}"
        data += chunk
    return [line.decode().strip() for line in data.split(b"\n")[:count]]



def stop(process: subprocess.Popen, timeout_s: float = GENEROUS_S) -> int:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    return process.wait(timeout=timeout_s)


class FleetURL(str):
    """A fleet Redis URL (without its password) that knows its password file: what `fleet local`
    prints on its first two lines. The helpers pass the file on (`--redis-password-file`)."""

    def __new__(cls, url: str, password_file: Path | None = None):
        made = super().__new__(cls, url)
        made.password_file = password_file
        return made


def redis_arguments(url: str) -> list:
    password_file = getattr(url, "password_file", None)
    return ["--redis", str(url), *(["--redis-password-file", password_file] if password_file else [])]


def fleet_local(*arguments, log: Path) -> tuple[subprocess.Popen, FleetURL]:
    """`redline fleet local …`: the process and its Redis (URL and password file, its first two lines)."""
    process = redline_process("fleet", "local", *arguments, log=log)
    url, password_file = first_lines(process, 2)
    return process, FleetURL(url, Path(password_file))


def redline(*arguments, cwd: Path | None = None, timeout_s: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([*REDLINE, *map(str, arguments)], capture_output=True, text=True, timeout=timeout_s,
                          cwd=cwd, env={**os.environ, "COLUMNS": "200"})


def submit(url: str, *arguments) -> dict:
    done = redline("submit", *redis_arguments(url), "--json", *arguments)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def work_state(url: str, work_id: str) -> dict:
    done = redline("fleet", "status", *redis_arguments(url), work_id, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def finished(url: str, work_id: str) -> dict | None:
    state = work_state(url, work_id)
    return state if state["state"] in ("done", "failed") else None


def client(url: str) -> redis.Redis:
    password_file = getattr(url, "password_file", None)
    password = password_file.read_text().strip() if password_file else None
    return redis.Redis.from_url(str(url), password=password, decode_responses=True)


def query(store: Path, sql: str, *parameters) -> list[tuple]:
    with sqlite3.connect(store, timeout=60) as db:
        return db.execute(sql, parameters).fetchall()


def runs_of_work(store: Path, work_id: str) -> list[tuple]:
    """(job_id, uid, test, side, run_index, status, purpose) of every stored run of the work item."""
    return query(store, "SELECT f.job_id, f.uid, r.test, r.side, r.run_index, r.status, r.purpose FROM fleet_runs f "
                        "JOIN runs r ON r.id = f.run_id JOIN fleet_jobs j ON j.job_id = f.job_id "
                        "WHERE j.work_id=? ORDER BY r.id", work_id)


def assert_every_job_once(store: Path, work_id: str, *, jobs: int, runs_per_side: int) -> None:
    """Each job stored once, each test's every side with runs 0..N-1 exactly once, no uid twice."""
    stored = query(store, "SELECT job_id, status FROM fleet_jobs WHERE work_id=?", work_id)
    assert len(stored) == jobs and all(status == "ok" for _, status in stored), stored
    runs = [r for r in runs_of_work(store, work_id) if r[6] == "measure"]
    assert len({r[1] for r in runs}) == len(runs)
    by_side: dict[tuple, list[int]] = {}
    for _, _, test, side, index, status, _ in runs:
        assert status == "ok", runs
        by_side.setdefault((test, side), []).append(index)
    assert len(by_side) == jobs * 2, by_side
    for key, indexes in by_side.items():
        assert sorted(indexes) == list(range(runs_per_side)), (key, indexes)


@contextmanager
def redis_with_aof(directory: Path):
    """A redis-server as `fleet local` starts it (AOF, fsync every second) in `directory`: its URL."""
    directory.mkdir(parents=True, exist_ok=True)
    server = start_redis(free_port(), directory)
    try:
        yield f"redis://127.0.0.1:{server.args[server.args.index('--port') + 1]}/0"
    finally:
        server.terminate()
        server.wait(timeout=120)


def stop_an_agent_mid_job(r, platform: str, spared: set[str]) -> dict | None:
    """An agent of `platform` stopped (SIGSTOP) while it holds a job not in `spared` that it has not
    finished (its hash, with pid and job_id), or None; the caller kills it or lets it go on."""
    for key in r.scan_iter(match=keys.AGENT.key(platform=platform, agent="*")):
        agent = r.hgetall(key)
        if not agent.get("job_id") or agent["job_id"] in spared or not agent.get("pid"):
            continue
        os.kill(int(agent["pid"]), signal.SIGSTOP)
        holds = r.xpending_range(keys.JOBS.key(platform=platform), keys.AGENTS_GROUP, "-", "+", 10,
                                 consumername=agent["agent"])
        if holds and r.hget(key, "job_id") == agent["job_id"]:
            return agent
        os.kill(int(agent["pid"]), signal.SIGCONT)      # it finished between the two looks: not this one
    return None
