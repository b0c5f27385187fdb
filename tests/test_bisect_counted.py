"""Counted bisections (`redline bisect --measure instructions`): the search of redline/bisect/search.py
with redline.bisect.measure.CountedComparer over simulated counts (redline.bisect.simulation: pure
logic, no build, no valgrind): every build has a fixed offset of up to ±0.9% (two builds' counts
up to 1.8% apart, more than the 1.6% layout effect measured) and every run ±0.1%. The real thing
is in tests/test_bisect.py."""

from __future__ import annotations

import math
import random

import pytest

from redline.bisect.search import (GOOD, SKIPPED, UNDECIDABLE, Change, Commit, bisect, least_followed_change_pct,
                            one_run_decides)
from redline.bisect.measure import CountedComparer
from redline.bisect.simulation import SimulatedCounter, commit_line
from redline.analysis.counted import one_run_step, step_tolerance_pct
from redline.output.bisect_report import report_lines
from redline.analysis.stats import Verdict

def counted_bisect(n: int, *, metric: str = "instructions_per_op", profile: bool = False, per_round: int = 1,
                   each_step: bool = False, **fake):
    good, path = commit_line(n)
    counter = SimulatedCounter(good, path, **fake)
    comparer = CountedComparer(counter, metric=metric, endpoint_runs=3)
    return bisect(comparer, good, path, ["get"], profile=profile, per_round=per_round, each_step=each_step), counter, path


@pytest.mark.parametrize("seed", range(40))
def test_one_run_per_commit_finds_the_culprit_despite_build_offsets(seed):
    rng = random.Random(1000 + seed)
    n = rng.randint(2, 40)
    culprit = rng.randrange(n)
    outcome, counter, path = counted_bisect(n, culprit=culprit, step=1.6, seed=seed)
    assert outcome.culprit == path[culprit], [(s.candidate.subject, s.outcome, s.note) for s in outcome.steps]
    # the endpoints: one interleaved A/B of 3 runs per side; then every step counts one commit once
    (ends, runs, profiled), *steps = counter.calls
    assert ends == ["g" * 40, path[-1].sha] and runs == 3 and not profiled
    assert all(len(commits) == 1 and runs == 1 and not profiled for commits, runs, profiled in steps)
    counted = [commits[0] for commits, _, _ in steps]
    assert len(counted) == len(set(counted)) == len(outcome.steps)
    assert all(s.outcome in ("good", "bad") for s in outcome.steps)
    # the remainder check reuses the counts already taken: no run after the last step
    assert outcome.remainder is not None and outcome.remainder.explained["get"] == pytest.approx(1.0, abs=0.1)
    assert not outcome.remainder.large


def test_profiled_remainder_counts_both_commits_once_more_with_a_call_graph():
    outcome, counter, path = counted_bisect(15, culprit=9, step=1.6, profile=True)
    assert outcome.culprit == path[9]
    commits, runs, profiled = counter.calls[-1]
    assert commits == [path[8].sha, path[9].sha] and runs == 1 and profiled
    change = outcome.remainder.changes["get"]
    assert change.moved_symbols == [{"symbol": "getGenericCommand"}] and change.diff_flamegraph == "get.diff.svg"


def test_a_change_too_small_for_one_run_steps_is_not_followed():
    """+6% on the whole process: a verdict (τ 4%), but one run's ratio may sit 2% off, so commits
    cannot be told from both ends one run each: no step is taken and the report says what would do."""
    outcome, counter, path = counted_bisect(15, culprit=9, step=1.06)
    assert outcome.endpoints.changes["get"].verdict == Verdict.REGRESSION
    assert outcome.endpoints.moved == {} and "get" in outcome.endpoints.too_close
    assert "8.2% apart" in outcome.endpoints.too_close["get"]
    assert not outcome.steps and outcome.culprit is None and not outcome.no_change
    assert len(counter.calls) == 1
    document = {**outcome.as_json(), "metric": "instructions_per_op", "measure": "instructions"}
    lines = report_lines(document)
    assert "too little to bisect one counted run per commit" in lines[0]
    assert any("--metric instructions_per_op_command" in line and "--measure time" in line for line in lines)


