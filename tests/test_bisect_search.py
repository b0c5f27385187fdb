"""redline/bisect/search.py's decision logic with an in-process fake comparer (pure logic: no build, no
server). The real thing, with builds and runs, is tests/test_bisect.py."""

from __future__ import annotations

import math
import subprocess

import pytest

from redline.bisect.planner import Mark, RoundPlanner, place_of
from redline.bisect.search import (BAD, GOOD, SKIPPED, UNDECIDABLE, Change, Commit, OneAtATime, Unbuildable,
                                   ancestry_path, bisect, estimated_steps, from_change_point, judge, mark_of)
from redline.core.errors import UsageError
from redline.analysis.stats import Verdict


class FakeComparer(OneAtATime):
    """Commit i's metric is 1.0 before the culprit and `step` from it on (commits from `partial_from`
    on get 30% of it, in log terms); or, with `changes` (index → factor), the product of the factors
    at or before it. Every measurement is that ratio ±`noise` (1.5%). Commits in `broken` do not
    build; in `noisy`, every interval spans 0.3x..3x whatever the runs."""

    def __init__(self, path: list[Commit], good: Commit, *, culprit: int | None = None, step: float = 3.0,
                 broken=(), noisy=(), second_test_culprit: int | None = None, partial_from: int | None = None,
                 changes: dict[int, float] | None = None, noise: float = 0.015):
        self.index = {c.sha: i for i, c in enumerate(path)}
        self.index[good.sha] = -1
        self.culprit, self.step, self.broken, self.noisy = culprit, step, set(broken), set(noisy)
        self.second_test_culprit = second_test_culprit
        self.partial_from, self.changes, self.noise = partial_from, changes, noise
        self.calls: list[tuple[str, str]] = []
        self.profiled: list[tuple[str, str]] = []
        self.rounds: list[list[str]] = []          # the candidates of each measure() call

    def value(self, test: str, i: int) -> float:
        if self.changes is not None:
            return math.prod(factor for at, factor in self.changes.items() if i >= at)
        culprit = self.second_test_culprit if test == "b" and self.second_test_culprit is not None else self.culprit
        if self.partial_from is not None and self.partial_from <= i < (culprit or 0):
            return self.step ** 0.3               # a first part: 30% of the change (log scale)
        return self.step if culprit is not None and i >= culprit else 1.0

    def measure(self, asks, tests):
        self.rounds.append([ask.candidate.sha for ask in asks])
        return super().measure(asks, tests)

    def compare(self, reference, candidate, tests, settled, *, profile=False):
        self.profiled += [(reference.sha, candidate.sha)] if profile else []
        for commit in (reference, candidate):
            if self.index[commit.sha] in self.broken:
                raise Unbuildable(commit, ["src/adlist.c:1:2: error: #error this commit does not build"])
        self.calls.append((reference.sha, candidate.sha))
        out = {}
        for test in tests:
            ratio = self.value(test, self.index[candidate.sha]) / self.value(test, self.index[reference.sha])
            low, high = (0.3, 3.0) if self.index[candidate.sha] in self.noisy else \
                (ratio * (1 - self.noise), ratio * (1 + self.noise))
            verdict = (Verdict.REGRESSION if low > 1.02 else Verdict.IMPROVEMENT if high < 0.98
                       else Verdict.NO_CHANGE if low > 0.98 and high < 1.02 else Verdict.INCONCLUSIVE)
            out[test] = Change(test, verdict, (ratio - 1) * 100, (low - 1) * 100, (high - 1) * 100, runs=5,
                               min_detectable_pct=4.0)
        settled(out)        # the real comparer asks after each block of runs
        return out


def line(n: int) -> tuple[Commit, list[Commit]]:
    good = Commit("g" * 40, "good")
    return good, [Commit(f"{i:02x}" * 20, f"commit {i}") for i in range(n)]


@pytest.mark.parametrize("n, culprit", [(15, 10), (15, 0), (15, 14), (2, 1), (1, 0), (40, 23)])
def test_culprit_found(n, culprit):
    good, path = line(n)
    comparer = FakeComparer(path, good, culprit=culprit)
    outcome = bisect(comparer, good, path, ["a"])
    assert outcome.culprit == path[culprit]
    assert outcome.endpoints.moved == pytest.approx({"a": 3.0})
    measured = [s for s in outcome.steps]
    assert len(measured) <= estimated_steps(n - 1)
    assert outcome.remainder is not None and outcome.remainder.explained["a"] == pytest.approx(1.0)
    assert not outcome.remainder.large


