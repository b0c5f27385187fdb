"""How steady this machine's cores are right now: a short probe taken as a timed test starts.

Timed verdicts are only as narrow as the machine is steady. On the shared 2-core VMs this project
runs on, the same fixed query was served 88, then 128, then 120 times a second in three
consecutive seconds of one run: the host gave each virtual core's physical core to someone else
for a while (no steal time is reported, no hardware counters exist). Such a day turns every
timed interval ±15% wide; the reader of an inconclusive verdict deserves to know why, and to
know that another day (or the counted measure) will do better.

The probe: on each core a test's processes use, one child runs the same fixed loop in slices of
equal work for `PROBE_S` seconds, all cores at once (as a timed run loads them all). Per core:

* **spread**: p90 ÷ p10 of the slices' CPU time. Equal work should cost equal CPU time; the
  limit of 1.10 is a choice, not a measured property of quiet machines (none was at hand; this
  project's idle VM read 1.03 to 1.17, docs/statistics.md). CPU time, not wall time, so that being
  descheduled does not count here: what moves it is the core's own speed (a busy SMT sibling, a
  frequency change, a host taking the core).
* **share**: CPU time ÷ wall time of the loop: below 1 when other processes of this machine ran on
  that core (the probe's own child is the only thing redline runs there at that moment).
* **steal**: the share of the core's time the hypervisor reports as taken (/proc/stat).

`UNSTEADY_SPREAD`, `BUSY_SHARE` and `STEAL_SHARE` say where "steady" ends. The probe is
evidence for the reader, never for a verdict: the statistics already widen the intervals.
Run as `python -m redline.system.steadiness --seconds S` (started on one core by taskset) it is
the child: it prints its slices as JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable, Sequence

from redline.system.children import spawn
from redline.system.pinning import pinned

PROBE_S = 0.5                # long enough for a few hundred slices per core
SLICE_WORK = 40_000          # loop iterations per slice: about 2 ms of one core of this project's VMs
UNSTEADY_SPREAD = 1.10       # p90/p10 of equal slices: beyond this the core's speed moved
BUSY_SHARE = 0.90            # the probe got less of its core than this: something else ran there
STEAL_SHARE = 0.05           # the hypervisor took more of a core than this


@dataclass(frozen=True)
class CoreProbe:
    core: int
    slices: int
    spread: float            # p90 / p10 of the slices' CPU time
    share: float             # CPU time / wall time of the loop
    steal: float | None      # the hypervisor's share of the core meanwhile (None: not reported)

    @classmethod
    def of(cls, core: int, cpu_s: Sequence[float], wall_s: Sequence[float], steal: float | None) -> CoreProbe:
        deciles = statistics.quantiles(cpu_s, n=10) if len(cpu_s) >= 2 else [1.0] * 9
        return cls(core, len(cpu_s), round(deciles[8] / deciles[0], 3) if deciles[0] > 0 else 1.0,
                   round(min(sum(cpu_s) / sum(wall_s), 1.0), 3) if sum(wall_s) > 0 else 1.0,
                   None if steal is None else round(steal, 3))

    def troubles(self) -> list[str]:
        found = []
        if self.spread > UNSTEADY_SPREAD:
            found.append(f"core {self.core}'s speed moved {self.spread:.2f}x (p90/p10 of equal work)")
        if self.share < BUSY_SHARE:
            found.append(f"other processes took {1 - self.share:.0%} of core {self.core}")
        if self.steal is not None and self.steal > STEAL_SHARE:
            found.append(f"the hypervisor took {self.steal:.0%} of core {self.core}")
        return found


@dataclass(frozen=True)
class Steadiness:
    """One probe: every core it ran on."""
    cores: tuple[CoreProbe, ...]
    seconds: float

    @property
    def steady(self) -> bool:
        return not self.troubles()

    @property
    def spread(self) -> float:
        return max((c.spread for c in self.cores), default=1.0)

    def troubles(self) -> list[str]:
        return [trouble for core in self.cores for trouble in core.troubles()]

    def describe(self) -> str:
        if self.steady:
            return f"steady: equal work took equal time on cores {_cores(self.cores)} (spread ≤ {self.spread:.2f}x)"
        return "unsteady: " + "; ".join(self.troubles())

    def as_json(self) -> dict:
        return {"seconds": self.seconds, "steady": self.steady, "cores": [asdict(c) for c in self.cores]}

    @classmethod
    def from_json(cls, document) -> Steadiness | None:
        """A stored probe (a run's facts are read back from the store: validated, None if not one)."""
        try:
            if not document["cores"]:
                return None
            cores = tuple(CoreProbe(int(c["core"]), int(c["slices"]), float(c["spread"]), float(c["share"]),
                                    None if c.get("steal") is None else float(c["steal"]))
                          for c in document["cores"])
            return cls(cores, float(document["seconds"]))
        except (KeyError, TypeError, ValueError):
            return None


@dataclass(frozen=True)
class SteadinessSummary:
    """The probes of a session's timed tests, in one sentence."""
    tests: int                   # timed tests probed
    unsteady: int
    worst: Steadiness            # the probe with the most troubles, then the widest spread

    def sentence(self) -> str:
        if not self.unsteady:
            return (f"Machine steady during the {self.tests} timed tests probed: equal work took equal time "
                    f"on every core (spread ≤ {self.worst.spread:.2f}x)")
        return (f"Machine unsteady during {self.unsteady} of {self.tests} timed tests probed (worst: "
                f"{'; '.join(self.worst.troubles())}): timed intervals are wider than this machine gives when "
                "quiet; counted runs are not affected")

    def as_json(self) -> dict:
        return {"tests": self.tests, "unsteady": self.unsteady, "worst": self.worst.as_json()}

    @classmethod
    def from_json(cls, document) -> SteadinessSummary | None:
        if not isinstance(document, dict):
            return None
        worst = Steadiness.from_json(document.get("worst"))
        try:
            return cls(int(document["tests"]), int(document["unsteady"]), worst) if worst else None
        except (KeyError, TypeError, ValueError):
            return None


def probe_of(runs: Iterable) -> Steadiness | None:
    """The probe the runs of one test carry (the first run's: every run of a test carries the same)."""
    for run in runs:
        found = Steadiness.from_json(((run.facts or {}).get("machine") or {}).get("steadiness"))
        if found is not None:
            return found
    return None


def summarize(runs: Iterable) -> SteadinessSummary | None:
    """One probe per test among `runs` (timed tests carry one; counted ones do not), summed up."""
    by_test: dict[str, list] = {}
    for run in runs:
        by_test.setdefault(run.key, []).append(run)
    probes = [p for p in (probe_of(mine) for mine in by_test.values()) if p is not None]
    if not probes:
        return None
    worst = max(probes, key=lambda p: (len(p.troubles()), p.spread))
    return SteadinessSummary(len(probes), sum(1 for p in probes if not p.steady), worst)


def _cores(cores: Sequence[CoreProbe]) -> str:
    return ",".join(str(c.core) for c in cores)


def measure_steadiness(cores: Sequence[int], seconds: float = PROBE_S) -> Steadiness | None:
    """The probe on `cores`, all at once (one pinned child per core); about `seconds` long. None
    when no core could be probed (a probe says nothing rather than "steady")."""
    before = _steal_counters()
    children = []
    for core in sorted(set(cores)):
        try:
            children.append((core, spawn(pinned([sys.executable, "-m", __name__, "--seconds", str(seconds)], (core,)),
                                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)))
        except OSError:
            continue
    probes = []
    for core, child in children:
        try:
            out, _ = child.communicate(timeout=seconds + 60)
            slices = json.loads(out)
            cpu_s, wall_s = [float(x) for x in slices["cpu_s"]], [float(x) for x in slices["wall_s"]]
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
            continue
        except (ValueError, KeyError, TypeError):
            continue
        if cpu_s and len(cpu_s) == len(wall_s):
            probes.append((core, cpu_s, wall_s))
    after = _steal_counters()
    if not probes:
        return None
    return Steadiness(tuple(CoreProbe.of(core, cpu_s, wall_s, _steal_share(before, after, core))
                            for core, cpu_s, wall_s in probes), seconds)


def _steal_counters() -> dict[int, tuple[int, int]]:
    """Per core: (steal ticks, all ticks) from /proc/stat; empty where it cannot be read."""
    counters = {}
    try:
        lines = Path("/proc/stat").read_text().splitlines()
    except OSError:
        return counters
    for line in lines:
        name, *fields = line.split()
        if name.startswith("cpu") and name[3:].isdigit() and len(fields) >= 8:
            ticks = [int(f) for f in fields[:8]]
            counters[int(name[3:])] = (ticks[7], sum(ticks))
    return counters


def _steal_share(before: dict, after: dict, core: int) -> float | None:
    if core not in before or core not in after:
        return None
    total = after[core][1] - before[core][1]
    return (after[core][0] - before[core][0]) / total if total > 0 else None


def _slices(seconds: float) -> dict:
    """The child's loop: slices of SLICE_WORK iterations, each one's CPU and wall time."""
    cpu_s, wall_s = [], []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        cpu, wall = time.thread_time(), time.perf_counter()
        total = 0
        for i in range(SLICE_WORK):
            total += i * i
        cpu_s.append(time.thread_time() - cpu)
        wall_s.append(time.perf_counter() - wall)
    return {"cpu_s": cpu_s, "wall_s": wall_s}


def main() -> int:
    parser = argparse.ArgumentParser(description="one core's probe (redline.system.steadiness)")
    parser.add_argument("--seconds", type=float, default=PROBE_S)
    args = parser.parse_args()
    print(json.dumps(_slices(args.seconds)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