def test_inside_call_the_same_change_is_followed():
    """instructions_per_op_command's τ is 1% (u 0.5%): +6% is far enough. The fake's offsets are
    those of the whole process; inside call() they are smaller, here 0.2%."""
    outcome, counter, path = counted_bisect(15, metric="instructions_per_op_command", culprit=9, step=1.06,
                                            build_offset=0.002)
    assert outcome.culprit == path[9]
    assert outcome.endpoints.changes["get"].step_tolerance_pct == pytest.approx(0.5)


def test_a_commit_with_part_of_the_change_is_skipped_after_its_one_run():
    """Commits 5..8 count half the step: one run puts them on the half-way point, more runs would
    not move them off it, so each is skipped undecided after one run; the culprit is not named
    alone, but with those that could not be decided (as git bisect with skips)."""
    outcome, counter, path = counted_bisect(15, culprit=9, step=1.6, partial_from=5)
    undecided = [s for s in outcome.steps if s.outcome == UNDECIDABLE]
    assert undecided and all(5 <= int(s.candidate.subject.split()[1]) <= 8 for s in undecided)
    assert all("undecided" in s.note for s in undecided)
    assert all(runs == 1 for _, runs, _ in counter.calls[1:])
    assert outcome.culprit is None and path[9] in outcome.candidates


def test_a_commit_whose_run_fails_is_skipped_with_the_reason():
    outcome, counter, path = counted_bisect(15, culprit=9, step=1.6, failing={6})
    failed = [s for s in outcome.steps if s.candidate == path[6]]
    assert failed and failed[0].outcome == UNDECIDABLE
    assert "signal 11" in failed[0].changes["get"].note
    assert outcome.culprit == path[9] or path[9] in outcome.candidates


def test_one_run_rule():
    # u = τ/2; the interval of one run against three is widened by u on both ends
    assert step_tolerance_pct(4.0) == 2.0
    result = one_run_step([100.0, 100.1, 99.9], [150.0], tau_pct=4.0)
    assert result.delta_pct == pytest.approx(50.0)
    assert result.ci_low_pct == pytest.approx((150 / 100.1 / 1.02 - 1) * 100)
    assert result.ci_high_pct == pytest.approx((150 / 99.9 * 1.02 - 1) * 100)
    assert result.verdict == Verdict.REGRESSION and result.n_comparison == 1
    # ratio r is followed when √r lies (1 + u)² from each end
    assert least_followed_change_pct(2.0) == pytest.approx(8.243, abs=0.001)
    assert one_run_decides(1.0825, 2.0) and not one_run_decides(1.082, 2.0)
    assert one_run_decides(1 / 1.0825, 2.0) and not one_run_decides(1 / 1.08, 2.0)


def test_step_changes_carry_the_tolerance_and_the_run_ids():
    outcome, counter, path = counted_bisect(7, culprit=3, step=2.0)
    change: Change = outcome.steps[0].changes["get"]
    assert change.step_tolerance_pct == pytest.approx(2.0) and change.runs == 1
    assert len(change.run_ids) == 3 + 1        # the decided end's three runs and the candidate's one
    assert outcome.steps[0].reference_state in (GOOD, "bad")
    assert SKIPPED not in {s.outcome for s in outcome.steps}


# -- changes made by several commits (#34), rounds of k commits ---------------------------------------
# 7.0.5..7.0.7 (44 commits) as the issue counted it: cffabb641 (18) -31.7%, 3d206f0fc (20) a further
# -34.2%, 5e02338e5 (27) the rest of -67.6%.
BYBOX = {18: 0.683, 20: 0.658, 27: 0.324 / (0.683 * 0.658)}


