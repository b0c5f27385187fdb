"""What a compare asks of each test's finding (docs/statistics.md §5), on in-process fakes: its
tests run one after another, so a test needs only what Benjamini–Hochberg over the whole session
will grant it given the tests before it; a resumed compare carries a test that stopped on that
room only when the tests that granted it are carried too."""

from __future__ import annotations

from pathlib import Path

import pytest

from redline.analysis.comparison import FDR_Q, apply_false_discovery_control, measured_runs_by_test
from redline.engine.job import JobResolver, jobs_for
from redline.engine.run_plan import RunSettings, Side
from redline.lab.compare import compare_plan, judged
from redline.lab.compare_resume import EarlierCompare, ended_runs
from redline.lab.local import execute_jobs
from redline.server.targets import Target
from redline.suites import resolve_suites
from tests.test_engine_fakes import Script, engine_with

TESTS = 6


@pytest.fixture(scope="module")
def quick_tests():
    tests = resolve_suites(["quick"])[:TESTS]
    assert len({test.name for test in tests}) == TESTS
    return tests


def both_sides(tmp_path: Path) -> list[Side]:
    sides = []
    for name in ("baseline", "comparison"):
        binary = tmp_path / name
        binary.write_text(name)                 # a resume checks the carried runs' binaries against these
        sides.append(Side(Target(spec=f"bin:{binary}", binary=binary), name))
    return sides


def twice_as_fast_compare(tmp_path: Path, tests) -> tuple[object, list]:
    """Every test twice as fast on the comparison (ops/s the only metric the fakes give), 5 runs
    per side, up to 15, as one compare session: (its plan, every run)."""
    sides = both_sides(tmp_path)
    plan = compare_plan(sides, tests, RunSettings(runs=5), max_runs=15, floors={})
    engine, _ = engine_with(Script(ops={"baseline": [1000.0], "comparison": [2000.0]}))
    jobs = jobs_for(tests, sides, plan.settings, max_runs=plan.max_runs, lone_p_value=plan.lone_p_value)
    runs = execute_jobs(jobs, engine=engine, session_id=None, resolver=JobResolver(tests=tests, sides=sides),
                        floors=plan.floors, lone_p_value=plan.lone_p_value_for)
    return plan, runs


def runs_per_side(runs, tests) -> list[int]:
    return [sum(1 for r in runs if r.test == test.name and r.side == "baseline" and r.purpose == "measure")
            for test in tests]


def test_each_change_needs_only_what_the_changes_before_it_leave_room_for(tmp_path, quick_tests):
    """m = 6 tests × 5 metrics = 30. The rank p (at the confidence per look of 6 looks, the rank-sum
    test's) of 5 + 5 runs that all agree is 2/252 = 0.0079, of 7 + 7 2/3432 = 0.00058. Alone among 30 a finding needs q/30 = 0.0017: 7 + 7. The k-th test may
    have q·k/30 with k − 1 changes decided: 0.0083 from the fifth on, which 5 + 5 reach. Every change
    survives the session's Benjamini–Hochberg at the end."""
    plan, runs = twice_as_fast_compare(tmp_path, quick_tests)
    assert plan.family == TESTS * 5 and plan.lone_p_value == pytest.approx(FDR_Q / 30)
    assert runs_per_side(runs, quick_tests) == [7, 7, 7, 7, 5, 5]
    comparisons = [c for test, records in measured_runs_by_test(runs).items() for c in judged(plan, test, records)]
    apply_false_discovery_control(comparisons)
    decided = [c for c in comparisons if c.result is not None]
    assert len(decided) == TESTS and all(c.survives_fdr and c.verdict == "improvement" for c in decided)


def test_the_room_is_q_over_m_until_earlier_tests_decide_changes(tmp_path, quick_tests):
    plan = compare_plan(both_sides(tmp_path), quick_tests, RunSettings(runs=5), max_runs=15, floors={})
    engine, _ = engine_with(Script(ops={"baseline": [1000.0, 1010.0, 990.0], "comparison": [1005.0, 995.0, 1000.0]}))
    sides = plan.sides
    alike = execute_jobs(jobs_for(quick_tests[:2], sides, plan.settings), engine=engine, session_id=None,
                         resolver=JobResolver(tests=quick_tests, sides=sides))
    assert plan.lone_p_value_for([]) == pytest.approx(FDR_Q / 30)
    assert plan.lone_p_value_for(alike) == pytest.approx(FDR_Q / 30)        # no change decided: no more room


def test_a_resume_carries_a_test_that_stopped_on_the_room_only_with_the_tests_that_made_it(tmp_path, quick_tests):
    plan, runs = twice_as_fast_compare(tmp_path, quick_tests)
    whole = EarlierCompare(1, ["compare"], runs)
    again = compare_plan(plan.sides, quick_tests, plan.settings, max_runs=15, floors={})
    assert {r.uid for r in ended_runs(whole, again)} == {r.uid for r in runs}       # every test ended
    # without the first four tests' runs (as if that session had not reached them), the last two
    # stopped at 5 + 5 on a room those four made: not ended, so measured again whole
    late = EarlierCompare(1, ["compare"], [r for r in runs if r.test in {t.name for t in quick_tests[4:]}])
    again = compare_plan(plan.sides, quick_tests, plan.settings, max_runs=15, floors={})
    assert ended_runs(late, again) == []
