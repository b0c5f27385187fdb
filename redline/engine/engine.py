"""The one execution engine: which run comes next, and where every run goes.

Every entry point (`redline run`, `compare`, `calibrate`, a job from the fleet) goes through it.
For each test and topology it asks a *test runner* to get every side ready, then runs the sides
interleaved A B B A …, asks for extra runs while a comparison is undecided (adaptive A/B), and
hands every run document to every *result sink* (the SQLite store is one) and every *observer*
(progress display, logs). It knows nothing of servers: the real runner is
redline.bench.server_runner.ServerRunner, composed with the store in redline.lab.local; tests drive the
engine with in-process fakes.

A timed A/B can run as a *duet* (`RunSettings.duet`): run i of both sides at once, both servers on
the same cores and both load generators on the client cores, so that whatever the machine does
meanwhile (a host taking the core, a busy neighbour, a frequency change) falls on both sides of
the pair alike. Only server CPU per operation keeps its meaning there; each side's throughput and
latency are what it got while sharing its cores (docs/statistics.md, "Duets").

A test whose every side failed FAILED_IN_A_ROW runs in a row runs no more: it fails by what it is,
and the note says so with the last error.
"""

from __future__ import annotations

import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, Protocol, Sequence

from redline.core.errors import RunError, SkipTest
from redline.core.run import Run
from redline.engine.run_plan import Observer, Observers, RunSettings, Side
from redline.engine.sinks import ResultSink
from redline.system import machine
from redline.system.machine_share import machine_share
from redline.system.workdirs import make_workdir

FAILED_IN_A_ROW = 2      # runs per side that failed one after another: the test's remaining runs are not run

if TYPE_CHECKING:
    from redline.suites import TestSpec
    from redline.topology import TopologySpec

MoreRuns = Callable[["TestSpec", list[Run], int], int]


class TestRunner(Protocol):
    """What a run is, for one test on one topology (the real one starts servers)."""

    def skip_reason(self) -> str | None: ...           # why this machine/target cannot run the test here
    def plan(self) -> str: ...                         # decide how runs reach their state (RunError); describe it
    def prepare(self, side: Side) -> None: ...         # the side's server ready (SkipTest, RunError)
    def ready(self, side: Side) -> bool: ...           # the side can run (again)
    def release(self, side: Side) -> None: ...         # the side runs no more: stop its server
    def needs_fresh_server(self, side: Side) -> bool: ...   # its server was lost in a way a new one mends
    def measure(self, side: Side, run: Run) -> None: ...    # fill the run: status ok or failed, metrics …
    def measure_together(self, runs: list[tuple[Side, Run]]) -> None: ...   # a duet: every side's run at once
    def close(self) -> None: ...


RunnerFactory = Callable[["TestSpec", "TopologySpec", list[Side], RunSettings, Observer, Path], TestRunner]


def interleaved(sides: list[Side], runs: int, start: int = 0) -> list[tuple[Side, int]]:
    """Runs start..runs-1 as A B B A A B … for two sides (each pair reverses the order of the
    previous one); one side: in order."""
    order: list[tuple[Side, int]] = []
    for index in range(start, runs):
        pair = sides if index % 2 == 0 else list(reversed(sides))
        order += [(side, index) for side in pair]
    return order


def slots(sides: list[Side], runs: int, start: int = 0, *, duet: bool = False) -> list[tuple[list[Side], int]]:
    """What runs at once, in order, for runs start..runs-1: one side at a time, interleaved; or, in a
    duet, every side of run i together (listed A B, then B A, …, the order their loads start in)."""
    if duet:
        return [(sides if index % 2 == 0 else list(reversed(sides)), index) for index in range(start, runs)]
    return [([side], index) for side, index in interleaved(sides, runs, start)]


@contextmanager
def fresh_workdir() -> Iterator[Path]:
    path = make_workdir()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


