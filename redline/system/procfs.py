"""The one reader of /proc/PID/stat: a process's state, start time and CPU ticks."""

from __future__ import annotations

import os
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
STOPPED_STATES = ("T", "t")      # stopped by a signal (SIGSTOP, SIGTSTP) or by a tracer


def stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state first, as field 3 of proc(5)),
    None when the process is gone. The name is skipped by its last ')': it may hold anything."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2:].split()


def process_state(pid: int) -> str | None:
    """The one-letter state (R, S, D, T …), None if the process is gone."""
    fields = stat_fields(pid)
    return fields[0] if fields else None


def start_time(pid: int) -> str | None:
    """When the process started (clock ticks since boot), None if it is gone."""
    fields = stat_fields(pid)
    return fields[19] if fields else None


def user_system_s(pid: int) -> tuple[float, float]:
    """User and system CPU seconds of the process (all threads, tick resolution); raises OSError
    when it is gone."""
    fields = stat_fields(pid)
    if fields is None:
        raise ProcessLookupError(pid)
    return int(fields[11]) / CLOCK_TICKS, int(fields[12]) / CLOCK_TICKS


def stopped_pids(pids: list[int]) -> list[int]:
    return [pid for pid in pids if process_state(pid) in STOPPED_STATES]
