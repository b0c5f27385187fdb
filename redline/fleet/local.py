"""`redline fleet local`: a whole fleet on this machine — a private redis-server (AOF on,
fsync every second), one collector and N agents — until SIGTERM or Ctrl-C, which stops the
agents (a running job goes back on its stream), then the collector, then Redis.

The Redis URL is the first line on stdout; each child logs its own lines on stderr.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

from redline.core.errors import RunError, UsageError
from redline.export.options import export_argv
from redline.fleet.process import Stopping, log
from redline.server.process import LOOPBACK, answers_ping
from redline.system.children import spawn

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


class Supervisor:
    """The collector and the agents as children; one that exits is started again (an agent under a
    new consumer name: its pending job is taken over after --claim-idle), at most MAX_RESTARTS
    times in all. A child's exit wakes it through SIGCHLD."""

    MAX_RESTARTS = 1000

    def __init__(self, url: str, args, stopping: Stopping):
        self.url, self.args, self.stopping = url, args, stopping
        self.children: dict[str, subprocess.Popen] = {}
        self.generation: dict[str, int] = {}
        self.restarts = 0

    def start(self, label: str) -> None:
        self.generation[label] = self.generation.get(label, 0) + 1
        if label == "collector":
            self.children[label] = redline_child("collector", "--redis", self.url, "--store", str(self.args.store),
                                                 *export_argv(self.args))
            return
        name = label if self.generation[label] == 1 else f"{label}.{self.generation[label]}"
        self.children[label] = redline_child("agent", "--redis", self.url, "--platform", self.args.platform,
                                             "--agent-name", name, "--claim-idle", f"{self.args.claim_idle}s",
                                             "--max-attempts", str(self.args.max_attempts))

    def watch(self) -> None:
        """Until SIGTERM/Ctrl-C: start again what exited."""
        while not self.stopping.requested:
            self.stopping.wake.wait()
            self.stopping.wake.clear()
            for label, process in list(self.children.items()):
                if process.poll() is None or self.stopping.requested:
                    continue
                if self.restarts >= self.MAX_RESTARTS:
                    log("fleet local", f"{self.MAX_RESTARTS} restarts: stopping")
                    self.stopping.event.set()
                    return
                self.restarts += 1
                self.start(label)
                log("fleet local", f"{label} exited, started again", code=process.returncode,
                    pid=self.children[label].pid)

    def stop_all(self) -> None:
        for label in sorted(self.children, key=lambda label: label == "collector"):   # agents first
            stop(self.children[label], label)
