"""The scheduler's decisions with fake runners in real forked lanes (no server, no load generator):
lanes never exceed their cores, a timed job never shares the machine, stop() ends new work and
names what did not start, jobs added as others end, a lane that dies, bad input in a lane, and an
interruption that marks every lane's running run `interrupted` in a real SQLite store."""

from __future__ import annotations

import itertools
import threading

import pytest

from redline.core.errors import UsageError
from redline.lab.scheduler import Lane, Scheduler, SchedulerObserver, Status, plan_lanes
from redline.store.results import Store
from tests.scheduler_fakes import (Script, fake_engines, fake_sides, intervals, job, overlapping, quick_tests,
                                   resolver_for)


class _Store:
    def __init__(self, path):
        self.path = path


class Heard(SchedulerObserver):
    def __init__(self):
        self.started, self.finished, self.events, self.statuses = [], [], [], []

    def job_started(self, lane, job, test):
        self.started.append((lane, job.test))

    def lane_event(self, lane, event, *args, **kwargs):
        self.events.append((lane.name, event))

    def job_finished(self, lane, job, runs, lost):
        self.finished.append((lane, job.test, len(runs), lost))

    def status(self, status):
        self.statuses.append(status)


@pytest.fixture(scope="module")
def tests():
    return quick_tests()


@pytest.fixture
def script(tmp_path):
    return Script(log=tmp_path / "log.jsonl")


def scheduler(script, tmp_path, *, lanes=2, cpus=(0, 1), store=False, observers=()):
    store_path = tmp_path / "r.db" if store else None
    return Scheduler(_Store(store_path), lanes=lanes, cpus=list(cpus), observers=observers,
                     engines=fake_engines(script, store_path))


def test_lanes_split_the_cores_and_never_outnumber_them():
    assert plan_lanes([0, 1, 2, 3, 4], 2) == [Lane(0, (0, 1, 2)), Lane(1, (3, 4))]
    assert plan_lanes([3, 1], 2) == [Lane(0, (1,)), Lane(1, (3,))]
    for bad in (0, 3):
        with pytest.raises(UsageError, match=f"--jobs {bad}: this machine gives redline 2 core"):
            plan_lanes([0, 1], bad)


def test_counted_jobs_fill_the_lanes_each_on_its_own_cores(tests, script, tmp_path):
    sides = fake_sides("baseline", "comparison")
    chosen = tests[:6]
    script.meet = {chosen[0].name: "first-two", chosen[1].name: "first-two"}   # these two must overlap
    heard = Heard()
    results = scheduler(script, tmp_path, cpus=(0, 1, 2, 3), observers=[heard]).run(
        [job(t, sides, measure="instructions") for t in chosen], session_id=None, resolver=resolver_for(chosen, sides))
    assert len(results) == 6 and all(len(runs) == 4 for runs in results.values())
    spans = intervals(script.read())
    assert len(spans) == 6
    for a, b in itertools.combinations(spans, 2):
        if overlapping(a, b):
            assert not set(a["cpus"]) & set(b["cpus"]), (a, b)       # two lanes never share a core
    assert {tuple(s["cpus"]) for s in spans} <= {(0, 1), (2, 3)}     # each lane holds its own cores
    first, second = (next(s for s in spans if s["test"] == t.name) for t in chosen[:2])
    assert overlapping(first, second)                                 # the lanes did run side by side
    most = max(sum(1 for s in spans if s["at"] <= a["at"] < s.get("end", 1e18)) for a in spans)
    assert most <= 2
    assert len(heard.started) == 6 and all(lost is None for *_, lost in heard.finished)
    assert ("lane 1", "run_finished") in heard.events and heard.statuses[-1].waiting_counted == 0


