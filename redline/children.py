"""Child processes (servers, load generators) never outlive redline, even when it is killed."""

from __future__ import annotations

import ctypes
import signal

PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


def die_with_parent() -> None:
    """preexec_fn: the kernel sends SIGKILL to this child when redline exits for any reason."""
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
