"""redline/bisect/search.py's decision logic with an in-process fake comparer (pure logic: no build, no
server). The real thing, with builds and runs, is tests/test_bisect.py."""

from __future__ import annotations

import math
import subprocess

import pytest

from redline.bisect.search import (BAD, GOOD, SKIPPED, UNDECIDABLE, Change, Commit, Range, Unbuildable, ancestry_path,
                            from_change_point,
                            bisect, decide, estimated_steps, side_of)
from redline.core.errors import UsageError
from redline.analysis.stats import Verdict


class FakeComparer:
    """Commit i's metric is 1.0 before the culprit and `step` from it on (the first `split_at`
    commits of a split change get 30% of it, in log terms); every measurement is that ratio ±1.5%. Commits in
    `broken` do not build; in `noisy`, every interval spans 0.3x..3x whatever the runs."""

    def __init__(self, path: list[Commit], good: Commit, *, culprit: int | None, step: float = 3.0,
                 broken=(), noisy=(), second_test_culprit: int | None = None, partial_from: int | None = None):
        self.index = {c.sha: i for i, c in enumerate(path)}
        self.index[good.sha] = -1
        self.culprit, self.step, self.broken, self.noisy = culprit, step, set(broken), set(noisy)
        self.second_test_culprit = second_test_culprit
        self.partial_from = partial_from
        self.calls: list[tuple[str, str]] = []
        self.profiled: list[tuple[str, str]] = []

    def value(self, test: str, i: int) -> float:
        culprit = self.second_test_culprit if test == "b" and self.second_test_culprit is not None else self.culprit
        if self.partial_from is not None and self.partial_from <= i < (culprit or 0):
            return self.step ** 0.3               # a first part: 30% of the change (log scale)
        return self.step if culprit is not None and i >= culprit else 1.0

    def compare(self, reference, candidate, tests, settled, *, profile=False):
        self.profiled += [(reference.sha, candidate.sha)] if profile else []
        for commit in (reference, candidate):
            if self.index[commit.sha] in self.broken:
                raise Unbuildable(commit, ["src/adlist.c:1:2: error: #error this commit does not build"])
        self.calls.append((reference.sha, candidate.sha))
        out = {}
        for test in tests:
            ratio = self.value(test, self.index[candidate.sha]) / self.value(test, self.index[reference.sha])
            low, high = (0.3, 3.0) if self.index[candidate.sha] in self.noisy else (ratio * 0.985, ratio * 1.015)
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


def test_tests_that_moved_at_different_commits_disagree():
    good, path = line(15)
    outcome = bisect(FakeComparer(path, good, culprit=10, second_test_culprit=3), good, path, ["a", "b"])
    split = [s for s in outcome.steps if s.outcome == UNDECIDABLE]
    assert split and "the tests disagree" in split[0].note


def test_a_split_change_leaves_a_remainder():
    """30% of the change (in log terms) comes at commit 4, the rest at commit 10: the culprit
    named explains only 70% of it, and the report says so."""
    good, path = line(15)
    outcome = bisect(FakeComparer(path, good, culprit=10, partial_from=4), good, path, ["a"])
    assert outcome.culprit == path[10]
    assert outcome.remainder.large
    assert outcome.remainder.explained["a"] == pytest.approx(0.7, abs=0.02)


def test_remainder_reuses_the_step_that_measured_it():
    good, path = line(3)
    comparer = FakeComparer(path, good, culprit=1)
    outcome = bisect(comparer, good, path, ["a"])
    assert outcome.culprit == path[1]
    assert len(comparer.calls) == 1 + len(outcome.steps)


def test_a_profiled_remainder_is_measured_again_with_profiles():
    good, path = line(3)
    comparer = FakeComparer(path, good, culprit=1)
    outcome = bisect(comparer, good, path, ["a"], profile=True)
    assert comparer.profiled == [(path[0].sha, path[1].sha)]
    assert comparer.calls[-1] == (path[0].sha, path[1].sha) and len(comparer.calls) == 2 + len(outcome.steps)


@pytest.mark.parametrize("low, high, other, expected", [
    (190, 210, 3.0, "other"), (-3, 3, 3.0, "same"), (20, 150, 3.0, None),
    (-70, -60, 1 / 3, "other"), (-2, 2, 1 / 3, "same"), (-60, -30, 1 / 3, None),
])
def test_side_of_the_half_way_point(low, high, other, expected):
    change = Change("t", "x", (low + high) / 2, low, high)
    assert side_of(change, other) == expected


def test_decide_against_the_bad_end():
    # the candidate is as slow as BAD (3x): 'same' as the bad reference
    assert decide({"a": Change("a", "no change", 0, -2, 2)}, {"a": 3.0}, BAD) == (BAD, None)
    assert decide({"a": Change("a", "improvement", -66, -68, -64)}, {"a": 3.0}, BAD) == (GOOD, None)
    state, why = decide({"a": Change("a", "inconclusive", None, None, None, note="too few runs")}, {"a": 3.0}, GOOD)
    assert state is None and "undecided" in why


def test_range_and_estimates():
    span = Range(15)
    assert span.candidates() == list(range(14)) and span.next() == 6 and span.nearer_bound(6) == GOOD
    span.skipped.add(6)
    assert span.next() == 5
    assert [estimated_steps(n) for n in (0, 1, 2, 3, 7, 14, 15)] == [0, 1, 2, 2, 3, 4, 4]


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
    assert f"culprit: {path[10].sha[:12]} commit 10" in text and "a large part of the change is elsewhere" in text
    assert f"redline bisect --good {good.sha[:12]} --bad '{path[10].sha[:12]}^' git:/r --name a" in text
    assert f"redline bisect --good {path[10].sha[:12]} --bad {path[14].sha[:12]} git:/r --name a" in text


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
    from redline.bisect.measure import _timed_change
    from redline.analysis.comparison import TestComparison
    from redline.analysis.stats import compare_metric
    result = compare_metric([100.0, 101, 99, 100.5, 99.5], [104.0, 105, 103, 104.5, 103.5], paired=False,
                            higher_is_better=False)
    assert result.verdict == Verdict.REGRESSION
    held_back = TestComparison("t", "server_cpu_us_per_op", result, survives_fdr=False)
    survived = TestComparison("t", "server_cpu_us_per_op", result, survives_fdr=True)
    assert _timed_change(held_back, []).verdict == Verdict.INCONCLUSIVE
    assert _timed_change(survived, []).verdict == Verdict.REGRESSION