class Engine:
    def __init__(self, *, runners: RunnerFactory, sinks: Sequence[ResultSink] = (),
                 observers: Sequence[Observer] = ()):
        self.runners = runners
        self.sinks = list(sinks)
        self.observer = Observers(observers)

    def execute(self, *, tests: list[TestSpec], sides: list[Side], settings: RunSettings, session_id: int | None,
                more_runs: MoreRuns | None = None) -> list[Run]:
        """Every test, every topology, every side, interleaved. `more_runs(test, runs, runs_so_far)`
        may ask for extra runs per side after the planned ones (adaptive A/B)."""
        runs: list[Run] = []
        for number, test in enumerate(tests, 1):
            runs += self.execute_test(test, sides=sides, settings=settings, session_id=session_id,
                                      more_runs=more_runs, position=(number, len(tests)))
        return runs

    def execute_test(self, test: TestSpec, *, sides: list[Side], settings: RunSettings, session_id: int | None,
                     more_runs: MoreRuns | None = None, position: tuple[int, int] = (1, 1)) -> list[Run]:
        """One test on each of the settings' topologies, in a work directory of its own, holding the
        machine as its measure needs (redline.system.machine_share: a timed test alone)."""
        self.observer.test_started(test, *position)
        for dropped in test.dropped:          # redline-owned settings (redline.suites.owned)
            self.observer.note(f"{dropped.location}: {dropped.message}")
        runs: list[Run] = []
        with machine_share(counted=settings.counts(test), waiting=self.observer.note), fresh_workdir() as workdir:
            for topology in settings.topologies:
                runner = self.runners(test, topology, sides, settings, self.observer, workdir)
                runs += _TestExecution(self, test, topology, sides, settings, session_id, runner).execute(more_runs)
        return runs

    # -- what every run goes through ----------------------------------------------------------
    def new_run(self, test: TestSpec, side: Side, topology: TopologySpec, session_id: int | None, index: int,
                purpose: str = "measure") -> Run:
        run = Run(test=test.name, target=side.target.label, side=side.name, run_index=index,
                  topology=topology.name, purpose=purpose, suite_file=str(test.path), session_id=session_id)
        run.start()
        for sink in self.sinks:
            sink.run_started(run)
        return run

    def finished(self, run: Run) -> Run:
        for sink in self.sinks:
            sink.run_finished(run)
        return run

    def interrupted(self, run: Run, reason: str) -> None:
        for sink in self.sinks:
            sink.run_interrupted(run, reason)