def test_improvement_is_bisected_too():
    good, path = line(15)
    outcome = bisect(FakeComparer(path, good, culprit=4, step=0.5), good, path, ["a"])
    assert outcome.culprit == path[4]
    assert outcome.endpoints.changes["a"].verdict == Verdict.IMPROVEMENT


def test_steps_measure_against_the_nearer_decided_end():
    good, path = line(15)
    outcome = bisect(FakeComparer(path, good, culprit=10), good, path, ["a"])
    for step in outcome.steps:
        lo_distance = path.index(step.candidate) - (path.index(step.reference) if step.reference in path else -1)
        if step.reference_state == GOOD:
            assert step.reference.sha == "g" * 40 or step.reference in path
        assert step.outcome in (GOOD, BAD)
    first = outcome.steps[0]
    assert first.candidate == path[6] and first.reference_state == GOOD and first.remaining_before == 14
    assert lo_distance >= 1


def test_unbuildable_commit_is_skipped_and_culprit_still_found():
    good, path = line(15)
    comparer = FakeComparer(path, good, culprit=10, broken={6})
    outcome = bisect(comparer, good, path, ["a"])
    assert outcome.culprit == path[10]
    skipped = [s for s in outcome.steps if s.outcome == SKIPPED]
    assert [s.candidate for s in skipped] == [path[6]]
    assert "does not build" in skipped[0].note and "#error" in skipped[0].note
    assert outcome.steps[1].candidate in (path[5], path[7])      # the nearest to the middle next


def test_undecidable_commit_is_skipped_like_git_bisect_skip():
    good, path = line(15)
    outcome = bisect(FakeComparer(path, good, culprit=10, noisy={6}), good, path, ["a"])
    assert outcome.culprit == path[10]
    assert [s.outcome for s in outcome.steps if s.candidate == path[6]] == [UNDECIDABLE]
    assert "undecided on a" in outcome.steps[0].note


def test_skips_next_to_the_culprit_leave_a_list_of_candidates():
    good, path = line(15)
    outcome = bisect(FakeComparer(path, good, culprit=10, broken={9}), good, path, ["a"])
    assert outcome.culprit is None
    assert outcome.candidates == [path[9], path[10]]
    assert outcome.remainder is None


def test_no_change_at_the_endpoints_stops_after_one_compare():
    good, path = line(15)
    comparer = FakeComparer(path, good, culprit=None)
    outcome = bisect(comparer, good, path, ["a", "b"])
    assert outcome.no_change and outcome.steps == [] and outcome.culprit is None
    assert comparer.calls == [(good.sha, path[-1].sha)]
    assert outcome.endpoints.changes["a"].verdict == Verdict.NO_CHANGE


def test_only_the_moved_tests_are_followed():
    good, path = line(15)
    comparer = FakeComparer(path, good, culprit=10)
    comparer.value = lambda test, i: (3.0 if i >= 10 else 1.0) if test == "a" else 1.0
    outcome = bisect(comparer, good, path, ["a", "b"])
    assert set(outcome.endpoints.moved) == {"a"}
    assert outcome.endpoints.changes["b"].verdict == Verdict.NO_CHANGE
    assert all(set(s.changes) == {"a"} for s in outcome.steps)
    assert outcome.culprit == path[10]


def test_tests_that_moved_at_different_commits_are_led_by_the_one_that_moved_most():
    """a moved 1.5x at commit 10, b 3x at commit 3 (the accuracy corpus' EVAL/EVALSHA range: three
    culprits that moved two tests by different amounts at different commits). Where they disagree,
    b decides: the search follows it to its culprit instead of passing every such commit over."""
    good, path = line(15)
    comparer = FakeComparer(path, good)
    comparer.value = lambda test, i: (1.5 if i >= 10 else 1.0) if test == "a" else (3.0 if i >= 3 else 1.0)
    outcome = bisect(comparer, good, path, ["a", "b"])
    assert list(outcome.endpoints.moved) == ["b", "a"]                     # the leader first
    split = [s for s in outcome.steps if s.note and "the tests disagree" in s.note]
    assert split and all(s.outcome in (GOOD, BAD) and "b, which moved most, decides" in s.note for s in split)
    assert not [s for s in outcome.steps if s.outcome == UNDECIDABLE]
    assert outcome.culprit == path[3]
    both = bisect(comparer, good, path, ["a", "b"], each_step=True)       # and every step, with each_step
    assert {r.commit for r in both.found if r.resolved} == {path[3], path[10]}


