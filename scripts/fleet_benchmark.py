"""The fleet's coordination overhead and exactly-once count under random SIGKILLs (a benchmark, not
a test): 1 redis-server (AOF everysec), 1 real `redline collector`, 8 agents, 500 jobs.

THE AGENTS HERE DO NOT MEASURE ANYTHING. They are the real redline.fleet.agent.Agent (XREADGROUP,
XAUTOCLAIM, heartbeats, MULTI/EXEC outcome, retries) with a stand-in executor that sleeps
--job-seconds and returns four synthetic run documents per job: what is timed is the fleet's
coordination (Redis Streams, the collector's SQLite writes, verdicts and comment), not benchmarks.

Three phases in one invocation:
  overhead   --jobs jobs of 0 s in one work item, no kills: jobs/s the fleet coordinates at most
             (submit → every job stored → verdicts and comment written)
  pickup     50 one-job work items, each submitted when the last is stored: submit → start of a job
             that finds an idle agent (the other phases' submit → start includes queueing)
  kills      jobs of --job-seconds, an agent SIGKILLed (and replaced) every --kill-every seconds:
             every job stored exactly once? p50/p99 submit → start

    .venv/bin/python scripts/fleet_benchmark.py [--agents 8] [--jobs 500] [--job-seconds 0.2] [--kill-every 1.5]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from redline.fleet import keys, work  # noqa: E402
from redline.engine.job import SideSpec  # noqa: E402
from redline.core.run import Run  # noqa: E402

PLATFORM = "bench"
BOUND_S = 1800


class StandInExecutor:
    """Sleeps, then returns 2 runs per side with the job's test name: NOT a measurement."""

    def __init__(self, seconds: float):
        self.seconds = seconds

    def execute(self, document: dict, *, session_id: int) -> list[dict]:
        time.sleep(self.seconds)
        return [Run(test=document["test"], target=side["target"], side=side["name"], run_index=index, status="ok",
                    metrics={"ops_per_sec": random.uniform(9e4, 1.1e5)}).to_json()
                for index in range(2) for side in document["sides"]]


def agent_main(args) -> int:
    from redline.fleet.agent import Agent
    from redline.fleet.process import Stopping, connect
    from redline.store.results import Store
    stopping = Stopping()
    Agent(connect(args.redis), platform=PLATFORM, name=args.name, store=Store(args.store), claim_idle_s=args.claim_idle,
          heartbeat_s=1.0, max_attempts=5, stopping=stopping, executor=StandInExecutor(args.job_seconds)).serve()
    return 0


def spawn_agent(url: str, name: str, directory: Path, args, job_seconds: float) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, __file__, "agent", "--redis", url, "--name", name, "--store",
                             str(directory / f"{name}.db"), "--job-seconds", str(job_seconds),
                             "--claim-idle", str(args.claim_idle)],
                            stderr=open(directory / "agents.log", "ab"), stdin=subprocess.DEVNULL)


