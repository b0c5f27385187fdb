"""The closed loop end to end on a local fleet (#34), as docs/fleet.md "The closed loop" reports it:
`redline fleet local --agents K`, `redline api`, one signed push event from GOOD to BAD of a local
redis/redis clone, and then nothing but waiting: the push's work item, its verdict, the
confirmation, the fleet bisection in rounds of K, the report on the comments stream. Prints the
time from the webhook to each stage and the report.

    .venv/bin/python scripts/fleet_loop_demo.py --repository ~/src/redis --good 7.0.5 --bad 7.0.7 \\
        --suite ../shared/upstream-suites/test-suites --name 'geo-60M-elements-geosearch-fromlonlat-bybox$' \\
        --scale 0.1644 --agents 3 --out /tmp/loop-demo

With `--kill N`, N agents are SIGKILLed in the middle of a bisection step (one every `--kill-every`
seconds of the bisecting stage; `fleet local` starts a replacement, the step is claimed by another
agent after `--claim-idle`), and at the end every pair's jobs are listed as the store holds them
(stored once, the killed ones at attempt 2).

Everything it starts is stopped at the end (or on Ctrl-C); the fleet's store and log stay in --out.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import redis

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from redline.fleet import keys  # noqa: E402
from redline.server.process import free_port  # noqa: E402
from redline.store.fleet_ledger import Ledger  # noqa: E402
from redline.store.results import Store  # noqa: E402
from tests.fleet_helpers import stop_an_agent_mid_job  # noqa: E402  (the fleet tests' way of catching an agent mid-job)

REDLINE = [sys.executable, "-m", "redline.cli"]


def started(arguments: list[str], log: Path) -> subprocess.Popen:
    return subprocess.Popen([*REDLINE, *arguments], stdout=subprocess.PIPE, stderr=log.open("a"), text=True, cwd=REPO)


def listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def commit_of(repository: Path, ref: str) -> str:
    return subprocess.run(["git", "-C", str(repository), "rev-parse", f"{ref}^{{commit}}"], capture_output=True,
                          text=True, check=True).stdout.strip()


def push(endpoint: str, secret: bytes, before: str, after: str) -> dict:
    """POST a push event as GitHub signs it; the API's answer (work_id)."""
    body = json.dumps({"ref": "refs/heads/demo", "before": before, "after": after,
                       "repository": {"full_name": "redis/redis", "default_branch": "demo"}}).encode()
    signature = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
    request = urllib.request.Request(endpoint, data=body, method="POST", headers={
        "X-GitHub-Event": "push", "X-GitHub-Delivery": secrets.token_hex(8), "Content-Type": "application/json",
        "X-Hub-Signature-256": signature})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())


def wait(condition, every_s: float = 5.0):
    while not (value := condition()):
        time.sleep(every_s)
    return value