def test_a_split_change_leaves_a_remainder():
    """30% of the change (in log terms) comes at commit 4, the rest at commit 10: the culprit
    named explains only 70% of it, and the report says so."""
    good, path = line(15)
    outcome = bisect(FakeComparer(path, good, culprit=10, partial_from=4), good, path, ["a"])
    assert outcome.culprit == path[10]
    assert outcome.remainder.large
    assert outcome.remainder.explained["a"] == pytest.approx(0.7, abs=0.02)


def test_remainder_reuses_the_step_that_measured_it():
    """The first commit is the culprit: its step measured it against GOOD, the commit before it."""
    good, path = line(3)
    comparer = FakeComparer(path, good, culprit=0)
    outcome = bisect(comparer, good, path, ["a"])
    assert outcome.culprit == path[0] and outcome.remainder.before == good
    assert len(comparer.calls) == 1 + len(outcome.steps)


def test_the_own_change_is_measured_against_the_commit_before():
    """Every step is measured against an end; the culprit's own change is one more compare."""
    good, path = line(3)
    comparer = FakeComparer(path, good, culprit=1)
    outcome = bisect(comparer, good, path, ["a"])
    assert outcome.culprit == path[1] and outcome.remainder.before == path[0]
    assert comparer.calls[-1] == (path[0].sha, path[1].sha) and len(comparer.calls) == 2 + len(outcome.steps)
    assert all(step.reference in (good, path[-1]) for step in outcome.steps)


def test_a_profiled_remainder_is_measured_again_with_profiles():
    good, path = line(3)
    comparer = FakeComparer(path, good, culprit=1)
    outcome = bisect(comparer, good, path, ["a"], profile=True)
    assert comparer.profiled == [(path[0].sha, path[1].sha)]
    assert comparer.calls[-1] == (path[0].sha, path[1].sha) and len(comparer.calls) == 2 + len(outcome.steps)


def _whole(tests=("a",)):
    """The search of the whole range, nothing measured yet."""
    return RoundPlanner(15, list(tests)).searches({})[0]


@pytest.mark.parametrize("low, high, step, against_bad, expected", [
    (190, 210, 3.0, False, BAD), (-3, 3, 3.0, False, GOOD), (20, 150, 3.0, False, None),
    (-70, -60, 3.0, True, GOOD), (-2, 2, 3.0, True, BAD), (-60, -30, 3.0, True, None),
    (-70, -60, 1 / 3, False, BAD), (-2, 2, 1 / 3, False, GOOD), (-60, -30, 1 / 3, False, None),
])
def test_side_of_the_half_way_point(low, high, step, against_bad, expected):
    """The half-way point of a 3x step is √3 = +73% from GOOD, -42% from BAD."""
    mark = mark_of({"a": Change("a", "x", (low + high) / 2, low, high)}, {"a": step}, against_bad)
    assert judge(_whole(), mark)[0] == expected


def test_places_are_comparable_whichever_end_measured_them():
    """A commit 55% below GOOD on a 0.324x change (BYBOX, 7.0.5 -> 7.0.7): -55% against GOOD, +39%
    against BAD; both put it at the same place, 71% of the change in log terms, past the half-way point."""
    step = 0.324
    from_good = mark_of({"a": Change("a", "x", -55.0, -56.0, -54.0)}, {"a": step}, against_bad=False)
    from_bad = mark_of({"a": Change("a", "x", 0.45 / step * 100 - 100, 37.0, 41.0)}, {"a": step}, against_bad=True)
    assert from_good.places["a"].share == pytest.approx(from_bad.places["a"].share, abs=1e-9)
    assert from_good.places["a"].share == pytest.approx(0.709, abs=0.001)
    assert judge(_whole(), from_good) == judge(_whole(), from_bad) == (BAD, None)
    assert place_of((1.0, 0.99, 1.01), 1.0, False) is None and place_of(None, 3.0, False) is None


def test_decide_against_the_bad_end_and_without_an_interval():
    # the candidate is as slow as BAD (3x): like the bad end
    assert judge(_whole(), mark_of({"a": Change("a", "no change", 0, -2, 2)}, {"a": 3.0}, True)) == (BAD, None)
    assert judge(_whole(), mark_of({"a": Change("a", "improvement", -66, -68, -64)}, {"a": 3.0}, True)) == (GOOD, None)
    unmeasured = mark_of({"a": Change("a", "inconclusive", None, None, None, note="too few runs")}, {"a": 3.0}, False)
    state, why = judge(_whole(), unmeasured)
    assert state is None and "undecided on a" in why and unmeasured.why == "no interval on a"