def phase(url: str, directory: Path, args, *, jobs: int, batch: int, job_seconds: float,
          kill_every: float | None) -> dict:
    import redis
    client = redis.Redis.from_url(url, decode_responses=True)
    agents = {f"a{n}": spawn_agent(url, f"a{n}", directory, args, job_seconds) for n in range(args.agents)}
    deadline = time.monotonic() + 60
    while len(list(client.scan_iter(match=keys.AGENT.key(platform=PLATFORM, agent="*")))) < args.agents:
        assert time.monotonic() < deadline, "agents did not start"
        time.sleep(0.1)
    sides = [SideSpec("baseline", "bin:/usr/bin/redis-server"), SideSpec("comparison", "bin:/usr/bin/redis-server")]
    items = [work.WorkItem(work_id=work.new_work_id() + f"-{n}", source="cli", sides=sides, platforms=[PLATFORM],
                           tests=[("builtin:quick/set-sadd.yml", f"stand-in-{n}-{i}") for i in range(batch)],
                           topologies=["oss-standalone"], settings=work.Settings(runs=2, max_runs=2))
             for n in range(jobs // batch)]
    started = time.monotonic()
    kills, next_kill, serial = 0, started + (kill_every or 0), args.agents
    deadline = started + BOUND_S
    for item in items:                  # one after the other: the next is submitted when the last is stored
        work.enqueue(client, item)
        while client.hget(keys.WORK.key(work_id=item.work_id), "state") not in ("done", "failed"):
            if time.monotonic() > deadline:
                raise SystemExit(f"work item not finished after {BOUND_S}s")
            if kill_every and time.monotonic() >= next_kill:
                name = random.choice(sorted(agents))
                agents[name].send_signal(signal.SIGKILL)
                agents[name].wait()
                del agents[name]
                agents[f"a{serial}"] = spawn_agent(url, f"a{serial}", directory, args, job_seconds)
                serial, kills, next_kill = serial + 1, kills + 1, next_kill + kill_every
            time.sleep(0.01)
    wall = time.monotonic() - started
    for process in agents.values():
        process.send_signal(signal.SIGTERM)
    for process in agents.values():
        process.wait(timeout=120)
    with sqlite3.connect(directory / "fleet.db") as db:
        mine = f"work_id IN ({','.join('?' * len(items))})"
        ids = [item.work_id for item in items]
        stored = db.execute(f"SELECT count(*), count(DISTINCT job_id), sum(attempt > 1) FROM fleet_jobs WHERE {mine}",
                            ids).fetchone()
        runs = db.execute("SELECT count(*), count(DISTINCT f.uid) FROM fleet_runs f JOIN fleet_jobs j "
                          f"ON j.job_id = f.job_id WHERE j.{mine}", ids).fetchone()
        delays = sorted(s - q for q, s in db.execute(f"SELECT submitted_at, started_at FROM fleet_jobs WHERE {mine}",
                                                     ids))
    return {"jobs": jobs, "work_items": len(items), "agents": args.agents, "job_seconds": job_seconds, "kills": kills,
            "wall_s": round(wall, 2), "jobs_per_s": round(jobs / wall, 1),
            "stored_jobs": stored[0], "distinct_jobs": stored[1], "jobs_rerun": stored[2] or 0,
            "stored_runs": runs[0], "distinct_runs": runs[1], "expected_runs": 4 * jobs,
            "submit_to_start_p50_s": round(delays[len(delays) // 2], 3),
            "submit_to_start_p99_s": round(delays[int(len(delays) * 0.99) - 1], 3)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode")
    agent = sub.add_parser("agent")
    agent.add_argument("--redis", required=True)
    agent.add_argument("--name", required=True)
    agent.add_argument("--store", required=True)
    agent.add_argument("--job-seconds", type=float, default=0.0)
    agent.add_argument("--claim-idle", type=float, default=3.0)
    parser.add_argument("--agents", type=int, default=8)
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--job-seconds", type=float, default=0.2)
    parser.add_argument("--kill-every", type=float, default=1.5)
    parser.add_argument("--claim-idle", type=float, default=3.0)
    args = parser.parse_args()
    if args.mode == "agent":
        return agent_main(args)

    from redline.fleet.local import start_redis
    from redline.server.process import free_port
    directory = Path(tempfile.mkdtemp(prefix="redline-fleet-bench-"))
    port = free_port()
    server = start_redis(port, directory)
    url = f"redis://127.0.0.1:{port}/0"
    collector = subprocess.Popen([sys.executable, "-m", "redline.cli", "collector", "--redis", url, "--store",
                                  str(directory / "fleet.db")], cwd=REPO, stdin=subprocess.DEVNULL,
                                 stderr=open(directory / "collector.log", "ab"))
    try:
        results = {"overhead": phase(url, directory, args, jobs=args.jobs, batch=args.jobs, job_seconds=0.0,
                                     kill_every=None),
                   "pickup": phase(url, directory, args, jobs=50, batch=1, job_seconds=0.0, kill_every=None),
                   "kills": phase(url, directory, args, jobs=args.jobs, batch=args.jobs, job_seconds=args.job_seconds,
                                  kill_every=args.kill_every)}
        duplicates = (directory / "collector.log").read_text().count("duplicate result ignored")
        results["kills"]["duplicate_results_ignored"] = duplicates
        print(json.dumps({"machine": {"cpus": os.cpu_count(), "load": os.getloadavg()[0]}, **results}, indent=1))
    finally:
        collector.send_signal(signal.SIGTERM)
        collector.wait(timeout=120)
        server.terminate()
        server.wait(timeout=120)
    return 0


if __name__ == "__main__":
    sys.exit(main())
