"""What each entry measures and how (pure): counted under callgrind where a count can see the effect
and one server process holds it, timed otherwise (`--measure auto`), or as asked; the metric the
verdict is taken on; the build variant; the order entries run in; and the resume key, a hash of
everything that decides the measurement (so an edited entry, suite or setting is measured again,
while an edited claim or band is only scored again)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass

from redline.accuracy.corpus import Entry
from redline.topology import parse_topology

COUNTED, TIMED = "counted", "timed"
AUTO, BOTH = "auto", "both"
MEASURE_CHOICES = (AUTO, COUNTED, TIMED, BOTH)
DEFAULT_VARIANT = "default"     # the project's own build: the claims were measured with jemalloc and its -O level

# The metric a verdict is taken on. Counted: inside call() where the effect lives in command
# execution (1% resolution), the whole process where it lives around it (reading, processCommand,
# replies) or where a count cannot see it at all. Timed: the server's CPU per operation, which on a
# shared machine moves far less than throughput (README "What a run does and records").
COUNTED_METRIC = {"command-execution": "instructions_per_op_command"}
COUNTED_DEFAULT_METRIC = "instructions_per_op"
TIMED_METRIC = "server_cpu_us_per_op"
# the fields of an entry that decide what is measured (claim, source, band and culprits only score it);
# its name too: two entries are two measurements even where they measure alike
MEASURED_FIELDS = ("name", "commit", "parent", "good", "bad", "suites", "command", "prepare", "config", "topology",
                   "effect_lives_in", "variant")


@dataclass(frozen=True)
class Settings:
    """How the runner measures (its command line)."""

    measure: str = AUTO
    variant: str = DEFAULT_VARIANT
    counted_runs: int = 3
    timed_runs: int = 7
    timed_max_runs: int = 15
    duration_s: float = 10.0
    warmup_s: float = 2.0
    scale: float | None = None
    window_instructions: int | None = None

    def of(self, kind: str, *, generated: bool = True) -> dict:
        """The settings that decide a measurement of this kind (part of its resume key); the scale
        only where a test's dataset is generated (it scales nothing else)."""
        scale = {"scale": self.scale} if generated else {}
        if kind == COUNTED:
            return {"runs": self.counted_runs, "window_instructions": self.window_instructions, **scale}
        return {"runs": self.timed_runs, "max_runs": self.timed_max_runs, "duration_s": self.duration_s,
                "warmup_s": self.warmup_s, **scale}


def one_process(topology: str) -> bool:
    """Whether a counted run can hold the topology: callgrind counts one server process."""
    spec = parse_topology(topology)
    return not spec.cluster and spec.replicas == 0 and spec.primaries == 1


def primary_kind(entry: Entry, topology: str) -> str:
    """How an entry is measured when nobody says: counted when a count can see its effect and one
    server process holds it, timed otherwise. The table's headline scores are over these."""
    return COUNTED if entry.countable and one_process(topology) else TIMED


def kinds(entry: Entry, topology: str, measure: str) -> dict[str, str | None]:
    """kind → None when it is measured, or why not (a counted run of a cluster or a replica)."""
    wanted = {AUTO: [primary_kind(entry, topology)], COUNTED: [COUNTED], TIMED: [TIMED],
              BOTH: [COUNTED, TIMED]}[measure]
    return {kind: (f"a counted run counts one server process; {topology} has more"
                   if kind == COUNTED and not one_process(topology) else None) for kind in wanted}


def metric_of(entry: Entry, kind: str) -> str:
    if kind == COUNTED:
        return COUNTED_METRIC.get(entry.effect_lives_in, COUNTED_DEFAULT_METRIC)
    return TIMED_METRIC


def variant_of(entry: Entry, settings: Settings) -> str:
    """The entry's own build variant (jemalloc-only and -O level entries name `default`), else the runner's."""
    return entry.variant or settings.variant


def order(entries: list[Entry]) -> list[Entry]:
    """Strong single-commit entries first, the controls spread evenly among the changes (so that a
    partial run has measured both), then the ranges, then the weak entries; corpus order within."""
    def group(entry: Entry) -> int:
        return 2 if entry.weak else 1 if entry.ranged else 0

    def spread(entry: Entry) -> tuple[int, float, int]:
        peers = [e for e in entries if group(e) == group(entry) and (e.kind == "control") == (entry.kind == "control")]
        return group(entry), (peers.index(entry) + 0.5) / len(peers), entry.index
    return sorted(entries, key=spread)


def resume_key(entry: Entry, kind: str, settings: Settings, suite_texts: list[str], *, generated: bool = True) -> str:
    """A hash of what decides this measurement: the entry's measured fields, its suites' text, the
    variant, the kind and its settings (`generated`: a test's dataset is generated, so --scale counts)."""
    decided = {"fields": {name: entry.raw.get(name) for name in MEASURED_FIELDS},
               "variant": variant_of(entry, settings), "kind": kind,
               "settings": settings.of(kind, generated=generated),
               "metric": metric_of(entry, kind),
               "suites": [hashlib.sha256(text.encode()).hexdigest() for text in suite_texts]}
    return hashlib.sha256(json.dumps(decided, sort_keys=True, default=str).encode()).hexdigest()[:24]


def settings_json(settings: Settings) -> dict:
    return asdict(settings)
