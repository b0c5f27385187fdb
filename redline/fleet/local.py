"""`redline fleet local`: a whole fleet on this machine — a private redis-server (AOF on, fsync
every second, a generated password), one collector and N agents — until SIGTERM or Ctrl-C, which
stops the agents (a running job goes back on its stream), then the collector, then Redis.

Before it says it runs, it checks what it was given: the store (one a collector can use), the
port (free: another server there would receive the fleet's work), the Redis it started (the one
answering with its password). The password is written to a file only its user can read and
reaches Redis and the children through files, never a command line. Its URL (without the
password) is the first line on stdout, the password file's path the second; each child logs its
own lines on stderr.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import redis

from redline.core.errors import RunError, UsageError
from redline.export.options import export_argv
from redline.fleet.process import Stopping, log
from redline.server.process import LOOPBACK
from redline.system.children import spawn

REDIS_START_TIMEOUT_S = 30
STOP_TIMEOUT_S = 60          # an agent stops its servers and gives its job back, a collector ends its entry
PASSWORD_FILE = "redis.password"
CONFIG_FILE = "redis.conf"


def private_file(path: Path, text: str) -> Path:
    """`text` in a file only its user can read or write (created so: never readable by others,
    even for a moment), replacing what was there."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(text)
    os.replace(temporary, path)
    return path


def port_in_use(port: int) -> bool:
    """Whether something listens on the loopback port (bound as redis-server binds, SO_REUSEADDR)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((LOOPBACK, port))
        except OSError:
            return True
    return False


def start_redis(port: int, directory: Path, password: str | None = None) -> subprocess.Popen:
    """A redis-server on the loopback port with AOF in `directory`, with `password` (in a 0600
    configuration file) when given; returned once it answers — and it is this process that
    answers, not another server that holds the port."""
    binary = shutil.which("redis-server")
    if not binary:
        raise UsageError("fleet local needs redis-server on PATH (setup.sh installs it)")
    config = [private_file(directory / CONFIG_FILE, f"requirepass {password}\n")] if password else []
    process = spawn([binary, *map(str, config), "--port", str(port), "--bind", LOOPBACK, "--dir", str(directory),
                     "--appendonly", "yes", "--appendfsync", "everysec", "--save", "", "--daemonize", "no",
                     "--logfile", str(directory / "redis.log")], stdin=subprocess.DEVNULL)
    client = redis.Redis(LOOPBACK, port, password=password, socket_timeout=5, socket_connect_timeout=1)
    deadline = time.monotonic() + REDIS_START_TIMEOUT_S
    while True:
        try:
            answering = int(client.info("server").get("process_id", 0))
            break
        except (redis.RedisError, ValueError):
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                process.wait()
                raise RunError(f"the fleet's redis-server did not start on port {port} "
                               f"(log: {directory / 'redis.log'})") from None
            time.sleep(0.1)
        finally:
            client.close()
    if answering != process.pid:
        process.kill()
        process.wait()
        raise RunError(f"another redis-server (pid {answering}) answers on port {port}: not the fleet's")
    return process


def redline_child(*arguments: str, environment: dict[str, str] | None = None) -> subprocess.Popen:
    return spawn([sys.executable, "-m", "redline.cli", *arguments], stdin=subprocess.DEVNULL,
                 env={**os.environ, **(environment or {})})


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
    times in all. A child that exits with 2 (bad input: restarting cannot help), or that keeps
    exiting right after its start, stops the fleet. A child's exit wakes it through SIGCHLD."""

    MAX_RESTARTS = 1000
    QUICK_EXIT_S = 10.0       # a child that exits this soon after its start …
    QUICK_EXITS = 5           # … this many times in a row stops the fleet

    def __init__(self, url: str, password_file: Path, args, stopping: Stopping):
        self.url, self.password_file, self.args, self.stopping = url, password_file, args, stopping
        self.children: dict[str, subprocess.Popen] = {}
        self.started: dict[str, float] = {}
        self.quick: dict[str, int] = {}
        self.generation: dict[str, int] = {}
        self.restarts = 0
        self.code = 0

    def start(self, label: str) -> None:
        self.generation[label] = self.generation.get(label, 0) + 1
        self.started[label] = time.monotonic()
        redis_arguments = ("--redis", self.url, "--redis-password-file", str(self.password_file))
        if label == "collector":
            placement, environment = export_argv(self.args)
            loop = [argument for flag in ("bisect_max_concurrent", "bisect_max_steps", "bisect_max_queued",
                                          "bisect_agent_time", "bisect_stall_after", "bisect_history",
                                          "bisect_measure")
                    if getattr(self.args, flag, None) is not None
                    for argument in ("--" + flag.replace("_", "-"), str(getattr(self.args, flag)))]
            self.children[label] = redline_child("collector", *redis_arguments, "--store", str(self.args.store),
                                                 *loop, *placement, environment=environment)
            return
        name = label if self.generation[label] == 1 else f"{label}.{self.generation[label]}"
        allowed = [argument for pattern in self.args.allow_target or [] for argument in ("--allow-target", str(pattern))]
        allowed += [argument for path in self.args.allow_targets_file or []
                    for argument in ("--allow-targets-file", str(path))]
        own_store = self.password_file.parent / f"agent-{label}.db"     # the fleet's directory, not the user's cache
        self.children[label] = redline_child("agent", *redis_arguments, "--platform", self.args.platform,
                                             "--agent-name", name, "--store", str(own_store), "--claim-idle", f"{self.args.claim_idle}s",
                                             "--max-attempts", str(self.args.max_attempts), *allowed)

    def watch(self) -> int:
        """Until SIGTERM/Ctrl-C: start again what exited. The fleet's exit status: 0, or why it
        stopped by itself (2: a child refused its input; 1: a child kept failing)."""
        while not self.stopping.requested:
            self.stopping.wake.wait()
            self.stopping.wake.clear()
            for label, process in list(self.children.items()):
                if process.poll() is None or self.stopping.requested:
                    continue
                if process.returncode == 2:
                    return self._give_up(2, f"{label} refused its input (exit 2, its line is above): stopping")
                lived = time.monotonic() - self.started[label]
                self.quick[label] = self.quick.get(label, 0) + 1 if lived < self.QUICK_EXIT_S else 0
                if self.quick[label] >= self.QUICK_EXITS:
                    return self._give_up(1, f"{label} exited {self.QUICK_EXITS} times in a row within "
                                            f"{self.QUICK_EXIT_S:g}s of its start (its lines are above): stopping")
                if self.restarts >= self.MAX_RESTARTS:
                    return self._give_up(1, f"{self.MAX_RESTARTS} restarts: stopping")
                self.restarts += 1
                self.start(label)
                log("fleet local", f"{label} exited, started again", code=process.returncode,
                    pid=self.children[label].pid)
        return self.code

    def _give_up(self, code: int, message: str) -> int:
        log("fleet local", message)
        self.stopping.event.set()
        self.code = code
        return code

    def stop_all(self) -> None:
        for label in sorted(self.children, key=lambda label: label == "collector"):   # agents first
            stop(self.children[label], label)


def new_password() -> str:
    return secrets.token_urlsafe(32)