def test_tests_that_disagree_are_said_to_and_the_leader_decides():
    mark = mark_of({"a": Change("a", "x", 200, 190, 210), "b": Change("b", "x", 0, -2, 2)}, {"a": 3.0, "b": 3.0}, False)
    state, why = judge(_whole(("a", "b")), mark)
    assert state == BAD and "the tests disagree (a: bad; b: good); a, which moved most, decides" in why
    state, why = judge(_whole(("b", "a")), mark)
    assert state == GOOD and "b, which moved most, decides" in why
    leader_undecided = mark_of({"a": Change("a", "x", 70, 60, 80), "b": Change("b", "x", 0, -2, 2)},
                               {"a": 3.0, "b": 3.0}, False)
    state, why = judge(_whole(("a", "b")), leader_undecided)
    assert state is None and "undecided on a (a: undecided; b: good)" in why


def test_range_and_estimates():
    planner = RoundPlanner(15, ["a"])
    assert [i for i, _ in planner.plan({}).round] == [6]
    assert planner.plan({6: Mark(why="does not build")}).round[0][0] == 5
    assert [estimated_steps(n) for n in (0, 1, 2, 3, 7, 14, 15)] == [0, 1, 2, 2, 3, 4, 4]
    assert [estimated_steps(43, k) for k in (1, 2, 3)] == [6, 4, 3]


def _repo(tmp_path):
    repo = tmp_path / "r"
    env = ["-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]
    subprocess.run(["git", *env, "init", "-q", str(repo)], check=True)
    shas = []
    for i in range(4):
        (repo / "f").write_text(str(i))
        subprocess.run(["git", *env, "-C", str(repo), "add", "f"], check=True)
        subprocess.run(["git", *env, "-C", str(repo), "commit", "-q", "-m", f"c{i}"], check=True)
        shas.append(subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                                   check=True).stdout.strip())
    return repo, shas


def test_ancestry_path_from_git(tmp_path):
    repo, shas = _repo(tmp_path)
    good, path = ancestry_path(repo, shas[0], "HEAD")
    assert good.sha == shas[0] and [c.sha for c in path] == shas[1:]
    assert [c.subject for c in path] == ["c1", "c2", "c3"] and path[0].date
    with pytest.raises(UsageError, match="is not an ancestor of --bad"):
        ancestry_path(repo, shas[3], shas[1])
    with pytest.raises(UsageError, match="does not name a commit"):
        ancestry_path(repo, "nope", "HEAD")
    with pytest.raises(UsageError, match="are the same commit"):
        ancestry_path(repo, "HEAD", shas[3])
    with pytest.raises(UsageError, match="bad git ref"):
        ancestry_path(repo, "--output=x", "HEAD")


def _history(*change_points, test="t1"):
    """The part of `redline history --json` output the hand-off reads."""
    return {"metric": "server_cpu_us_per_op", "series": [
        {"test": test, "change_points": list(change_points)},
        {"test": "other", "change_points": [{"session": 9, "build_before": None, "build_after": None}]}]}


def _cp(session, before, after):
    identity = lambda sha: {"version": "7.0.15", "commit": {"sha": sha, "subject": "s", "date": "d"}} if sha else {}
    return {"session": session, "delta_pct": 80.0, "build_before": identity(before), "build_after": identity(after)}


def test_hand_off_from_a_history_change_point():
    hand_off = from_change_point(_history(_cp(4, "a" * 40, "b" * 40)), session=None, tests={"t1"}, source="h.json")
    assert (hand_off.good, hand_off.bad, hand_off.metric, hand_off.session) == ("a" * 40, "b" * 40,
                                                                                  "server_cpu_us_per_op", 4)
    two = _history(_cp(4, "a" * 40, "b" * 40), _cp(7, "b" * 40, "c" * 40))
    with pytest.raises(UsageError, match=r"2 change points \(t1 session 4, t1 session 7\); choose one with h.json#SESSION"):
        from_change_point(two, session=None, tests={"t1"}, source="h.json")
    assert from_change_point(two, session=7, tests={"t1"}, source="h.json").good == "b" * 40
    with pytest.raises(UsageError, match="no change point at session 5"):
        from_change_point(two, session=5, tests={"t1"}, source="h.json")
    with pytest.raises(UsageError, match="same commit aaaaaaaaaaaa on both sides"):
        from_change_point(_history(_cp(4, "a" * 40, "a" * 40)), session=None, tests={"t1"}, source="h.json")
    with pytest.raises(UsageError, match="not measured on git: builds"):
        from_change_point(_history(_cp(4, None, "a" * 40)), session=None, tests={"t1"}, source="h.json")


