"""Child processes (servers, load generators, builds): started one way, never outliving redline.

`spawn` is the one way redline starts a child. Two things it guarantees:

* the child dies with redline, even when redline is killed (the kernel's parent-death signal,
  set between fork and exec). The kernel sends it when the *thread* that forked exits, so spawn
  only from the main thread or a thread that outlives the child (`at_once` runs calls that spawn
  in such threads);
* a SIGTERM or Ctrl-C that arrives while the child is being forked cannot leave redline stuck.
  Setting up the child between fork and exec makes Python run its at-fork handlers (logging takes
  and releases its module lock around every fork); redline turns SIGTERM into KeyboardInterrupt,
  and raised inside such a handler it is swallowed with the lock still held: the next thread that
  logs (redis-py does) then blocks forever. So both signals are blocked in the parent for the
  moment of the fork and delivered right after it; the child unblocks them before it executes.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import contextmanager
from typing import Callable, Iterator, TypeVar

PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)
DEFERRED_SIGNALS = {signal.SIGINT, signal.SIGTERM}
T = TypeVar("T")


def _child_setup() -> None:
    """Runs in the child between fork and exec: dies with its parent; takes signals again."""
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, DEFERRED_SIGNALS)


_holding_in: int | None = None     # the pid whose main thread holds the handlers now (a fork inherits this)


@contextmanager
def signals_deferred() -> Iterator[None]:
    """SIGINT and SIGTERM wait until the block is left (then they are delivered as usual).

    The calling thread blocks them. That alone is not enough where the process has other threads:
    the kernel then delivers the signal to one of those, and Python runs its handler in the main
    thread at once, inside the block. So in the main thread the handlers are held as well: what
    arrives meanwhile is noted, and raised again, in order, once the block is left."""
    global _holding_in
    previous_mask = signal.pthread_sigmask(signal.SIG_BLOCK, DEFERRED_SIGNALS)
    hold = threading.current_thread() is threading.main_thread() and _holding_in != os.getpid()
    pending: list[int] = []
    handlers = {}
    if hold:
        handlers = {sig: signal.signal(sig, lambda signum, frame: pending.append(signum)) for sig in DEFERRED_SIGNALS}
        _holding_in = os.getpid()
    try:
        yield
    finally:
        if hold:
            for sig, handler in handlers.items():
                signal.signal(sig, handler)
            _holding_in = None
        signal.pthread_sigmask(signal.SIG_SETMASK, previous_mask)
        for signum in dict.fromkeys(pending):
            signal.raise_signal(signum)


def spawn(argv: list[str], **popen_arguments) -> subprocess.Popen:
    """subprocess.Popen(argv, ...) for a child that must not outlive redline."""
    with signals_deferred():
        return subprocess.Popen(argv, preexec_fn=_child_setup, **popen_arguments)


# -- several starts at once -------------------------------------------------------------------------
_starters: tuple[int, ThreadPoolExecutor] | None = None     # (the pid they belong to, the threads)


def _starter_threads() -> ThreadPoolExecutor:
    """Threads that live as long as the process, so what they spawn does not die with them (a forked
    lane has none of its parent's threads: it makes its own)."""
    global _starters
    if _starters is None or _starters[0] != os.getpid():
        _starters = (os.getpid(), ThreadPoolExecutor(max_workers=4, thread_name_prefix="redline-starter"))
    return _starters[1]


def at_once(calls: list[Callable[[], T]], *, expected: tuple[type[Exception], ...],
            discard: Callable[[T], None]) -> list[T | Exception]:
    """Every call at the same time, each in a thread that outlives the children it spawns; per call
    its result or the `expected` exception it raised. Any other exception, or an interruption while
    waiting, is raised once every call has finished, and the results that did come are `discard`ed
    (a server started for nothing is stopped, not left to the end of the process)."""
    futures = [_starter_threads().submit(call) for call in calls]
    try:
        wait(futures)
        for future in futures:
            error = future.exception()
            if error is not None and not isinstance(error, expected):
                raise error
    except BaseException:
        for future in futures:
            if _succeeded(future):
                discard(future.result())
        raise
    return [future.exception() or future.result() for future in futures]


def _succeeded(future) -> bool:
    """Whether the call returned, once it has finished (a second Ctrl-C meanwhile waits on)."""
    while True:
        try:
            return future.exception() is None
        except BaseException:
            continue