def test_a_timed_job_waits_for_an_empty_machine_and_holds_it(tests, script, tmp_path):
    sides = fake_sides("baseline", "comparison")
    kinds = ["instructions", "instructions", "time", "instructions", "time", "instructions", "instructions"]
    jobs = [job(t, sides, measure=kind) for t, kind in zip(tests, kinds)]
    results = scheduler(script, tmp_path).run(jobs, session_id=None, resolver=resolver_for(tests, sides))
    assert len(results) == 7
    spans = intervals(script.read())
    timed = [s for s in spans if s["measure"] == "time"]
    assert len(timed) == 2
    for t in timed:
        assert t["cpus"] == [0, 1]                                   # every core
        assert not any(overlapping(t, other) for other in spans if other is not t)
    # the order is kept: the counted jobs behind a timed one start after it ended
    by_test = {s["test"]: s for s in spans}
    assert by_test[tests[3].name]["at"] >= by_test[tests[2].name]["end"]
    assert by_test[tests[2].name]["at"] >= max(by_test[tests[0].name]["end"], by_test[tests[1].name]["end"])


def test_stop_ends_new_work_and_names_the_jobs_that_did_not_start(tests, script, tmp_path):
    sides = fake_sides("baseline", "comparison")
    jobs = [job(t, sides, measure="instructions") for t in tests[:5]]
    done = []
    planner = scheduler(script, tmp_path, lanes=1)
    results = planner.run(jobs, session_id=None, resolver=resolver_for(tests, sides),
                          on_done=lambda j, runs: done.append(j.test), stop=lambda: len(done) >= 2)
    assert list(results) == [j.job_id for j in jobs[:2]]
    assert planner.not_started == jobs[2:]
    assert len(intervals(script.read())) == 2


def test_jobs_that_join_after_the_stop_are_named_with_those_that_never_started(tests, script, tmp_path):
    """Seen in a catalogue gate whose budget ended: a screen still running when the budget ended
    returned its timed confirmation, and the list of what never started was replaced by that one
    job (the page said "the budget left 1 tests undecided" beside 358 not measured)."""
    sides = fake_sides("baseline", "comparison")
    jobs = [job(t, sides, measure="instructions") for t in tests[:5]]
    confirms = {j.test: job(t, sides, measure="time") for j, t in zip(jobs, tests)}
    done = []

    def on_done(finished, runs):
        done.append(finished.test)
        return [confirms[finished.test]]

    planner = scheduler(script, tmp_path, lanes=2)
    results = planner.run(jobs, session_id=None, resolver=resolver_for(tests, sides), on_done=on_done,
                          stop=lambda: len(done) >= 1)
    assert set(results) == {j.job_id for j in jobs[:2]}             # both lanes' first jobs ran to their end
    assert {j.job_id for j in planner.not_started} == \
        {j.job_id for j in jobs[2:]} | {confirms[j.test].job_id for j in jobs[:2]}
    assert len(planner.not_started) == 5


def test_jobs_returned_by_on_done_join_the_queue_in_priority_order(tests, script, tmp_path):
    sides = fake_sides("baseline", "comparison")
    screen = [job(t, sides, measure="instructions") for t in tests[:3]]
    confirm = {j.test: job(t, sides, measure="time") for j, t in zip(screen, tests)}
    late = job(tests[5], sides, measure="time")

    def on_done(finished, runs):
        return [confirm[finished.test]] if finished.test in confirm and finished.settings["measure"] == "instructions" \
            else []
    priority = {j.job_id: 0 for j in screen} | {j.job_id: 1 for j in confirm.values()} | {late.job_id: 2}
    results = scheduler(script, tmp_path, lanes=1).run(
        [late, *screen], session_id=None, resolver=resolver_for(tests, sides), on_done=on_done,
        priority=lambda j: priority[j.job_id])
    order = [(s["test"], s["measure"]) for s in sorted(intervals(script.read()), key=lambda s: s["at"])]
    assert order[:3] == [(t.name, "instructions") for t in tests[:3]]
    assert order[-1] == (tests[5].name, "time") and len(results) == 7


def test_a_lane_that_dies_loses_its_job_and_the_others_go_on(tests, script, tmp_path):
    sides = fake_sides("baseline", "comparison")
    script.die = {tests[1].name}
    heard = Heard()
    planner = scheduler(script, tmp_path, observers=[heard])
    jobs = [job(t, sides, measure="instructions") for t in tests[:4]]
    results = planner.run(jobs, session_id=None, resolver=resolver_for(tests, sides))
    assert results[jobs[1].job_id] == [] and len(results) == 4
    assert "killed by SIGKILL" in planner.lost[jobs[1].job_id]
    assert all(len(results[j.job_id]) == 4 for j in jobs if j is not jobs[1])