def _report(outcome) -> str:
    from redline.output.bisect_report import report_lines, report_markdown
    doc = {"repository": "/r", "metric": "server_cpu_us_per_op", "variant": "libc-malloc", "tests": ["a"],
           "selection": ["--name", "a"], "session": 1, **outcome.as_json()}
    return "\n".join(report_lines(doc)) + "\n" + report_markdown(doc)


def test_failed_endpoint_runs_are_not_called_no_change():
    good, path = line(5)

    class Failing(FakeComparer):
        def compare(self, reference, candidate, tests, settled, *, profile=False):
            return {t: Change(t, Verdict.INCONCLUSIVE, None, None, None, note="5 runs failed: the server exited")
                    for t in tests}

    outcome = bisect(Failing(path, good, culprit=None), good, path, ["a"])
    assert outcome.no_change and outcome.steps == []
    text = _report(outcome)
    assert "cannot tell whether server_cpu_us_per_op moved" in text and "no change to bisect" not in text
    assert "5 runs failed: the server exited" in text


def test_report_of_a_split_change_offers_the_next_bisections():
    good, path = line(15)
    outcome = bisect(FakeComparer(path, good, culprit=10, partial_from=4), good, path, ["a"])
    text = _report(outcome)
    assert f"culprit: {path[10].sha[:12]} commit 10" in text
    assert (f"the change splits over several commits (a): {path[10].sha[:12]} made 70% of it (the largest single "
            f"step in the range); the rest lies 30% before it, between good {good.sha[:12]} and {path[9].sha[:12]}"
            in text)
    assert f"redline bisect --good {good.sha[:12]} --bad {path[9].sha[:12]} git:/r --name a" in text
    assert f"--good {path[10].sha[:12]}" not in text          # nothing after it: no bisection offered there


def test_first_parent_path_and_all_parents_through_a_merge(tmp_path):
    repo, shas = _repo(tmp_path)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo)]
    subprocess.run([*git, "checkout", "-q", "-b", "side", shas[1]], check=True)
    (repo / "g").write_text("side")
    subprocess.run([*git, "add", "g"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "on the side"], check=True)
    subprocess.run([*git, "checkout", "-q", "main"], check=True)
    subprocess.run([*git, "merge", "-q", "--no-ff", "-m", "merge side", "side"], check=True)
    _, first_parent = ancestry_path(repo, shas[1], "main")
    assert [c.subject for c in first_parent] == ["c2", "c3", "merge side"]
    _, every = ancestry_path(repo, shas[1], "main", all_parents=True)
    assert {c.subject for c in every} == {"c2", "c3", "on the side", "merge side"}
    assert every[-1].subject == "merge side"
    # from the side branch, the first-parent line reaches main through the merge alone
    assert [c.subject for c in ancestry_path(repo, "side", "main")[1]] == ["merge side"]


def test_a_timed_change_carries_the_verdict_after_false_discovery_control():
    """The endpoint check follows what survived the session's false-discovery control, not a
    test's verdict taken alone (a held-back 'regression' is inconclusive to the search)."""
    from redline.bisect.measure import timed_change
    from redline.analysis.comparison import TestComparison
    from redline.analysis.stats import compare_metric
    result = compare_metric([100.0, 101, 99, 100.5, 99.5], [104.0, 105, 103, 104.5, 103.5], paired=False,
                            higher_is_better=False)
    assert result.verdict == Verdict.REGRESSION
    held_back = TestComparison("t", "server_cpu_us_per_op", result, survives_fdr=False)
    survived = TestComparison("t", "server_cpu_us_per_op", result, survives_fdr=True)
    assert timed_change(held_back, []).verdict == Verdict.INCONCLUSIVE
    assert timed_change(survived, []).verdict == Verdict.REGRESSION


# -- changes made by several commits (#34) ---------------------------------------------------------
# 7.0.5..7.0.7 on the first-parent line: 44 commits; the issue measured cffabb641 (18) at -31.7% of
# GOOD, 3d206f0fc (20) at a further -34.2%, and BAD at -67.6%, which leaves -27.9% to 5e02338e5 (27).
BYBOX = {18: 0.683, 20: 0.658, 27: 0.324 / (0.683 * 0.658)}


