"""Who may use this machine's cores now, across redline processes.

Inside one process the scheduler (redline.lab.scheduler) keeps timed and counted work apart:
counted jobs share the machine in lanes, a timed job holds all of it. Between processes the same
rule holds through one lock file per machine and user, `flock`ed by every test execution:

* a **timed** test holds it exclusively: it waits until no other redline process on this machine
  runs a test, and none starts one until it ends (its throughput and latency would measure the
  other's load);
* a **counted** test holds it shared: counts do not care about each other's load (DESIGN.md §6),
  but they wait while a timed test runs, whose numbers their load would spoil.

So `redline fleet local --agents 2` on one machine times one job at a time, and a `redline
compare` started beside a running gate waits for its counted lanes instead of timing through them.
The lock is released when the test ends, or when its process dies (the kernel drops an flock with
its last descriptor). A test nested in another in the same thread passes through: it is already
covered (two threads of one process wait for each other like two processes).

The file is $REDLINE_MACHINE_LOCK, else `redline-<uid>-machine.lock` in the temporary directory:
on the machine itself, never a shared home directory that would make two machines wait for each
other.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import threading
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Callable, Iterator

LOCK_ENV = "REDLINE_MACHINE_LOCK"

_thread = threading.local()      # .depth: shares this thread holds (nested tests pass through)


def lock_path() -> Path:
    configured = os.environ.get(LOCK_ENV)
    if configured:
        return Path(configured).expanduser()
    return Path(tempfile.gettempdir()) / f"redline-{os.getuid()}-machine.lock"


@contextmanager
def machine_share(*, counted: bool, waiting: Callable[[str], None] | None = None) -> Iterator[None]:
    """Hold this machine for one test: shared when `counted`, else exclusively. `waiting(text)` hears
    once why the test does not start at once."""
    depth = getattr(_thread, "depth", 0)
    _thread.depth = depth + 1
    try:
        with nullcontext() if depth else _flocked(counted, waiting):
            yield
    finally:
        _thread.depth = depth


@contextmanager
def _flocked(counted: bool, waiting: Callable[[str], None] | None) -> Iterator[None]:
    path = lock_path()
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        mode = fcntl.LOCK_SH if counted else fcntl.LOCK_EX
        try:
            fcntl.flock(descriptor, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            if waiting:
                waiting(_why_waiting(counted, path))
            fcntl.flock(descriptor, mode)          # a signal (Ctrl-C, SIGTERM) ends the wait
        try:
            yield
        finally:
            fcntl.flock(descriptor, fcntl.LOCK_UN)
    finally:
        os.close(descriptor)


def _why_waiting(counted: bool, path: Path) -> str:
    if counted:
        return f"waiting for a timed test of another redline process on this machine to end ({path})"
    return (f"waiting for the other redline processes on this machine to end their tests: a timed test "
            f"runs alone ({path})")