def test_bad_input_found_in_a_lane_ends_the_scheduler_with_it(tests, script, tmp_path):
    sides = fake_sides("baseline", "comparison")
    script.usage_error = {tests[0].name}
    with pytest.raises(UsageError, match="a fake usage error"):
        scheduler(script, tmp_path).run([job(t, sides, measure="instructions") for t in tests[:3]],
                                        session_id=None, resolver=resolver_for(tests, sides))


def test_an_interruption_marks_the_running_run_of_every_lane_interrupted(tests, script, tmp_path):
    sides = fake_sides("baseline", "comparison")
    script.block = {tests[0].name, tests[1].name}
    store = Store(tmp_path / "r.db")
    session = store.begin_session(kind="gate", argv=[], machine={})

    def ctrl_c():                 # Ctrl-C in the scheduler's process once both lanes are inside a run
        blocked = [e for e in script.read() if e["event"] == "blocked"]
        if len(blocked) == 2:
            raise KeyboardInterrupt
        return False
    with pytest.raises(KeyboardInterrupt):
        scheduler(script, tmp_path, store=True).run(
            [job(t, sides, measure="instructions") for t in tests[:2]] + [job(tests[2], sides, measure="time")],
            session_id=session, resolver=resolver_for(tests, sides), stop=ctrl_c)
    runs = Store(tmp_path / "r.db").load_runs(session)
    assert sorted(r.test for r in runs) == sorted(t.name for t in tests[:2])
    assert {r.status for r in runs} == {"interrupted"}
    assert all("interrupted" in r.error for r in runs)
    assert {e["test"] for e in script.read() if e["event"] == "end"} == {t.name for t in tests[:2]}   # closed


def test_the_status_estimates_the_time_left_from_the_jobs_that_ended():
    status = Status(lanes=2, running={}, waiting_counted=4, waiting_timed=1, finished=3,
                    mean_counted_s=60.0, mean_timed_s=100.0)
    assert status.left_s == 4 * 60 / 2 + 100
    assert Status(2, {}, 1, 0, 0, None, None).left_s is None


def test_the_scheduler_runs_no_thread_of_its_own(tests, script, tmp_path):
    sides = fake_sides("baseline", "comparison")
    before = threading.active_count()
    seen = []

    class Count(SchedulerObserver):
        def job_started(self, lane, job, test):
            seen.append(threading.active_count())
    scheduler(script, tmp_path, observers=[Count()]).run([job(t, sides, measure="instructions") for t in tests[:2]],
                                                         session_id=None, resolver=resolver_for(tests, sides))
    assert set(seen) == {before}


def test_jobs_whose_servers_would_not_fit_in_memory_together_do_not_share_the_lanes(tests, script, tmp_path):
    sides = fake_sides("baseline", "comparison")
    big = {tests[0].name, tests[1].name}
    planner = Scheduler(_Store(None), lanes=2, cpus=[0, 1], engines=fake_engines(script),
                        memory=lambda job, test: 600 if test.name in big else 100, memory_limit=1000)
    planner.run([job(t, sides, measure="instructions") for t in tests[:4]], session_id=None,
                resolver=resolver_for(tests, sides))
    spans = {s["test"]: s for s in intervals(script.read())}
    assert not overlapping(spans[tests[0].name], spans[tests[1].name])     # 600 + 600 > 1000
    assert len(spans) == 4


def test_priority_is_asked_again_once_jobs_have_ended(tests, script, tmp_path):
    sides = fake_sides("baseline", "comparison")
    first, second, third = (job(t, sides, measure="instructions") for t in tests[:3])
    ended = []
    rank = {first.job_id: 0, second.job_id: 1, third.job_id: 2}

    def on_done(finished, runs):
        ended.append(finished.test)
        rank[third.job_id] = -1          # what the first job found makes the third one more urgent
    scheduler(script, tmp_path, lanes=1).run([first, second, third], session_id=None,
                                             resolver=resolver_for(tests, sides), on_done=on_done,
                                             priority=lambda j: rank[j.job_id])
    assert [s["test"] for s in sorted(intervals(script.read()), key=lambda s: s["at"])] == \
        [tests[0].name, tests[2].name, tests[1].name]