class _TestExecution:
    """One test on one topology: the sides made ready, the interleaved runs, the extra runs."""

    def __init__(self, engine: Engine, test: TestSpec, topology: TopologySpec, sides: list[Side],
                 settings: RunSettings, session_id: int | None, runner: TestRunner):
        self.engine, self.test, self.topology, self.sides = engine, test, topology, sides
        self.settings, self.session_id, self.runner = settings, session_id, runner
        self.observer = engine.observer
        self.runs: list[Run] = []

    def execute(self, more_runs: MoreRuns | None) -> list[Run]:
        try:
            reason = self.runner.skip_reason()
            if reason:
                return [self._skipped(side, reason) for side in self.sides]
            try:
                description = self.runner.plan()
            except RunError as exc:
                return [self._failed(side, exc) for side in self.sides]
            for position, side in enumerate(self.sides):
                self._prepare(side)
                if not self._all_or_none(later=self.sides[position + 1:]):
                    return self.runs
            if any(self.runner.ready(side) for side in self.sides):
                self.observer.note(description)
            self._measured_runs(more_runs)
        finally:
            self.runner.close()
        return self.runs

    def _measured_runs(self, more_runs: MoreRuns | None) -> None:
        duet = self.settings.duet_for(self.test, self.sides)
        planned, batch = self.settings.runs, slots(self.sides, self.settings.runs, duet=duet)
        while batch and self._any_ready():
            for together, index in batch:
                ready = [side for side in together if self.runner.ready(side)]
                if duet and len(ready) < len(together):
                    break             # a duet without one of its sides measures something else: no more pairs
                if ready:
                    self.runs += self._run_slot(ready, index)
                for side in ready:
                    if self.runner.needs_fresh_server(side):
                        self._prepare(side)
                failing = self._failing_every_run()
                if failing:
                    self.observer.note(f"every side's last {FAILED_IN_A_ROW} runs failed ({failing}); "
                                       f"the remaining runs of {self.test.name} are not run")
                    return
            all_ready = all(self.runner.ready(side) for side in self.sides)
            extra = more_runs(self.test, self.runs, planned) if more_runs and all_ready else 0
            if extra:
                self.observer.note(f"undecided: {extra} more runs per side")
            planned, batch = planned + extra, slots(self.sides, planned + extra, start=planned, duet=duet)
        if self.settings.profile:
            for side in self.sides:
                if self.runner.ready(side):
                    self.runs.append(self._run(side, planned, purpose="profile"))

    def _failing_every_run(self) -> str | None:
        """The last error, when every side's last FAILED_IN_A_ROW runs failed: a test that fails by
        what it is (calls slower than the measured window, a reply the load generator refuses)
        fails every run alike, and more runs would only spend the time again."""
        error = None
        for side in self.sides:
            mine = [run for run in self.runs if run.side == side.name and run.purpose == "measure"]
            if len(mine) < FAILED_IN_A_ROW or any(run.status != "failed" for run in mine[-FAILED_IN_A_ROW:]):
                return None
            error = mine[-1].error
        return error

    def _any_ready(self) -> bool:
        return any(self.runner.ready(side) for side in self.sides)

    def _all_or_none(self, later: list[Side]) -> bool:
        """An A/B with one side only is no comparison: when a side cannot run the test, or its
        preparation failed, the sides prepared before it are released and the sides after it are
        not prepared at all (a failed preload of hours is not started again for nothing); each of
        them gets a skipped run that says which side it waited for."""
        lost = next((run for run in self.runs if run.status in ("skipped", "failed")), None)
        if lost is None:
            return True
        if len(self.sides) > 1:
            why = "cannot run this test" if lost.status == "skipped" else "could not be prepared"
            reason = f"not measured: {lost.target} {why} ({lost.error})"
            for side in self.sides:
                if self.runner.ready(side):
                    self.runner.release(side)
                    self.runs.append(self._skipped(side, reason))
            self.runs += [self._skipped(side, reason) for side in later]
        return False

    def _prepare(self, side: Side) -> None:
        """The side's server(s), in the test's state; or a skipped or failed run saying why not."""
        try:
            self.runner.prepare(side)
        except SkipTest as exc:
            self.runs.append(self._skipped(side, str(exc)))
        except RunError as exc:
            self.runs.append(self._failed(side, exc))

    def _run(self, side: Side, index: int, purpose: str = "measure") -> Run:
        return self._run_slot([side], index, purpose)[0]

    def _run_slot(self, sides: list[Side], index: int, purpose: str = "measure") -> list[Run]:
        """Run `index` of `sides`: of one side, or of several at once (a duet)."""
        runs = [self.engine.new_run(self.test, side, self.topology, self.session_id, index, purpose) for side in sides]
        try:
            if len(runs) == 1:
                self.runner.measure(sides[0], runs[0])
            else:
                self.runner.measure_together(list(zip(sides, runs)))
        except BaseException:
            for run in runs:
                self.engine.interrupted(run, "redline was interrupted during this run")
            raise
        for run in runs:
            self.observer.run_finished(self.engine.finished(run))
        return runs

    def _failed(self, side: Side, exc: RunError, index: int = 0) -> Run:
        """A side that could not be prepared: one failed run says why."""
        run = self.engine.new_run(self.test, side, self.topology, self.session_id, index)
        run.facts = {"machine": machine.facts()}
        run.server_log_tail = getattr(exc, "server_log_tail", None)
        run.finish("failed", error=str(exc))
        self.observer.run_finished(self.engine.finished(run))
        return run

    def _skipped(self, side: Side, reason: str) -> Run:
        """A test this machine or server cannot run: stored, so that history says why it is missing."""
        run = self.engine.new_run(self.test, side, self.topology, self.session_id, 0)
        run.facts = {"machine": machine.facts()}
        run.finish("skipped", error=reason)
        self.engine.finished(run)
        self.observer.test_skipped(self.test, reason)
        return run
