"""`redline fleet local`: a whole fleet on this machine — a private redis-server (AOF on,
fsync every second), one collector and N agents — until SIGTERM or Ctrl-C, which stops the
agents (a running job goes back on its stream), then the collector, then Redis.

The Redis URL is the first line on stdout; each child logs its own lines on stderr.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from redline.children import spawn
from redline.errors import RunError, UsageError
from redline.fleet.process import Stopping, log
from redline.server import LOOPBACK, answers_ping, free_port

REDIS_START_TIMEOUT_S = 30
STOP_TIMEOUT_S = 60          # an agent stops its servers and gives its job back, a collector ends its entry


def start_redis(port: int, directory: Path) -> subprocess.Popen:
    binary = shutil.which("redis-server")
    if not binary:
        raise UsageError("fleet local needs redis-server on PATH (setup.sh installs it)")
    process = spawn([binary, "--port", str(port), "--bind", LOOPBACK, "--dir", str(directory),
                     "--appendonly", "yes", "--appendfsync", "everysec", "--save", "", "--daemonize", "no",
                     "--logfile", str(directory / "redis.log")], stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + REDIS_START_TIMEOUT_S
    while not answers_ping(LOOPBACK, port):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RunError(f"the fleet's redis-server did not start on port {port} (log: {directory / 'redis.log'})")
        time.sleep(0.1)
    return process


def redline_child(*arguments: str) -> subprocess.Popen:
    return spawn([sys.executable, "-m", "redline.cli", *arguments], stdin=subprocess.DEVNULL)


def stop(process: subprocess.Popen, what: str) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            log("fleet local", f"{what} did not stop in {STOP_TIMEOUT_S}s, killed")
            process.kill()
            process.wait()


def local_command(args) -> int:
    stopping = Stopping()
    port = args.port or free_port()
    directory = args.dir or Path(tempfile.mkdtemp(prefix="redline-fleet-"))
    directory.mkdir(parents=True, exist_ok=True)
    redis_process = start_redis(port, directory)
    url = f"redis://{LOOPBACK}:{port}/0"
    print(url, flush=True)
    children: list[tuple[subprocess.Popen, str]] = []
    try:
        collector = redline_child("collector", "--redis", url, "--store", str(args.store))
        children.append((collector, "collector"))
        for number in range(1, args.agents + 1):
            agent = redline_child("agent", "--redis", url, "--platform", args.platform,
                                  "--agent-name", f"local-{number}", "--claim-idle", f"{args.claim_idle}s",
                                  "--max-attempts", str(args.max_attempts))
            children.append((agent, f"agent local-{number}"))
        log("fleet local", "running", redis=url, platform=args.platform, agents=args.agents, store=args.store,
            aof=directory, pids=",".join(str(p.pid) for p, _ in children))
        stopping.event.wait()
    finally:
        for process, what in reversed(children):      # agents first: they may still publish to the collector
            stop(process, what)
        stop(redis_process, "redis-server")
        log("fleet local", "stopped")
    return 0