def test_bybox_counted_names_the_middle_step_and_where_the_rest_lies():
    """The issue's bisection named fba49b107 (21) with 0% of the change: it set 3d206f0fc's ratio
    against 81e72e8e2 (0.658) against the half-way point of the whole change (0.569). Counted
    against GOOD's own counts, 3d206f0fc sits at 71% of the change."""
    outcome, counter, path = counted_bisect(44, changes=BYBOX)
    assert outcome.culprit == path[20]
    remainder = outcome.remainder
    assert remainder.before == path[19] and remainder.resolved and remainder.large
    assert remainder.explained["get"] == pytest.approx(0.372, abs=0.03)
    assert remainder.place_before["get"] == pytest.approx(0.338, abs=0.03)
    assert 1 - remainder.place_after["get"] == pytest.approx(0.290, abs=0.03)
    # each step: one run of the commit, against the endpoints' three; the own change costs nothing
    (_, runs, _), *steps = counter.calls
    assert runs == 3 and all(len(commits) == 1 and runs == 1 for commits, runs, _ in steps)
    assert len(steps) == len(outcome.steps) and counter.runs == 6 + len(outcome.steps)
    text = "\n".join(report_lines({**outcome.as_json(), "metric": "instructions_per_op", "measure": "instructions",
                                   "repository": "/r", "selection": [], "variant": "default"}))
    assert "the change splits over several commits (get)" in text and "--measure instructions" in text


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("k", [1, 3])
def test_two_and_three_steps_of_unequal_size_never_name_a_commit_without_a_change(seed, k):
    """Two or three steps of 1.2x, 1.8x and 1.4x (either direction) anywhere on 10-60 commits, builds
    up to 1.8% apart: the named commit is the step across the middle, or, when a commit lies
    within the tolerance of the half-way point, none is named and that step is among the
    candidates."""
    rng = random.Random(5000 + seed)
    n = rng.randint(10, 60)
    factors = rng.sample([1.2, 1.8, 1.4], rng.choice([2, 3]))
    if rng.random() < 0.5:
        factors = [1 / f for f in factors]
    changes = dict(zip(sorted(rng.sample(range(n), len(factors))), factors))
    outcome, counter, path = counted_bisect(n, changes=changes, seed=seed, per_round=k)
    total, reached = math.log(math.prod(factors)), 0.0
    across = next(at for at in sorted(changes) if (reached := reached + math.log(changes[at])) / total > 0.5)
    if outcome.culprit is not None:
        assert outcome.culprit == path[across] and outcome.remainder.resolved, changes
    else:
        assert path[across] in outcome.candidates, changes
    assert all(len(commits) <= k for commits, _, _ in counter.calls[1:])


@pytest.mark.parametrize("k", [1, 2, 3])
def test_each_step_counted_finds_the_three_bybox_commits(k):
    outcome, counter, path = counted_bisect(44, changes=BYBOX, per_round=k, each_step=True)
    assert [r.commit for r in outcome.found] == [path[18], path[20], path[27]]
    assert outcome.culprit == path[20]
    assert counter.runs == 6 + sum(1 for s in outcome.steps if s.outcome != SKIPPED)


def test_a_round_counts_its_commits_in_one_call_apart():
    """k = 3: after the endpoints, every call to the counter carries up to three commits, one run
    each, counted apart (nothing ties them: a scheduler may run them side by side)."""
    good, path = commit_line(44)
    counter = SimulatedCounter(good, path, culprit=30, step=1.6, broken={10})
    calls = []
    original = counter.count
    counter.count = lambda commits, tests, **kw: calls.append(kw) or original(commits, tests, **kw)
    outcome = bisect(CountedComparer(counter, metric="instructions_per_op", endpoint_runs=3), good, path, ["get"],
                     per_round=3)
    assert outcome.culprit == path[30] and outcome.rounds == 3
    assert [len(c) for c, _, _ in counter.calls[1:]] == [3, 3, 2]        # 43 → 10 → 2 → 0 left
    assert calls[0] == {"runs": 3} and all(kw == {"runs": 1, "apart": True} for kw in calls[1:])
    broken = outcome.steps[0]
    assert broken.candidate == path[10] and broken.outcome == SKIPPED and "#error" in broken.note

