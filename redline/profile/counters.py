"""`perf stat` counters of the server during the measured window: instructions, cycles, IPC.

Where the machine has no hardware counters (virtual machines without a PMU), no perf stat is
started and the result says why.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from redline.core.errors import RunError
from redline.profile.events import event_support
from redline.profile.perf_process import PerfProcess
from redline.profile.tools import find_perf

HARDWARE_EVENTS = ("instructions", "cycles")


@dataclass(frozen=True)
class CounterAvailability:
    available: bool
    reason: str | None


def hardware_counters_available() -> CounterAvailability:
    missing = [(e, event_support(e)) for e in HARDWARE_EVENTS if not event_support(e).supported]
    if missing:
        return CounterAvailability(False, "hardware counters unavailable on this machine: " +
                                   "; ".join(support.detail for _, support in missing))
    return CounterAvailability(True, None)


def parse_perf_stat_csv(text: str) -> dict[str, float]:
    """Event name → value from `perf stat -x ,` output; unsupported or uncounted events are left out."""
    values: dict[str, float] = {}
    for line in text.splitlines():
        fields = line.split(",")
        if line.startswith("#") or len(fields) < 3:
            continue
        try:
            value = float(fields[0])
        except ValueError:
            continue          # "<not supported>", "<not counted>"
        event = fields[2].split(":")[0]
        values[event] = values.get(event, 0.0) + value
    return values


class CounterSession:
    """perf stat -p PIDS for the window between start() and stop()."""

    def __init__(self, *, pids: list[int], workdir: Path, events: tuple[str, ...] = HARDWARE_EVENTS) -> None:
        self.events = events
        self.output = Path(workdir) / "perf-stat.csv"
        self._perf = PerfProcess(
            args=[find_perf(), "stat", "-x", ",", "-e", ",".join(events), "-o", str(self.output),
                  "-p", ",".join(map(str, pids))],
            log_path=Path(workdir) / "perf-stat.log", name="perf stat")

    def prepare(self) -> None:
        """perf stat attached with its counters off (Recorder.prepare)."""
        self._perf.start(controlled=True)

    def start(self) -> None:
        if not self._perf.started:
            self.prepare()
        self._perf.enable()

    def stop(self) -> dict[str, float]:
        self._perf.stop()
        try:
            values = parse_perf_stat_csv(self.output.read_text(errors="replace"))
        except OSError as exc:
            raise RunError(f"perf stat wrote no output {self.output}: {exc.strerror}") from exc
        if "instructions" in values and values.get("cycles"):
            values["ipc"] = values["instructions"] / values["cycles"]
        return values

    def kill(self) -> None:
        self._perf.kill()
