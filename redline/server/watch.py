"""Watching a server while load runs: exited, stopped, or silent — not merely busy.

`ServerWatch` is what `run_load` polls (as its `server_alive`) while measuring and while
preloading. A server is lost when it exited, when one of its processes is stopped (state T in /proc/PID/stat: SIGSTOP, a debugger),
or when it has answered no PING *and* used no CPU for `SILENT_LIMIT_S`: a server busy with
slow commands keeps using CPU, so it is never taken for a hung one.
"""

from __future__ import annotations

import time

from redline.core.errors import RunError
from redline.server.probes import read_cpu
from redline.server.process import Server, answers_ping
from redline.system.procfs import stopped_pids

SILENT_LIMIT_S = 10.0    # no PING answered and no CPU used for this long: the server hung
PING_EVERY_S = 1.0       # also the PING's own timeout


class ServerHung(RunError):
    """The server stopped answering while load ran; `reason` says how it was seen."""

    def __init__(self, reason: str):
        super().__init__(f"the server stopped answering: {reason}")
        self.reason = reason


class ServerWatch:
    def __init__(self, server: Server, *, silent_limit_s: float = SILENT_LIMIT_S):
        self.server = server
        self.silent_limit_s = silent_limit_s
        self._last_sign = time.monotonic()    # last answered PING or CPU progress
        self._last_cpu = read_cpu(server.pids())
        self._next_check = 0.0

    def __call__(self) -> bool:
        """True while the server is usable, False once it exited; raises ServerHung once it hung
        (run_load then stops the load generator and the exception reaches its caller)."""
        if not self.server.alive():
            return False
        if not self.server.managed:
            return True                        # someone else's server: alive() pinged it
        stopped = stopped_pids(self.server.pids())
        if stopped:
            raise ServerHung(f"process {', '.join(map(str, stopped))} is stopped (state T in /proc: "
                             "SIGSTOP or a debugger)")
        now = time.monotonic()
        if now >= self._next_check:
            self._next_check = now + PING_EVERY_S
            if self._used_cpu() or answers_ping(self.server.host, self.server.port, PING_EVERY_S):
                self._last_sign = now
            else:
                silent_s = time.monotonic() - self._last_sign     # the unanswered PING's wait included
                if silent_s > self.silent_limit_s:
                    raise ServerHung(f"it answered no PING and used no CPU for {silent_s:.0f} s")
        return True

    def _used_cpu(self) -> bool:
        cpu = read_cpu(self.server.pids())
        moved = cpu is not None and self._last_cpu is not None and cpu.total_s > self._last_cpu.total_s
        self._last_cpu = cpu
        return moved