def stored_jobs(store: Path, bisection_document: dict) -> list[str]:
    """One line per pair of the bisection: its jobs as the store holds them."""
    ledger, lines = Ledger(Store(store)), []
    for key, pair in bisection_document["pairs"].items():
        jobs = ledger.jobs(pair["work_id"])
        lines.append(f"  {pair['purpose']:<12} {key[:9]}..{key.split('..')[1][:9]}  " + ", ".join(
            f"{j['job_id']} {j['status']} by {j['agent']} attempt {j['attempt']}" for j in jobs))
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repository", type=Path, required=True)
    parser.add_argument("--good", required=True)
    parser.add_argument("--bad", required=True)
    parser.add_argument("--suite", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--scale", default="1")
    parser.add_argument("--agents", type=int, default=3)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--duration", default="3s")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--kill", type=int, default=0, help="agents to SIGKILL in the middle of bisection steps")
    parser.add_argument("--kill-every", type=float, default=60.0, help="seconds between two kills")
    parser.add_argument("--claim-idle", default="30s", help="fleet local's --claim-idle")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, signal.default_int_handler)      # SIGTERM stops what it started, as Ctrl-C
    repository = args.repository.expanduser().resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    log, secret_file = args.out / "fleet.log", args.out / "webhook-secret"
    secret = secrets.token_hex(16).encode()
    secret_file.write_bytes(secret + b"\n")
    secret_file.chmod(0o600)
    fleet = started(["fleet", "local", "--agents", str(args.agents), "--store", str(args.out / "fleet.db"),
                     "--claim-idle", args.claim_idle,
                     "--platform", "demo", "--dir", str(args.out / "redis"), "--allow-target", f"git:{repository}",
                     *(["--allow-target", f"suite:{Path(args.suite).resolve()}"] if Path(args.suite).is_dir() else [])], log)
    url, password_file = fleet.stdout.readline().strip(), fleet.stdout.readline().strip()
    fleet_redis = ["--redis", url, "--redis-password-file", password_file]
    port = free_port()
    api = started(["api", *fleet_redis, "--port", str(port), "--secret-file", str(secret_file),
                   "--repository", str(repository), "--branch", "demo", "--platform", "demo", "--suite", args.suite,
                   "--name", args.name, "--scale", args.scale, "--runs", str(args.runs), "--max-runs", str(args.runs),
                   "--duration", args.duration, "--warmup", "1s"], log)
    try:
        r = redis.Redis.from_url(url, password=Path(password_file).read_text().strip(), decode_responses=True)
        wait(lambda: len(list(r.scan_iter(match=keys.AGENT.key(platform="demo", agent="*")))) == args.agents, 1)
        wait(lambda: api.poll() is not None or listening(port), 1)
        t0 = time.monotonic()
        work_id = push(f"http://127.0.0.1:{port}/webhook", secret, commit_of(repository, args.good),
                       commit_of(repository, args.bad))["work_id"]
        print(f"push {args.good} → {args.bad}: work item {work_id}", flush=True)
        seen, killed, last_kill = None, [], 0.0

        def kill_one(state: dict) -> None:
            nonlocal last_kill
            if len(killed) >= args.kill or state.get("stage") != "bisecting" or \
                    time.monotonic() - last_kill < args.kill_every:
                return
            victim = stop_an_agent_mid_job(r, "demo", {v["job_id"] for v in killed})
            if victim:
                os.kill(int(victim["pid"]), signal.SIGKILL)
                killed.append(victim)
                last_kill = time.monotonic()
                print(f"{time.monotonic() - t0:7.0f}s  SIGKILL agent {victim['agent']} (pid {victim['pid']}) in the "
                      f"middle of job {victim['job_id']}", flush=True)

        def report():
            nonlocal seen
            for bisection in r.zrange(keys.BISECTIONS.key(), 0, -1):
                state = r.hgetall(keys.BISECTION.key(bisection=bisection))
                kill_one(state)
                line = " ".join(f"{k}={v}" for k, v in sorted(state.items()) if k in ("stage", "round", "rounds", "culprit"))
                if line != seen:
                    seen = line
                    print(f"{time.monotonic() - t0:7.0f}s  {line}", flush=True)
            return next((f for _, f in r.xrange(keys.COMMENTS.key()) if f.get("bisection")), None)
        comment = wait(report)
        print(f"report after {time.monotonic() - t0:.0f}s from the webhook:\n{comment['markdown']}")
        (args.out / "report.md").write_text(comment["markdown"])
        print(subprocess.run([*REDLINE, "fleet", "status", *fleet_redis], capture_output=True, text=True,
                             cwd=REPO).stdout)
        if killed:
            document = Store(args.out / "fleet.db").documents_named("fleet_bisection")[-1][1]
            print(f"{len(killed)} agents SIGKILLed; every pair's jobs as stored:")
            print("\n".join(stored_jobs(args.out / "fleet.db", document)))
    finally:
        for process in (api, fleet):
            process.terminate()
            process.wait(timeout=300)
    return 0


if __name__ == "__main__":
    sys.exit(main())