def crossing(changes: dict[int, float]) -> int:
    """The commit at which the value passes half of the whole change (log terms)."""
    total, reached = sum(math.log(f) for f in changes.values()), 0.0
    for at in sorted(changes):
        reached += math.log(changes[at])
        if reached / total > 0.5:
            return at
    raise AssertionError("no crossing")


def test_bybox_as_reported_names_the_commit_across_the_middle_with_its_share():
    """Before the fix, step 6 measured 3d206f0fc against the then-good 81e72e8e2 (itself at
    -31.7%): a ratio of 0.658, set against the half-way point of the whole change from GOOD,
    √0.324 = 0.569: 0.658 > 0.569, "good". Its value is 0.683 × 0.658 = 0.449 of GOOD's, past the
    middle (0.449 < 0.569): in log terms 71% of the change. The search went on to fba49b107 (21),
    whose own change is 0%. Every commit is now placed on the change measured from GOOD or BAD."""
    good, path = line(44)
    outcome = bisect(FakeComparer(path, good, changes=BYBOX), good, path, ["a"])
    assert outcome.culprit == path[20] and outcome.culprit != path[21]
    remainder = outcome.remainder
    assert remainder.before == path[19] and remainder.resolved and remainder.large
    assert remainder.explained["a"] == pytest.approx(math.log(0.658) / math.log(0.324), abs=0.01)   # 37%
    assert remainder.place_before["a"] == pytest.approx(math.log(0.683) / math.log(0.324), abs=0.01)  # 34%
    assert remainder.place_after["a"] == pytest.approx(0.709, abs=0.01)
    step = next(s for s in outcome.steps if s.candidate == path[20])
    assert step.outcome == BAD and step.reference in (good, path[-1]) and step.places["a"].share > 0.5
    text = _report(outcome)
    assert "the change splits over several commits (a): " in text and "made 37% of it" in text
    assert "34% before it" in text and "29% after it" in text and "the largest single step in the range" in text
    assert f"--good {good.sha[:12]} --bad {path[19].sha[:12]}" in text
    assert f"--good {path[20].sha[:12]} --bad {path[43].sha[:12]}" in text


LAYOUTS = [  # (path length, {commit: factor}): two and three steps of unequal size, rises and falls
    (44, {5: 1.2, 30: 1.8}), (44, {12: 1.8, 40: 1.2}), (30, {3: 1.8, 25: 1.4}), (30, {2: 1.4, 27: 1.8}),
    (44, {4: 1 / 1.2, 21: 1 / 1.8, 38: 1 / 1.4}), (44, {30: 1.2, 33: 1.8, 41: 1.4}),
    (20, {1: 1.4, 2: 1.2, 17: 1.8}), (44, {7: 1.8, 9: 1.4, 11: 1.2}), (60, {50: 1 / 1.4, 52: 1 / 1.2, 58: 1 / 1.8}),
]


def _share_of(changes: dict[int, float], at: int) -> float:
    return math.log(changes[at]) / math.log(math.prod(changes.values()))


@pytest.mark.parametrize("n, changes", LAYOUTS)
@pytest.mark.parametrize("k", [1, 3])
def test_several_steps_of_unequal_size_name_the_one_across_the_middle(n, changes, k):
    """Each commit is measured against GOOD or BAD, whichever bound of what is left is nearer
    (with k = 1 the middle is never nearer the bad bound, so only skips and rounds of k > 1 use
    BAD). The named commit is the step across the middle, with its share, and the report says
    where the rest lies."""
    good, path = line(n)
    outcome = bisect(FakeComparer(path, good, changes=changes), good, path, ["a"], per_round=k)
    assert outcome.culprit == path[crossing(changes)], [(s.candidate.subject, s.outcome) for s in outcome.steps]
    share = _share_of(changes, crossing(changes))
    assert outcome.remainder.resolved and outcome.remainder.explained["a"] == pytest.approx(share, abs=0.03)
    assert outcome.remainder.large and "the change splits over several commits" in _report(outcome)   # all < 80%


@pytest.mark.parametrize("n, changes", LAYOUTS)
@pytest.mark.parametrize("k", [1, 3])
def test_noisier_steps_name_the_one_across_the_middle_or_no_commit(n, changes, k):
    """±5% on every measurement: a commit whose place lies within the noise of the half-way
    point cannot be decided and is passed over; the search then lists the candidates. It never
    names another commit."""
    good, path = line(n)
    outcome = bisect(FakeComparer(path, good, changes=changes, noise=0.05), good, path, ["a"], per_round=k)
    right = path[crossing(changes)]
    assert outcome.culprit == right or (outcome.culprit is None and right in outcome.candidates)


