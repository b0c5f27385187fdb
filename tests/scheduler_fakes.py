"""In-process fakes for the scheduler and the gate: an engine whose test runner measures nothing
but follows a script, and writes what it did (which lane, which cores, when) to a log file the
test reads back — the runners live in forked lane processes, so the log is a file (O_APPEND
lines), not a list. Nothing here depends on the machine's speed: tests assert invariants of the
intervals (overlaps, cores), and where two jobs must overlap, they wait for each other on files."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from redline.core.errors import UsageError
from redline.core.run import Run
from redline.engine.engine import Engine
from redline.engine.job import Job, JobResolver, SideSpec, suite_reference
from redline.engine.run_plan import Side
from redline.server.targets import Target
from redline.store.results import Store
from redline.suites import resolve_suites
from redline.system.steadiness import CoreProbe, Steadiness

WAIT_S = 60.0          # the longest a fake waits for another lane (a generous bound, never a speed assumption)


def quick_tests():
    return resolve_suites(["quick"])


def fake_sides(*names, binary="fake"):
    return [Side(Target(spec=f"bin:/fake/{binary}-{name}", binary=Path(f"/fake/{binary}-{name}")), name)
            for name in names]


@dataclass
class Script:
    """What the fake runner does, by test name: metrics per side, and behaviour."""

    log: Path
    values: dict = field(default_factory=dict)       # test -> side -> {metric: value or [values by run]}
    meet: dict = field(default_factory=dict)         # test -> a file name: wait until another job wrote it too
    block: set = field(default_factory=set)          # tests whose measure() never returns by itself
    die: set = field(default_factory=set)            # tests whose lane process is killed (the OOM killer)
    usage_error: set = field(default_factory=set)    # tests whose runner raises a usage error
    fail: set = field(default_factory=set)           # tests whose runs fail
    unsteady: set = field(default_factory=set)       # timed tests whose probe finds core 0 unsteady (1.6x)

    def write(self, **entry) -> None:
        with open(self.log, "a") as out:
            out.write(json.dumps(entry) + "\n")

    def read(self) -> list[dict]:
        return [json.loads(line) for line in self.log.read_text().splitlines()] if self.log.exists() else []


COUNTED_DEFAULT = {"instructions_per_op": 1000.0, "instructions_per_op_command": 400.0, "est_cycles_per_op": 1200.0,
                   "server_reads_per_op": 0.1, "server_writes_per_op": 0.1}
TIMED_DEFAULT = {"ops_per_sec": 50000.0, "p50_ms": 0.5, "p99_ms": 1.0, "server_cpu_us_per_op": 10.0}


class FakeRunner:
    def __init__(self, script: Script, test, settings, cpus):
        self.script, self.test, self.settings, self.cpus = script, test, settings, list(cpus)
        self.ready_sides: set[str] = set()
        self.started = False

    def skip_reason(self):
        return None

    def plan(self):
        if self.test.name in self.script.usage_error:
            raise UsageError(f"{self.test.name}: a fake usage error")
        return "fake plan"

    def prepare(self, side):
        if not self.started:
            self.started = True
            self.script.write(event="start", test=self.test.name, pid=os.getpid(), cpus=self.cpus,
                              measure=self.settings.measure, system_calls_judged=self.settings.system_calls_judged,
                              at=time.monotonic())
            meeting = self.script.meet.get(self.test.name)
            if meeting:
                self._meet(meeting)
        self.ready_sides.add(side.name)

    def _meet(self, name: str) -> None:
        """Wait (bounded) until a second job has arrived at the same meeting point."""
        here = self.script.log.parent / f"meet-{name}-{os.getpid()}"
        here.touch()
        deadline = time.monotonic() + WAIT_S
        while len(list(self.script.log.parent.glob(f"meet-{name}-*"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)

    def ready(self, side):
        return side.name in self.ready_sides

    def release(self, side):
        self.ready_sides.discard(side.name)

    def needs_fresh_server(self, side):
        return False

    def measure(self, side, run: Run):
        name = self.test.name
        if name in self.script.die:
            os.kill(os.getpid(), 9)
        if name in self.script.block:
            self.script.write(event="blocked", test=name, pid=os.getpid(), run=run.uid)
            while True:
                time.sleep(0.05)
        if name in self.script.fail:
            run.finish("failed", error="the server exited")
            return
        counted = self.settings.measure == "instructions"
        defaults = COUNTED_DEFAULT if counted else TIMED_DEFAULT
        given = self.script.values.get(name, {}).get(side.name, {})
        metrics = {}
        for metric, default in defaults.items():
            value = given.get(metric, default)
            if isinstance(value, list):
                value = value[run.run_index % len(value)]
            elif not counted:        # timed runs scatter a little (deterministically)
                value = value * (1 + 0.002 * ((run.run_index * 7 + (side.name == "comparison") * 3) % 5 - 2))
            metrics[metric] = value
        run.metrics = metrics
        run.facts = {"state": {"origin": "empty"}}
        if counted:
            run.facts["instructions"] = {"requests_per_connection": 100}
        else:                    # a timed test's runs carry the probe taken as it started
            spread = 1.6 if name in self.script.unsteady else 1.02
            probe = Steadiness(tuple(CoreProbe(core, 100, spread if core == 0 else 1.02, 1.0, 0.0)
                                     for core in self.cpus), 0.5)
            run.facts["machine"] = {"steadiness": probe.as_json()}
        run.finish("ok")

    def close(self):
        self.script.write(event="end", test=self.test.name, pid=os.getpid(), at=time.monotonic())


def fake_engines(script: Script, store_path: Path | None = None):
    """An EngineFactory for the scheduler: fake runners on the lane's cores; the store (a real
    SQLite file), when given, is the sink, opened in the lane's process."""
    def engines(lane, observer):
        def runners(test, topology, sides, settings, observer, workdir):
            return FakeRunner(script, test, settings, lane.cpus)
        sinks = [Store(store_path)] if store_path is not None else []
        return Engine(runners=runners, sinks=sinks, observers=[observer])
    return engines


def job(test, sides, *, measure: str, runs: int = 2, max_runs: int | None = None) -> Job:
    return Job(suite=suite_reference(test.path), test=test.name, sides=[SideSpec.of(s) for s in sides],
               settings={"runs": runs, "measure": measure}, max_runs=max_runs)


def resolver_for(tests, sides) -> JobResolver:
    return JobResolver(tests=tests, sides=sides)


def intervals(entries: list[dict]) -> list[dict]:
    """One interval per job (by pid): its test, cores, measure, start and end."""
    by_pid: dict[int, dict] = {}
    for entry in entries:
        if entry["event"] == "start":
            by_pid[entry["pid"]] = dict(entry)
        elif entry["event"] == "end" and entry["pid"] in by_pid:
            by_pid[entry["pid"]]["end"] = entry["at"]
    return list(by_pid.values())


def overlapping(a: dict, b: dict) -> bool:
    return a["at"] < b.get("end", float("inf")) and b["at"] < a.get("end", float("inf"))
