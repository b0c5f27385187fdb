"""The engine's decisions with in-process fakes (no server, no load generator): interleaving order,
adaptive extra runs, a side that cannot run, a failing side, a hung server replaced, an
interrupted run, sinks and observers. The same paths run on real servers in test_run_cli.py,
test_compare_cli.py and test_faults.py; these tests pin the logic and take well under a second."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from redline.engine.engine import Engine
from redline.core.errors import RunError, SkipTest
from redline.engine.job import Job, JobResolver, SideSpec, jobs_for, suite_reference
from redline.lab.local import execute_job
from redline.core.run import Run
from redline.engine.run_plan import Observer, RunSettings, Side
from redline.store.results import Store
from redline.suites import resolve_suites
from redline.server.targets import Target


@dataclass
class Script:
    """What the fake runner does: per side label, the ops/s of each run (cycled), and faults."""

    ops: dict[str, list[float]] = field(default_factory=dict)
    skip: dict[str, str] = field(default_factory=dict)        # side label -> SkipTest reason at prepare
    fail_prepare: set[str] = field(default_factory=set)
    fail_run: dict[str, set[int]] = field(default_factory=dict)   # side label -> run indexes that fail
    hang_run: dict[str, set[int]] = field(default_factory=dict)   # ... whose server hangs (replaced)
    fail_alive: dict[str, set[int]] = field(default_factory=dict)  # ... that fail on a server that lives on
    interrupt_at: int | None = None                           # the Nth measure() raises KeyboardInterrupt


class FakeRunner:
    """A TestRunner that measures nothing: it follows a Script and records every call."""

    def __init__(self, script: Script, calls: list):
        self.script, self.calls = script, calls
        self.ready_sides: set[str] = set()
        self.replace: set[str] = set()

    def skip_reason(self):
        return None

    def plan(self):
        return "fake plan"

    def prepare(self, side):
        label = side.name or "run"
        self.calls.append(("prepare", label))
        if label in self.script.skip:
            raise SkipTest(self.script.skip[label])
        if label in self.script.fail_prepare:
            raise RunError(f"{label} would not start")
        self.ready_sides.add(label)

    def ready(self, side):
        return (side.name or "run") in self.ready_sides

    def release(self, side):
        self.ready_sides.discard(side.name or "run")

    def needs_fresh_server(self, side):
        label = side.name or "run"
        if label in self.replace:
            self.replace.discard(label)
            return True
        return False

    def measure(self, side, run: Run):
        label = side.name or "run"
        self.calls.append(("measure", label, run.run_index, run.purpose))
        if self.script.interrupt_at is not None and \
                sum(1 for c in self.calls if c[0] == "measure") == self.script.interrupt_at:
            raise KeyboardInterrupt
        if run.run_index in self.script.hang_run.get(label, set()):
            self.ready_sides.discard(label)
            self.replace.add(label)
            run.finish("failed", error="the server stopped answering")
            return
        if run.run_index in self.script.fail_run.get(label, set()):
            run.finish("failed", error="the server exited")
            self.ready_sides.discard(label)
            return
        if run.run_index in self.script.fail_alive.get(label, set()):
            run.finish("failed", error="no reply completed in the measured window")
            return
        values = self.script.ops.get(label, [1000.0])
        run.metrics = {"ops_per_sec": values[run.run_index % len(values)]}
        run.finish("ok")

    def measure_together(self, runs):
        self.calls.append(("together", [side.name for side, _ in runs], runs[0][1].run_index))
        for side, run in runs:
            self.measure(side, run)

    def close(self):
        self.calls.append(("close",))


class ListSink:
    def __init__(self):
        self.events: list[tuple[str, str, str]] = []

    def run_started(self, run):
        self.events.append(("started", run.uid, run.status))

    def run_finished(self, run):
        self.events.append(("finished", run.uid, run.status))

    def run_interrupted(self, run, reason):
        self.events.append(("interrupted", run.uid, reason))


class Heard(Observer):
    def __init__(self):
        self.finished: list[Run] = []
        self.notes: list[str] = []

    def run_finished(self, run):
        self.finished.append(run)

    def note(self, text):
        self.notes.append(text)


@pytest.fixture(scope="module")
def test_spec():
    return resolve_suites(["quick"])[0]


def sides(*names):
    return [Side(Target(spec=f"bin:/fake/{name}", binary=Path(f"/fake/{name}")), name) for name in names]


def engine_with(script: Script, *, sinks=(), observers=()):
    calls: list = []

    def runners(test, topology, sides, settings, observer, workdir):
        assert workdir.is_dir()
        calls.append(("workdir", workdir))
        return FakeRunner(script, calls)

    return Engine(runners=runners, sinks=sinks, observers=observers), calls


def measured(calls):
    return [(c[1], c[2]) for c in calls if c[0] == "measure" and c[3] == "measure"]


def test_two_sides_run_interleaved_a_b_b_a(test_spec):
    engine, calls = engine_with(Script())
    runs = engine.execute(tests=[test_spec], sides=sides("baseline", "comparison"),
                          settings=RunSettings(runs=4), session_id=None)
    assert measured(calls) == [("baseline", 0), ("comparison", 0), ("comparison", 1), ("baseline", 1),
                               ("baseline", 2), ("comparison", 2), ("comparison", 3), ("baseline", 3)]
    assert [r.status for r in runs] == ["ok"] * 8 and calls[-1] == ("close",)


def together(calls):
    return [(c[1], c[2]) for c in calls if c[0] == "together"]


def test_a_duet_runs_each_pair_at_once_and_alternates_which_load_starts_first(test_spec):
    engine, calls = engine_with(Script())
    runs = engine.execute(tests=[test_spec], sides=sides("baseline", "comparison"),
                          settings=RunSettings(runs=3, duet=True), session_id=None)
    assert together(calls) == [(["baseline", "comparison"], 0), (["comparison", "baseline"], 1),
                               (["baseline", "comparison"], 2)]
    assert [(r.side, r.run_index, r.status) for r in runs] == [
        ("baseline", 0, "ok"), ("comparison", 0, "ok"), ("comparison", 1, "ok"), ("baseline", 1, "ok"),
        ("baseline", 2, "ok"), ("comparison", 2, "ok")]


def test_a_duets_extra_runs_are_duets_too(test_spec):
    engine, calls = engine_with(Script())
    engine.execute(tests=[test_spec], sides=sides("baseline", "comparison"), settings=RunSettings(runs=2, duet=True),
                   session_id=None, more_runs=lambda test, runs, so_far: 2 if so_far < 4 else 0)
    assert [index for _, index in together(calls)] == [0, 1, 2, 3] and len(measured(calls)) == 8


def test_a_counted_test_or_a_lone_side_is_never_a_duet(test_spec):
    engine, calls = engine_with(Script())
    engine.execute(tests=[test_spec], sides=sides("baseline", "comparison"),
                   settings=RunSettings(runs=2, duet=True, measure="instructions"), session_id=None)
    engine.execute(tests=[test_spec], sides=sides("baseline"), settings=RunSettings(runs=2, duet=True),
                   session_id=None)
    assert together(calls) == [] and len(measured(calls)) == 6


def test_a_duet_ends_when_a_side_can_run_no_more(test_spec):
    engine, calls = engine_with(Script(fail_run={"comparison": {1}}))
    runs = engine.execute(tests=[test_spec], sides=sides("baseline", "comparison"),
                          settings=RunSettings(runs=4, duet=True), session_id=None)
    assert [index for _, index in together(calls)] == [0, 1]      # never a lone baseline measured as a duet
    assert [(r.side, r.run_index, r.status) for r in runs][-2:] == [("comparison", 1, "failed"), ("baseline", 1, "ok")]


def test_an_interrupted_duet_marks_both_of_its_runs_interrupted(test_spec):
    sink = ListSink()
    engine, calls = engine_with(Script(interrupt_at=3), sinks=[sink])
    with pytest.raises(KeyboardInterrupt):
        engine.execute(tests=[test_spec], sides=sides("baseline", "comparison"),
                       settings=RunSettings(runs=2, duet=True), session_id=None)
    assert [e[0] for e in sink.events] == ["started", "started", "finished", "finished", "started", "started",
                                           "interrupted", "interrupted"]
    assert calls[-1] == ("close",)


def test_every_run_reaches_every_sink_and_observer_once(test_spec):
    first, second, heard = ListSink(), ListSink(), Heard()
    engine, _ = engine_with(Script(), sinks=[first, second], observers=[heard, Heard()])
    runs = engine.execute(tests=[test_spec], sides=sides("baseline", "comparison"),
                          settings=RunSettings(runs=2), session_id=7)
    for sink in (first, second):
        assert [e[0] for e in sink.events] == ["started", "finished"] * 4
        assert {e[1] for e in sink.events} == {r.uid for r in runs}
    assert heard.finished == runs and all(r.session_id == 7 for r in runs)


def test_adaptive_extra_runs_continue_in_abba_blocks_until_decided(test_spec):
    asked = []

    def more_runs(test, runs, runs_so_far):
        asked.append(runs_so_far)
        return 2 if runs_so_far < 6 else 0

    engine, calls = engine_with(Script())
    heard = Heard()
    engine.observer.observers.append(heard)
    engine.execute(tests=[test_spec], sides=sides("baseline", "comparison"), settings=RunSettings(runs=2),
                   session_id=None, more_runs=more_runs)
    assert asked == [2, 4, 6]
    assert measured(calls)[4:8] == [("baseline", 2), ("comparison", 2), ("comparison", 3), ("baseline", 3)]
    assert len(measured(calls)) == 12 and heard.notes.count("undecided: 2 more runs per side") == 2


# a 1% change in runs that spread by 3-5%: 15 runs per side would not decide it either
WIDE_AROUND_ONE_PERCENT = [1.05, 0.97, 1.04, 0.98, 1.01, 0.965, 1.045, 0.975, 1.03]
# 3% faster, one pair held back by a slow comparison run: the next runs decide it
THREE_PERCENT_ONE_SLOW_PAIR = [1.03, 1.025, 1.02, 1.035, 0.96, 1.028, 1.022, 1.04, 1.031, 1.03, 1.025, 1.02,
                               1.035, 1.028, 1.022]


def compare_job_runs(test_spec, changes):
    from redline.analysis.comparison import compare_test, looks_confidence
    the_sides = sides("baseline", "comparison")
    [job] = jobs_for([test_spec], the_sides, RunSettings(runs=7), max_runs=15, lone_p_value=0.05)
    engine, calls = engine_with(Script(ops={"baseline": [1000.0], "comparison": [1000.0 * c for c in changes]}))
    runs = execute_job(job, engine=engine, session_id=None, resolver=JobResolver(tests=[test_spec], sides=the_sides))
    [ops] = [c for c in compare_test(runs[0].key, runs, {}, confidence=looks_confidence(7, 15), runs_allowed=15)
             if c.metric == "ops_per_sec"]
    return sum(1 for r in runs if r.side == "baseline"), ops


def test_a_compare_stops_adding_runs_that_have_little_chance_to_decide(test_spec):
    per_side, ops = compare_job_runs(test_spec, WIDE_AROUND_ONE_PERCENT)
    assert per_side < 15 and ops.verdict_alone == "inconclusive"
    assert ops.result.futility_note.startswith(f"{per_side} runs per side; more had a ")


def test_a_compare_goes_on_while_more_runs_can_decide(test_spec):
    per_side, ops = compare_job_runs(test_spec, THREE_PERCENT_ONE_SLOW_PAIR)
    assert per_side > 7 and ops.verdict_alone == "improvement" and ops.result.futility_note is None


def test_a_side_that_cannot_run_the_test_means_no_side_is_measured(test_spec):
    engine, calls = engine_with(Script(skip={"comparison": "the server does not know GEOSEARCH"}))
    runs = engine.execute(tests=[test_spec], sides=sides("baseline", "comparison"),
                          settings=RunSettings(runs=3), session_id=None)
    assert measured(calls) == []
    assert [r.status for r in runs] == ["skipped", "skipped"]
    assert "cannot run this test" in next(r.error for r in runs if r.side == "baseline")


def test_a_side_that_fails_to_start_is_one_failed_run_and_the_other_side_is_not_even_prepared(test_spec):
    engine, calls = engine_with(Script(fail_prepare={"baseline"}))
    runs = engine.execute(tests=[test_spec], sides=sides("baseline", "comparison"),
                          settings=RunSettings(runs=2), session_id=None)
    assert [c for c in calls if c[0] == "prepare"] == [("prepare", "baseline")]
    assert measured(calls) == []
    assert [(r.side, r.status) for r in runs] == [("baseline", "failed"), ("comparison", "skipped")]
    assert runs[0].error == "baseline would not start"
    assert runs[1].error == f"not measured: {runs[0].target} could not be prepared (baseline would not start)"


def test_a_later_side_that_fails_to_start_releases_the_side_prepared_before_it(test_spec):
    engine, calls = engine_with(Script(fail_prepare={"comparison"}))
    runs = engine.execute(tests=[test_spec], sides=sides("baseline", "comparison"),
                          settings=RunSettings(runs=2), session_id=None)
    assert measured(calls) == []
    assert [(r.side, r.status) for r in runs] == [("comparison", "failed"), ("baseline", "skipped")]
    assert runs[1].error.startswith(f"not measured: {runs[0].target} could not be prepared")


def test_a_lone_side_that_fails_to_start_is_one_failed_run(test_spec):
    engine, calls = engine_with(Script(fail_prepare={"baseline"}))
    runs = engine.execute(tests=[test_spec], sides=sides("baseline"), settings=RunSettings(runs=2), session_id=None)
    assert [(r.side, r.status, r.error) for r in runs] == [("baseline", "failed", "baseline would not start")]


def test_a_side_whose_server_exits_runs_no_more_and_gets_no_extra_runs(test_spec):
    engine, calls = engine_with(Script(fail_run={"comparison": {1}}))
    runs = engine.execute(tests=[test_spec], sides=sides("baseline", "comparison"), settings=RunSettings(runs=3),
                          session_id=None, more_runs=lambda *a: 2)
    assert ("comparison", 2) not in measured(calls)
    assert [r.status for r in runs if r.side == "comparison"] == ["ok", "failed"]
    assert len([r for r in runs if r.side == "baseline"]) == 3      # no extra runs for a one-sided A/B


@pytest.mark.parametrize("duet", [False, True], ids=["interleaved", "duet"])
def test_a_test_that_fails_every_run_stops_after_two_in_a_row(test_spec, duet):
    heard = Heard()
    engine, calls = engine_with(Script(fail_alive={"baseline": set(range(7)), "comparison": set(range(7))}),
                                observers=[heard])
    runs = engine.execute(tests=[test_spec], sides=sides("baseline", "comparison"),
                          settings=RunSettings(runs=7, duet=duet, profile=True), session_id=None,
                          more_runs=lambda *a: 2)
    assert [(r.side, r.run_index, r.status) for r in runs] == (
        [("baseline", 0, "failed"), ("comparison", 0, "failed"), ("comparison", 1, "failed"),
         ("baseline", 1, "failed")])                                  # no more runs, no profile run
    assert [n for n in heard.notes if "runs failed" in n] == [
        "every side's last 2 runs failed (no reply completed in the measured window); "
        f"the remaining runs of {test_spec.name} are not run"]


@pytest.mark.parametrize("failing", [{"baseline": {0, 2, 4}, "comparison": {0, 2, 4}},    # never two in a row
                                     {"baseline": {0, 1, 2, 3}, "comparison": set()}],    # one side only
                         ids=["alternating", "one-side"])
def test_failures_not_in_a_row_on_every_side_leave_the_runs_planned(test_spec, failing):
    engine, calls = engine_with(Script(fail_alive=failing))
    runs = engine.execute(tests=[test_spec], sides=sides("baseline", "comparison"), settings=RunSettings(runs=5),
                          session_id=None)
    assert len(runs) == 10
    assert sorted((r.side, r.run_index) for r in runs if r.status == "failed") == sorted(
        (side, index) for side, indexes in failing.items() for index in indexes)


def test_a_hung_server_fails_its_run_and_a_fresh_one_serves_the_next(test_spec):
    engine, calls = engine_with(Script(hang_run={"baseline": {0}}))
    runs = engine.execute(tests=[test_spec], sides=sides("baseline"), settings=RunSettings(runs=3), session_id=None)
    assert [r.status for r in runs] == ["failed", "ok", "ok"]
    assert [c for c in calls if c[0] == "prepare"] == [("prepare", "baseline")] * 2


def test_an_interrupted_run_is_marked_in_every_sink_and_the_runner_is_closed(test_spec):
    sink = ListSink()
    engine, calls = engine_with(Script(interrupt_at=3), sinks=[sink])
    with pytest.raises(KeyboardInterrupt):
        engine.execute(tests=[test_spec], sides=sides("baseline", "comparison"),
                       settings=RunSettings(runs=2), session_id=None)
    assert [e[0] for e in sink.events] == ["started", "finished", "started", "finished", "started", "interrupted"]
    assert calls[-1] == ("close",)


def test_profile_runs_follow_the_measured_ones(test_spec):
    engine, calls = engine_with(Script())
    runs = engine.execute(tests=[test_spec], sides=sides("baseline", "comparison"),
                          settings=RunSettings(runs=1, profile=True), session_id=None)
    assert [(r.side, r.run_index, r.purpose) for r in runs][-2:] == [("baseline", 1, "profile"),
                                                                     ("comparison", 1, "profile")]


def test_each_test_gets_a_fresh_work_directory_removed_afterwards(test_spec):
    engine, calls = engine_with(Script())
    engine.execute(tests=[test_spec, test_spec], sides=sides("baseline"), settings=RunSettings(), session_id=None)
    workdirs = [c[1] for c in calls if c[0] == "workdir"]
    assert len(set(workdirs)) == 2 and not any(w.exists() for w in workdirs)


# -- a job is data --------------------------------------------------------------------------------
def test_a_job_survives_json_and_runs_the_same_path(test_spec, tmp_path):
    the_sides = sides("baseline", "comparison")
    [job] = jobs_for([test_spec], the_sides, RunSettings(runs=2, duration_s=1.0, warmup_s=0.0),
                     max_runs=4, lone_p_value=0.01)
    assert job.suite == suite_reference(test_spec.path) and job.suite.startswith("builtin:quick/")
    again = Job.from_json(json.loads(job.dumps()))
    assert again == job and again.run_settings().duration_s == 1.0 and again.adaptive
    engine, calls = engine_with(Script())
    runs = execute_job(again, engine=engine, session_id=None,
                       resolver=JobResolver(tests=[test_spec], sides=the_sides))
    assert len(runs) == 4 and [SideSpec.from_json(s.to_json()) for s in again.sides] == again.sides


def test_a_job_of_a_newer_format_is_refused():
    with pytest.raises(ValueError, match="format 99"):
        Job.from_json({"format": 99, "suite": "x", "test": "t", "sides": []})


def test_a_run_document_round_trips_through_json_and_the_store(tmp_path):
    run = Run(test="t", target="bin:x", side="baseline", run_index=3, status="ok",
              metrics={"ops_per_sec": 5.0, "p90_ms": 0.5}, series={"ops": [1.0, 2.0]}, flags=["f"],
              facts={"state": {"origin": "restored"}})
    assert Run.from_json(json.loads(json.dumps(run.to_json()))).to_json() == run.to_json()
    store = Store(tmp_path / "r.db")
    run.session_id = store.begin_session(kind="fleet", argv=[], machine={})
    assert store.add_run(run) is True and store.add_run(run) is False
    [stored] = store.load_runs(run.session_id)
    assert stored.to_json() == run.to_json() and stored.state == {"origin": "restored"}
