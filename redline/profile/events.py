"""Which sampling event perf can use here: hardware `cycles`, else the software `cpu-clock`.

Virtual machines often expose no hardware counters: `perf stat -e cycles true` then reports
"<not supported>". The probe runs once per process.
"""

from __future__ import annotations

import functools
import subprocess
from dataclasses import dataclass

from redline.profile.tools import find_perf

CYCLES = "cycles"
CPU_CLOCK = "cpu-clock"


@dataclass(frozen=True)
class EventSupport:
    supported: bool
    detail: str      # what perf said, for the run's JSON


def _probe_event(event: str) -> EventSupport:
    command = [find_perf(), "stat", "-x", ",", "-e", event, "--", "true"]
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
    except subprocess.TimeoutExpired:
        return EventSupport(False, f"'{' '.join(command)}' timed out")
    for line in proc.stderr.splitlines():
        fields = line.split(",")
        if len(fields) >= 3 and fields[2].startswith(event):
            value = fields[0].strip()
            if value.replace(".", "", 1).isdigit():
                return EventSupport(True, f"perf stat -e {event}: {value}")
            return EventSupport(False, f"perf stat -e {event}: {value or 'no value'}")
    message = proc.stderr.strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
    return EventSupport(False, f"perf stat -e {event} failed: {message[0]}")


@functools.cache
def event_support(event: str) -> EventSupport:
    """Whether this machine counts `event` (e.g. "cycles", "instructions"); cached."""
    return _probe_event(event)


@dataclass(frozen=True)
class EventChoice:
    event: str
    reason: str


def choose_sampling_event() -> EventChoice:
    cycles = event_support(CYCLES)
    if cycles.supported:
        return EventChoice(CYCLES, "hardware cycles counter available")
    return EventChoice(CPU_CLOCK, f"no hardware cycles counter ({cycles.detail}); sampling the "
                                  "software cpu-clock timer instead")
