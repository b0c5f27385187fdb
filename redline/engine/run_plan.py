"""What a session asks the engine for — the sides (servers under test) and the run settings — and
the Observer interface through which the engine reports what it is doing."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from redline.core.metrics import INSTRUCTIONS, TIME
from redline.core.run import Run
from redline.server.targets import Target
from redline.topology import DEFAULT_TOPOLOGY, TopologySpec, parse_topology

if TYPE_CHECKING:
    from redline.suites import TestSpec


@dataclass(frozen=True, eq=False)
class Side:
    """One server under test. `name` is None for a plain run, 'baseline'/'comparison' in an A/B."""

    target: Target
    name: str | None = None


@dataclass
class RunSettings:
    runs: int = 1
    duration_s: float | None = None      # None: the suite's own --test-time
    warmup_s: float = 2.0
    scale: float | None = None           # None: the suite's own dataset-scale, else 1.0
    profile: bool = False                # one extra, profiled run per test and side after the measured ones
    # timed A/B: run i of both sides at once, both servers on the same cores, so that what the machine
    # does meanwhile falls on both (redline.engine.engine, "duet"); counted tests run as always
    duet: bool = False
    topologies: tuple[TopologySpec, ...] = field(default_factory=lambda: (parse_topology(DEFAULT_TOPOLOGY),))
    snapshots: bool = True               # restore prepared datasets from the RDB snapshot cache
    # "time" or "instructions" (the server under callgrind, a fixed request count: redline.instructions);
    # None: each test's own `redline: measure`, else time
    measure: str | None = None
    window_instructions: int | None = None   # --measure instructions: the window's size (None: the default)
    # --measure instructions: requests per connection in every window, fixed by the caller (a counted
    # bisection carries its endpoints' count to every step); None: chosen from window_instructions
    window_requests: int | None = None
    # --measure instructions: the count this store's earlier sessions used for the test, kept while it
    # fits this run's estimate (redline.instructions.window.EARLIER_WINDOW_RANGE); a job sets it per test
    earlier_window_requests: int | None = None
    # --measure instructions: the caller also judges the server's reads and writes per request (the
    # gate's screen of a pipelined test), so pipelining is no reason to distrust the counts
    system_calls_judged: bool = False

    def measure_for(self, test: TestSpec) -> str:
        """How `test` is measured: the session's --measure, else the suite's `redline: measure`, else time."""
        return self.measure or test.extensions.get("measure") or TIME

    def counts(self, test: TestSpec) -> bool:
        """Is `test` counted (the server under callgrind) rather than timed?"""
        return self.measure_for(test) == INSTRUCTIONS

    def duet_for(self, test: TestSpec, sides: list[Side]) -> bool:
        """Are `test`'s runs duets: both sides of an A/B at once? Timed A/Bs only."""
        return self.duet and len(sides) == 2 and not self.counts(test)


class Observer:
    """What the engine tells the outside world while it works (progress display, logs)."""

    def test_started(self, test: TestSpec, index: int, count: int) -> None: ...
    def test_skipped(self, test: TestSpec, reason: str) -> None: ...
    def phase(self, name: str, *, total: float | None = None, unit: str = "s") -> None: ...
    def progress(self, done: float, total: float | None = None) -> None: ...
    def detail(self, text: str) -> None: ...                # a line for the current phase (make's last line)
    def run_finished(self, run: Run) -> None: ...
    def note(self, text: str) -> None: ...


OBSERVER_EVENTS = ("test_started", "test_skipped", "phase", "progress", "detail", "run_finished", "note")


class Observers(Observer):
    """Several observers as one: each hears every event, in order, one event at a time (the two
    runs of a duet report from two threads)."""

    def __init__(self, observers=()):
        self.observers = list(observers)
        self.one_at_a_time = threading.RLock()


def _to_each(event: str):
    def tell_each(self: Observers, *args, **kwargs) -> None:
        with self.one_at_a_time:
            for observer in self.observers:
                getattr(observer, event)(*args, **kwargs)
    tell_each.__name__ = event
    return tell_each


for _event in OBSERVER_EVENTS:
    setattr(Observers, _event, _to_each(_event))
