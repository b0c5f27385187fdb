"""What redline reads off a server around the measured window: CPU from /proc, INFO."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis

from redline.system.procfs import user_system_s


@dataclass(frozen=True)
class CpuSample:
    """CPU consumed so far by a set of processes (all their threads)."""

    at: float           # monotonic time of the reading
    total_s: float      # on-CPU time from schedstat (ns resolution)
    user_s: float       # from /proc/PID/stat (tick resolution)
    system_s: float

    def __sub__(self, other: "CpuSample") -> "CpuSample":
        return CpuSample(self.at - other.at, self.total_s - other.total_s,
                         self.user_s - other.user_s, self.system_s - other.system_s)


def _process_cpu(pid: int) -> tuple[float, float, float]:
    user, system = user_system_s(pid)
    total = 0.0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0]) / 1e9
        except (OSError, IndexError, ValueError):
            pass
    return total, user, system


def read_cpu(pids: list[int]) -> CpuSample | None:
    """None when there is no process to read (a remote server) or it has gone."""
    if not pids:
        return None
    total = user = system = 0.0
    try:
        for pid in pids:
            t, u, s = _process_cpu(pid)
            total, user, system = total + t, user + u, system + s
    except (OSError, ValueError, IndexError):
        return None
    return CpuSample(time.monotonic(), total, user, system)


def read_info(client: redis.Redis) -> dict | None:
    try:
        return client.info("all")
    except redis.RedisError:
        return None


@dataclass
class WindowProbe:
    """Readings at the start and the end of the measured window, plus one CPU reading per second.

    The load generator announces the window's edges; `mark_start`/`mark_end` are called then.
    """

    pids: list[int]
    client: redis.Redis
    cpu_start: CpuSample | None = None
    cpu_end: CpuSample | None = None
    info_start: dict | None = None
    info_end: dict | None = None
    cpu_per_second: list[float] = field(default_factory=list)   # server CPU utilisation, 0..n cores
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _info_start_thread: threading.Thread | None = None

    def mark_start(self, *, wait: bool = False) -> None:
        # CPU is read at once; INFO waits its turn behind whatever the server is executing (seconds,
        # for a queue of slow calls), so it is read aside and never delays the end mark's CPU reading;
        # `wait`: INFO is read before this returns (a counted window starts after it)
        self.cpu_start = read_cpu(self.pids)
        self._info_start_thread = threading.Thread(target=self._read_info_start, daemon=True)
        self._info_start_thread.start()
        if wait:
            self._info_start_thread.join()
        if self.cpu_start is not None:
            self._thread = threading.Thread(target=self._sample_each_second, daemon=True)
            self._thread.start()

    def _read_info_start(self) -> None:
        self.info_start = read_info(self.client)

    def mark_end(self) -> None:
        self.cpu_end = read_cpu(self.pids)
        self._stop.set()
        if self._info_start_thread is not None:
            self._info_start_thread.join()
        self.info_end = read_info(self.client)
        if self._thread is not None:
            self._thread.join(timeout=2)

    def close(self) -> None:
        self._stop.set()

    def _sample_each_second(self) -> None:
        previous = self.cpu_start
        while not self._stop.wait(1.0):
            now = read_cpu(self.pids)
            if now is None or previous is None:
                return
            delta = now - previous
            self.cpu_per_second.append(delta.total_s / delta.at if delta.at > 0 else 0.0)
            previous = now

    # -- derived ----------------------------------------------------------------------------
    @property
    def cpu(self) -> CpuSample | None:
        if self.cpu_start is None or self.cpu_end is None:
            return None
        return self.cpu_end - self.cpu_start

    def info_delta(self, key: str) -> int | None:
        if not self.info_start or not self.info_end:
            return None
        if key not in self.info_start or key not in self.info_end:
            return None
        return int(self.info_end[key]) - int(self.info_start[key])

    def server_time_per_call(self, commands: list[str]) -> tuple[int, float] | None:
        """(calls, milliseconds per call) of these commands since the server started, from INFO
        commandstats at the window's end. Counted when the server executes a call, whether or not
        its reply reached the client; cumulative because a server busy with a long queue answers
        the window-start INFO late, after the load has already stopped."""
        if not self.info_end:
            return None
        calls = usec = 0
        for command in {c.lower().replace(" ", "|") for c in commands}:
            stats = self.info_end.get(f"cmdstat_{command}")
            if isinstance(stats, dict):
                calls += int(stats.get("calls", 0))
                usec += float(stats.get("usec", 0))
        return (calls, usec / calls / 1000) if calls else None