def test_the_layouts_measure_against_both_ends():
    ends = set()
    for n, changes in LAYOUTS:
        good, path = line(n)
        outcome = bisect(FakeComparer(path, good, changes=changes), good, path, ["a"], per_round=3)
        ends |= {s.reference_state for s in outcome.steps}
    assert ends == {GOOD, BAD}


def test_a_commit_whose_own_change_is_none_is_never_named():
    """A step misplaced by its measurement against an end (here: commit 21 reads as if it had the
    change of 20 twice over) ends the search at it; against the commit before it, it measured
    no change, so it is not named, and the report says why."""
    good, path = line(44)

    class Misleading(FakeComparer):
        def compare(self, reference, candidate, tests, settled, *, profile=False):
            if candidate == path[21] and reference == good:       # reads like BAD against GOOD
                return super().compare(reference, path[-1], tests, settled, profile=profile)
            return super().compare(reference, candidate, tests, settled, profile=profile)

    changes = {20: 0.9, 30: 0.3}       # 20 is well before the middle; 21 changes nothing
    outcome = bisect(Misleading(path, good, changes=changes), good, path, ["a"])
    assert outcome.culprit is None and outcome.remainder.commit == path[21] and not outcome.remainder.resolved
    assert "cannot be told from none" in outcome.unresolved
    text = _report(outcome)
    assert "no culprit named: " in text and "culprit: " not in text


# -- rounds of k commits (redline/bisect/planner.py) --------------------------------------------------
@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_a_round_splits_what_is_left_into_k_plus_one_parts(k):
    picks = [i for i, _ in RoundPlanner(44, ["a"], per_round=k).plan({}).round]
    bounds = [-1, *picks, 43]
    parts = [b - a - 1 for a, b in zip(bounds, bounds[1:])]
    assert len(picks) == k and len(parts) == k + 1 and max(parts) - min(parts) <= 1 and sum(parts) == 43 - k


def test_a_round_passes_over_skipped_and_unbuildable_commits():
    marks = {14: Mark(why="does not build"), 28: Mark(why="no interval on a"), 27: Mark(why="does not build")}
    picks = [i for i, _ in RoundPlanner(44, ["a"], per_round=2).plan(marks).round]
    assert picks == [13, 29] or picks == [13, 26] or picks == [15, 29]
    assert not set(picks) & set(marks)


def test_k_larger_than_the_range_measures_every_commit_in_one_round():
    good, path = line(5)
    comparer = FakeComparer(path, good, culprit=2)
    outcome = bisect(comparer, good, path, ["a"], per_round=10)
    assert comparer.rounds == [[c.sha for c in path[:4]]] and outcome.rounds == 1
    assert outcome.culprit == path[2]


@pytest.mark.parametrize("k, rounds", [(1, 6), (2, 4), (3, 3)])
def test_rounds_against_commits_per_round_on_44_commits(k, rounds):
    """44 commits (7.0.5..7.0.7): 43 undecided, ⌈log_{k+1}(44)⌉ rounds at most, wherever the change."""
    good, path = line(44)
    used = []
    for culprit in range(44):
        comparer = FakeComparer(path, good, culprit=culprit)
        outcome = bisect(comparer, good, path, ["a"], per_round=k)
        assert outcome.culprit == path[culprit]
        assert all(1 <= len(r) <= k for r in comparer.rounds) and len(comparer.rounds) == outcome.rounds
        used.append(outcome.rounds)
    assert max(used) == rounds == estimated_steps(43, k)


def test_rounds_with_unbuildable_and_undecidable_commits():
    """Round 1 of 3 picks 10, 21, 32: 10 does not build, 21 cannot be decided; both are passed over,
    and the next round splits 21..32 (less 21) as if they had not been there."""
    good, path = line(44)
    comparer = FakeComparer(path, good, culprit=30, broken={10}, noisy={21})
    outcome = bisect(comparer, good, path, ["a"], per_round=3)
    assert comparer.rounds[0] == [path[i].sha for i in (10, 21, 32)]
    assert outcome.culprit == path[30]
    assert [(s.candidate, s.outcome) for s in outcome.steps[:3]] == [(path[10], SKIPPED), (path[21], UNDECIDABLE),
                                                                     (path[32], BAD)]
    assert "does not build" in outcome.steps[0].note and "undecided on a" in outcome.steps[1].note
    assert all(s.candidate not in (path[10], path[21]) for s in outcome.steps[3:])


