"""Run perf attached to running processes and stop it cleanly.

`perf record` starts with its events disabled and a control channel (a pair of FIFOs); start()
returns only once perf acknowledged "enable", so the measured window begins exactly there.
stop() sends SIGINT, which makes perf finish writing its data file, and waits for it.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from pathlib import Path

from redline.core.errors import RunError

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 120.0


def check_pids(pids: list[int]) -> list[int]:
    if not pids:
        raise RunError("profiling needs at least one server process id")
    for pid in pids:
        if not isinstance(pid, int) or pid <= 0:
            raise RunError(f"profiling: {pid!r} is not a process id")
        if not Path(f"/proc/{pid}").exists():
            raise RunError(f"profiling: process {pid} does not exist (did the server exit?)")
    return list(pids)


class PerfProcess:
    """One perf command (record or stat) attached with -p; its stderr goes to log_path."""

    def __init__(self, *, args: list[str], log_path: Path, name: str) -> None:
        self.args = args
        self.log_path = Path(log_path)
        self.name = name
        self._proc: subprocess.Popen | None = None
        self._control: tuple[int, int] | None = None

    def _log_tail(self) -> str:
        try:
            text = self.log_path.read_text(errors="replace").strip()
        except OSError:
            return ""
        return text[-800:]

    @property
    def started(self) -> bool:
        return self._proc is not None

    def start(self, *, controlled: bool) -> None:
        """Start perf; when controlled, with its events off: this returns once perf is set up and
        answers (it answers its control channel only after opening its events and buffers, 0.2-0.7
        s on a busy machine), and `enable()` then switches them on in milliseconds."""
        args = list(self.args)
        pass_fds: tuple[int, ...] = ()
        if controlled:
            control_fifo = self.log_path.with_suffix(".ctl")
            ack_fifo = self.log_path.with_suffix(".ack")
            for fifo in (control_fifo, ack_fifo):
                fifo.unlink(missing_ok=True)
                os.mkfifo(fifo)
            # O_RDWR on a FIFO never blocks; perf gets copies of the descriptors.
            self._control = (os.open(control_fifo, os.O_RDWR), os.open(ack_fifo, os.O_RDWR))
            args[2:2] = ["--delay=-1", f"--control=fd:{self._control[0]},{self._control[1]}"]
            pass_fds = self._control
        with open(self.log_path, "wb") as log:
            try:
                # not children.spawn: perf is started from a short-lived thread, and the parent-death
                # signal follows the thread that forked, not the process (perf was killed at once)
                self._proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                              pass_fds=pass_fds)
            except OSError as exc:
                self._close_control()
                raise RunError(f"could not start {self.name}: {exc}") from exc
        if controlled:
            self._command("ping")

    def enable(self) -> None:
        """Start the events of a controlled perf; returns once perf acknowledged it."""
        self._command("enable")

    def _command(self, word: str) -> None:
        """Send a control command; returns once perf acknowledged it."""
        if self._control is None or self._proc is None:
            raise RunError(f"{self.name} was not started with a control channel")
        control, ack = self._control
        os.write(control, f"{word}\n".encode())
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            ready, _, _ = select.select([ack], [], [], 0.1)
            if ready and os.read(ack, 64).startswith(b"ack"):
                return
            if self._proc.poll() is not None:
                break
        self.kill()
        raise RunError(f"{self.name} did not acknowledge {word!r} within {START_TIMEOUT_S:.0f}s: {self._log_tail()}")

    def stop(self) -> None:
        """SIGINT, then wait until perf has written its output."""
        if self._proc is None:
            raise RunError(f"{self.name} was never started")
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGINT)
        try:
            code = self._proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired as exc:
            self.kill()
            raise RunError(f"{self.name} did not finish within {STOP_TIMEOUT_S:.0f}s after SIGINT") from exc
        finally:
            self._close_control()
        if code not in (0, -signal.SIGINT, 128 + signal.SIGINT):
            raise RunError(f"{self.name} failed (exit {code}): {self._log_tail()}")

    def kill(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait(timeout=30)
        self._close_control()

    def _close_control(self) -> None:
        if self._control is not None:
            for fd in self._control:
                os.close(fd)
            self._control = None
            for suffix in (".ctl", ".ack"):
                self.log_path.with_suffix(suffix).unlink(missing_ok=True)
