"""Server processes: one redis-server that redline starts, pins, watches and stops; or an
endpoint someone else runs (no process control)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import redis

from redline.core.errors import RunError
from redline.system.children import spawn
from redline.system.pinning import pinned
from redline.system.procfs import stopped_pids
from redline.system.workdirs import make_workdir

LOOPBACK = "127.0.0.1"
# Settings every managed server gets unless the suite or target says otherwise: no persistence
# that would put fork() and disk writes into the measured window.
BASE_CONFIG = {"save": '""', "appendonly": "no"}
START_ATTEMPTS = 5


CRASH_MARKERS = re.compile(r"crashed by signal|ASSERTION FAILED|Guru Meditation|Out Of Memory|FATAL")




def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


def _config_line(name: str, value: str) -> str:
    if "\n" in name or "\n" in value or not name.strip():
        raise RunError(f"invalid server configuration parameter {name!r}={value!r}")
    return f"{name} {value}" if value != "" else f'{name} ""'


def _affinity(tid: int) -> set[int] | None:
    """The cores a thread may run on; None once it has ended."""
    try:
        return os.sched_getaffinity(tid)
    except ProcessLookupError:
        return None


def answers_ping(host: str, port: int, timeout_s: float = 0.25) -> bool:
    """True once the server replies +PONG (not while it is still loading a dataset)."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


@dataclass
class ServerSettings:
    binary: Path
    config: dict[str, str] = field(default_factory=dict)
    cpus: tuple[int, ...] | None = None
    preferred_port: int | None = None
    workdir: Path | None = None
    seed_rdb: Path | None = None          # start from this RDB file (a restored dataset snapshot)
    start_timeout_s: float = 20.0         # until PING answers (a seeded server loads its data first)
    # a command-line prefix the server runs under, given the server's workdir (valgrind for
    # --measure instructions: redline.instructions.callgrind.valgrind_prefix)
    launcher: Callable[[Path], list[str]] | None = None


class Server:
    """Common interface of every server redline measures."""

    host: str
    port: int
    managed: bool
    cluster_mode = False

    def pids(self) -> list[int]:
        return []

    def load_arguments(self, arguments: list[str]) -> list[str]:
        """A suite's load-generator arguments for this server (a cluster adds --cluster-mode)."""
        return list(arguments)

    def info_client(self):
        """What INFO is read from for the run's counters (a cluster sums its shards)."""
        return self.client()

    def command_client(self):
        """A client for init commands (a cluster routes by key slot)."""
        return self.client()

    def alive(self) -> bool:
        return True

    def exit_description(self) -> str:
        return ""

    def log_tail(self, lines: int = 20) -> str:
        return ""

    def crash_reason(self) -> str | None:
        return None

    def client(self, **kwargs) -> redis.Redis:
        options = {"socket_timeout": 30, **kwargs}
        return redis.Redis(host=self.host, port=self.port, **options)

    def info(self, section: str = "all") -> dict:
        return self.client().info(section)

    def stop(self) -> None:
        pass


class RemoteServer(Server):
    """tcp://host:port: someone else's server. redline only connects to it."""

    managed = False

    def __init__(self, host: str, port: int):
        self.host, self.port = host, port

    def start(self) -> "RemoteServer":
        try:
            self.client(socket_connect_timeout=5).ping()
        except redis.RedisError as exc:
            raise RunError(f"cannot reach server at {self.host}:{self.port}: {exc}") from exc
        return self

    def alive(self) -> bool:
        try:
            return bool(self.client(socket_connect_timeout=2).ping())
        except redis.RedisError:
            return False