@pytest.mark.parametrize("k", [1, 3])
def test_a_change_that_splits_with_rounds(k):
    good, path = line(44)
    outcome = bisect(FakeComparer(path, good, changes=BYBOX), good, path, ["a"], per_round=k)
    assert outcome.culprit == path[20] and outcome.remainder.large


@pytest.mark.parametrize("k", [1, 2, 4])
def test_each_step_finds_the_three_bybox_commits(k):
    """Asked for each step, the parts on either side of the middle step are searched too: the
    three commits, each with its own share, the largest named."""
    good, path = line(44)
    outcome = bisect(FakeComparer(path, good, changes=BYBOX), good, path, ["a"], per_round=k, each_step=True)
    assert [r.commit for r in outcome.found] == [path[18], path[20], path[27]]
    assert all(r.resolved for r in outcome.found)
    shares = [r.explained["a"] for r in outcome.found]
    assert shares == pytest.approx([0.338, 0.372, 0.290], abs=0.01) and sum(shares) == pytest.approx(1, abs=0.01)
    assert outcome.culprit == path[20]
    text = _report(outcome)
    assert "steps found: 3" in text and "culprit (the largest step found)" in text
    assert "the change splits over 3 steps (a): together 100% of it" in text and "next bisections" not in text


@pytest.mark.parametrize("n, changes", LAYOUTS)
def test_each_step_finds_every_step_of_the_layouts(n, changes):
    good, path = line(n)
    outcome = bisect(FakeComparer(path, good, changes=changes), good, path, ["a"], each_step=True, per_round=2)
    assert [r.commit for r in outcome.found] == [path[i] for i in sorted(changes)]
    assert outcome.culprit == path[max(changes, key=lambda i: abs(math.log(changes[i])))]


def test_each_step_stops_where_the_ends_of_a_part_do_not_differ():
    """One step: the parts on either side hold no change; no more searches, no more rounds."""
    good, path = line(44)
    plain = bisect(FakeComparer(path, good, culprit=17), good, path, ["a"])
    every = bisect(FakeComparer(path, good, culprit=17), good, path, ["a"], each_step=True)
    assert [r.commit for r in every.found] == [path[17]] and every.culprit == plain.culprit == path[17]
    assert len(every.steps) == len(plain.steps)


def test_the_planner_continues_from_stored_steps():
    """The marks are the planner's whole state: rebuilt from the first steps of a bisection (as a
    collector would from stored steps), they give the rounds that bisection went on with."""
    good, path = line(44)
    outcome = bisect(FakeComparer(path, good, changes=BYBOX), good, path, ["a"], per_round=2, each_step=True)
    planner = RoundPlanner(44, ["a"], per_round=2, each_step=True, least_share=outcome.endpoints.least_share())
    index = {commit: i for i, commit in enumerate(path)}
    for done in range(outcome.rounds):
        marks = {index[s.candidate]: Mark(s.places, why=None if s.places else s.note)
                 for s in outcome.steps if s.round <= done}
        expected = [index[s.candidate] for s in outcome.steps if s.round == done + 1]
        assert [i for i, _ in planner.plan(marks).round] == expected
    assert planner.plan({index[s.candidate]: Mark(s.places) for s in outcome.steps}).over


def test_the_markdown_report_writes_moved_function_names_as_literals_and_the_terminal_as_they_are():
    # a fleet bisection's functions come from an agent's profile: untrusted text in a posted comment
    from redline.output.bisect_report import report_lines, report_markdown
    from redline.output.markdown_text import literal
    good, path = line(15)
    outcome = bisect(FakeComparer(path, good, culprit=10), good, path, ["a"])
    hostile = "@octocat ![x](http://evil.example/x.png)"
    doc = {"repository": "/r", "metric": "server_cpu_us_per_op", "variant": "libc-malloc", "tests": ["a"],
           "selection": ["--name", "a"], "session": 1, **outcome.as_json()}
    doc["remainder"]["changes"]["a"]["moved_symbols"] = [{"symbol": hostile, "baseline_share": 0.1,
                                                          "comparison_share": 0.5}]
    markdown = report_markdown(doc)
    assert f"moved: {literal(hostile)} 10% → 50%" in markdown
    assert "@octocat" not in markdown.replace(literal(hostile), "")
    assert f"moved: {hostile} 10% → 50%" in "\n".join(report_lines(doc))