class ManagedServer(Server):
    """A redis-server process started by redline on a free loopback port, pinned to its cores."""

    managed = True

    def __init__(self, settings: ServerSettings):
        self.settings = settings
        self.host = LOOPBACK
        self.port = 0
        self.process: subprocess.Popen | None = None
        self._own_workdir = settings.workdir is None
        self.workdir = settings.workdir or make_workdir("redline-server-")
        self.log_path = self.workdir / "server.log"
        self.console_path = self.workdir / "server.console"
        self.busy_ports: list[int] = []

    # -- lifecycle -------------------------------------------------------------------------
    def start(self, timeout_s: float | None = None) -> "ManagedServer":
        timeout_s = timeout_s or self.settings.start_timeout_s
        if self.settings.seed_rdb is not None:
            shutil.copyfile(self.settings.seed_rdb, self.workdir / "dump.rdb")
        for attempt in range(START_ATTEMPTS):
            port = self.settings.preferred_port if attempt == 0 and self.settings.preferred_port else free_port()
            if self._try_start(port, timeout_s):
                return self
            self.busy_ports.append(port)
        raise RunError(f"redis-server found no free port after {START_ATTEMPTS} attempts "
                       f"(busy: {', '.join(map(str, self.busy_ports))})")

    def _write_config(self, port: int) -> Path:
        merged = {**BASE_CONFIG, **self.settings.config}
        lines = [_config_line(str(k), str(v)) for k, v in merged.items()]
        # redline's own last: the last line of a parameter wins (redline.suites.owned)
        lines += [f"port {port}", f"bind {LOOPBACK}", "daemonize no",
                  f"dir {self.workdir}", f"logfile {self.log_path}", "dbfilename dump.rdb"]
        path = self.workdir / "redis.conf"
        path.write_text("\n".join(lines) + "\n")
        return path

    def _try_start(self, port: int, timeout_s: float) -> bool:
        """Start on `port`; False if the port was busy, RunError for any other failure."""
        conf = self._write_config(port)
        self.log_path.write_text("")
        argv = [str(self.settings.binary), str(conf)]
        if self.settings.launcher is not None:
            argv = [*self.settings.launcher(self.workdir), *argv]
        if self.settings.cpus:
            argv = pinned(argv, self.settings.cpus)
        with open(self.console_path, "wb") as console:
            self.process = spawn(argv, stdout=console, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, start_new_session=True)
        self.port = port
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                tail = self.log_tail()
                if "Address already in use" in tail:
                    return False
                raise RunError(f"redis-server exited during start ({self.exit_description()}): "
                               f"{tail.strip().splitlines()[-1] if tail.strip() else 'no output'}")
            if answers_ping(self.host, port):
                return True
            time.sleep(0.02)
        self.stop()
        raise RunError(f"redis-server did not answer PING within {timeout_s:.0f}s; log: {self.log_tail(3)}")

    def move_to(self, cpus: tuple[int, ...]) -> None:
        """Move every thread of the running server onto `cpus` (it was started on other cores).
        A thread started meanwhile inherits the cores of the one that started it, so a second look
        finds every thread moved; RunError when one is not."""
        wanted = set(cpus)
        for _ in range(3):
            strays = [tid for tid in self._threads() if _affinity(tid) not in (wanted, None)]
            if not strays:
                self.settings.cpus = tuple(cpus)
                return
            for tid in strays:
                try:
                    os.sched_setaffinity(tid, wanted)
                except ProcessLookupError:      # the thread ended meanwhile
                    pass
        raise RunError(f"redis-server (pid {self.process.pid}) could not be moved to cpu "
                       f"{','.join(map(str, cpus))}: threads {strays} stayed where they were")

    def _threads(self) -> list[int]:
        try:
            return [int(tid) for tid in os.listdir(f"/proc/{self.process.pid}/task")]
        except (AttributeError, FileNotFoundError):
            raise RunError(f"redis-server exited before it could be moved to its cores "
                           f"({self.exit_description()})") from None

    def stop(self) -> None:
        proc = self.process
        if proc is not None and proc.poll() is None and stopped_pids([proc.pid]):
            proc.kill()                 # a stopped process would hold SIGTERM until continued
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    # -- watching --------------------------------------------------------------------------
    def pids(self) -> list[int]:
        # taskset execs the server, so the child's pid is the server's pid
        return [self.process.pid] if self.process is not None and self.process.poll() is None else []

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def exit_description(self) -> str:
        if self.process is None or self.process.returncode is None:
            return "running"
        code = self.process.returncode
        if code < 0:
            return f"killed by signal {signal.Signals(-code).name}"
        return f"exit status {code}"

    def _log_lines(self) -> list[str]:
        text = ""
        for path in (self.console_path, self.log_path):
            try:
                text += path.read_text(errors="replace")
            except OSError:
                pass
        return text.rstrip().splitlines()

    def log_tail(self, lines: int = 20) -> str:
        """The log's last lines, preceded by the lines that say why the server died, if any
        (a crash report is longer than any tail)."""
        all_lines = self._log_lines()
        tail = all_lines[-lines:]
        causes = [line for line in all_lines[:-lines] if CRASH_MARKERS.search(line)][:5]
        return "\n".join(causes + (["..."] if causes else []) + tail)

    def crash_reason(self) -> str | None:
        return next((line.strip() for line in self._log_lines() if CRASH_MARKERS.search(line)), None)
