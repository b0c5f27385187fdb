"""`redline bisect`'s search: from "the metric moved between GOOD and BAD" to the first commit at
which it moved, as git bisect does by hand, with a measured decision at every step.

The pure part (everything but `ancestry_path`) never builds or measures: it asks a `Comparer`
for the change of one commit against another and decides. The command (redline/commands/bisect.py)
gives it the real comparer (builds and interleaved runs); tests give it an in-process fake.

The method (docs/bisect.md):
  1. endpoints: GOOD vs BAD must give a regression or improvement verdict on the metric for at
     least one test; those tests ("moved") are the ones followed, and the ratio BAD/GOOD of each
     is the step looked for. No moved test: "no change to bisect".
  2. rounds (redline/bisect/planner.py): each measures the commit(s) that split the undecided range
     (k = 1: the middle) against GOOD or BAD themselves, on the moved tests, which places each on
     the endpoints' change (0 at GOOD, 1 at BAD, log terms). A candidate lies before the half-way
     point when its interval lies entirely below it, beyond it when entirely above; else it is
     undecided, and the comparer adds runs. Where the tests disagree (a range with several steps
     that moved them at different commits), the leader decides: the test whose endpoints moved
     most, which the search then follows; the step says so. Still undecided, a commit that does
     not build, runs that failed: the commit is passed over (git bisect skip).
  3. the first commit beyond the half-way point after the last before it crossed it (with
     passed-over commits in between: one of them or it, as git says). Its own change, the commit
     before it against it, is how much of the endpoints' change it made; it is named only when
     that change is told from none (issue #34: a ratio against a commit decided earlier, judged
     against the half-way point from GOOD, had named a commit with no change). With `each_step`,
     the parts on either side of it are searched the same way, for every step.

Counted bisections (--measure instructions, redline/bisect/measure.py) decide every step on one
run of the candidate: each change then carries a step tolerance u, how far one run's ratio may sit
from the true one (redline.analysis.counted.one_run_step), by which its interval is widened.
A commit like one end then measures within u of it and its interval reaches u further: one run
tells it from the other end only when the half-way point is at least (1 + u)² from each end, i.e.
the endpoints' ratio is at least (1 + u)⁴. A test that moved less is not followed, and says so
(`Endpoints.too_close`).
"""

from __future__ import annotations

import math
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Protocol

from redline.analysis.stats import Verdict
from redline.bisect.planner import BEFORE, Mark, Place, Plan, RoundPlanner, Search, place_of, rounds_needed
from redline.core.errors import UsageError

GOOD, BAD = "good", "bad"
SKIPPED, UNDECIDABLE = "skipped", "undecidable"
EXPLAINED_ENOUGH = 0.8         # a culprit explaining less of the endpoints' change leaves a remainder


@dataclass(frozen=True)
class Commit:
    sha: str
    subject: str = ""
    date: str = ""             # author date, ISO 8601

    @property
    def short(self) -> str:
        return self.sha[:12]


@dataclass
class Change:
    """One test's change of a candidate against a reference on the metric (percent, + = higher)."""

    test: str
    verdict: str               # the compare verdict (regression / improvement / no change / inconclusive)
    delta_pct: float | None
    ci_low_pct: float | None
    ci_high_pct: float | None
    runs: int = 0              # runs per side
    min_detectable_pct: float | None = None
    note: str | None = None    # why there is no interval (too few successful runs)
    run_ids: list[int] = field(default_factory=list)
    moved_symbols: list[dict] | None = None    # profiled compares: symbols whose share of the CPU moved most
    diff_flamegraph: str | None = None         # profiled compares: candidate against reference SVG
    step_tolerance_pct: float | None = None    # counted bisections: u, how far one run's ratio may sit from the truth

    @property
    def measured(self) -> bool:
        return self.delta_pct is not None and self.ci_low_pct is not None and self.ci_high_pct is not None

    def ratio(self) -> float:
        return 1 + self.delta_pct / 100


Settled = Callable[[dict[str, Change]], bool]


class Unbuildable(Exception):
    """The comparer could not build a commit; `tail` is the end of its build log."""

    def __init__(self, commit: Commit, tail: list[str]):
        super().__init__(f"{commit.short} does not build")
        self.commit, self.tail = commit, tail


@dataclass(frozen=True)
class Ask:
    """One commit of a round: `candidate` against `reference` (GOOD or BAD of the bisection);
    `settled(changes)` says whether the runs so far answer the step's question."""

    candidate: Commit
    reference: Commit
    settled: Settled


@dataclass
class Answer:
    """What measuring an Ask gave: the candidate's change per test, or the tail of its build log
    when it does not build."""

    changes: dict[str, Change] = field(default_factory=dict)
    unbuildable: list[str] | None = None


class Comparer(Protocol):
    def compare(self, reference: Commit, candidate: Commit, tests: list[str], settled: Settled, *,
                profile: bool = False) -> dict[str, Change]:
        """The change of `candidate` against `reference` per test. `settled(changes)` says whether
        the runs so far decide the question; while not, the comparer may add runs. With
        `profile`, both sides are profiled too (moved symbols, differential flame graph).
        Raises Unbuildable for a commit that does not build."""
        ...

    def measure(self, asks: list[Ask], tests: list[str]) -> list[Answer]:
        """One round: every ask's candidate against its reference, the answers in the asks' order.
        The asks do not depend on each other, so a comparer may measure them side by side
        (counted runs in parallel lanes, fleet agents); a candidate that does not build is an
        answer, not an exception."""
        ...


class OneAtATime:
    """Comparer.measure as one compare after another (timed compares hold the machine)."""

    def measure(self, asks: list[Ask], tests: list[str]) -> list[Answer]:
        answers = []
        for ask in asks:
            try:
                answers.append(Answer(self.compare(ask.reference, ask.candidate, tests, ask.settled)))
            except Unbuildable as failure:
                if failure.commit != ask.candidate:
                    raise
                answers.append(Answer(unbuildable=failure.tail))
        return answers


# -- the ancestry path (git) ----------------------------------------------------------------
def _git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise UsageError(f"git {' '.join(args[:2])} in {repo}: {(proc.stderr.strip().splitlines() or ['failed'])[-1]}")
    return proc.stdout


def resolve(repo: Path, ref: str) -> Commit:
    if ref.startswith("-"):
        raise UsageError(f"bad git ref {ref!r}")
    proc = subprocess.run(["git", "-C", str(repo), "log", "-1", "--format=%H%x1f%aI%x1f%s", f"{ref}^{{commit}}", "--"],
                          capture_output=True, text=True, timeout=120)
    if proc.returncode != 0 or not proc.stdout.strip():
        raise UsageError(f"git ref {ref!r} does not name a commit in {repo}")
    return _commit(proc.stdout.strip())


def _commit(line: str) -> Commit:
    sha, date, subject = line.split("\x1f", 2)
    return Commit(sha, subject, date)


def ancestry_path(repo: Path, good: str, bad: str, *, all_parents: bool = False) -> tuple[Commit, list[Commit]]:
    """GOOD and the commits after it up to BAD (last), oldest first: first-parent by default;
    with all_parents every commit on an ancestry path from GOOD to BAD in topological order."""
    good_commit, bad_commit = resolve(repo, good), resolve(repo, bad)
    if good_commit.sha == bad_commit.sha:
        raise UsageError(f"--good {good} and --bad {bad} are the same commit {good_commit.short}")
    if subprocess.run(["git", "-C", str(repo), "merge-base", "--is-ancestor", good_commit.sha, bad_commit.sha],
                      capture_output=True, timeout=120).returncode != 0:
        raise UsageError(f"--good {good} ({good_commit.short}) is not an ancestor of --bad {bad} ({bad_commit.short})")
    walk = ["--topo-order"] if all_parents else ["--first-parent"]
    out = _git(repo, "log", *walk, "--ancestry-path", "--reverse", "--format=%H%x1f%aI%x1f%s",
               f"{good_commit.sha}..{bad_commit.sha}", "--")
    path = [_commit(line) for line in out.splitlines() if line]
    if not path or path[-1].sha != bad_commit.sha:
        raise UsageError(f"--good {good} is not on the first-parent line of --bad {bad}; try --all-parents")
    return good_commit, path


# -- decisions ------------------------------------------------------------------------------
def one_run_decides(step: float, tolerance_pct: float) -> bool:
    """Whether one run whose ratio may sit ±`tolerance_pct` (u) from the truth, its interval widened
    by as much again, always tells a commit like one end from one like the other when the ends are
    `step` apart: the half-way point (√step) must lie (1 + u)² from each end."""
    return abs(math.log(step)) >= 4 * math.log(1 + tolerance_pct / 100)


def least_followed_change_pct(tolerance_pct: float) -> float:
    """The smallest endpoint change (rise, in %) `one_run_decides` follows."""
    return ((1 + tolerance_pct / 100) ** 4 - 1) * 100


def mark_of(changes: dict[str, Change], steps: dict[str, float], against_bad: bool) -> Mark:
    """A candidate's place on each followed test's endpoint change (`steps`: test → BAD/GOOD), from
    its changes against GOOD (or BAD, `against_bad`)."""
    places = {}
    for test, step in steps.items():
        change = changes.get(test)
        if change is not None and change.measured:
            place = place_of((change.ratio(), 1 + change.ci_low_pct / 100, 1 + change.ci_high_pct / 100),
                             step, against_bad)
            if place is not None:
                places[test] = place
    unplaced = [test for test in steps if test in changes and test not in places]
    return Mark(places, why=f"no interval on {', '.join(unplaced)}" if unplaced else None)


def judge(search: Search, mark: Mark) -> tuple[str | None, str | None]:
    """(good/bad, note) when the search can put the candidate on one side of its half-way point
    (good: lo's side): every followed test does, or the tests disagree and the leader, the test
    that moved most, decides (the note says so); (None, why) when not."""
    sides, side = search.sides(mark), search.side(mark)
    said = "; ".join(f"{test}: {'undecided' if s is None else GOOD if s == BEFORE else BAD}" for test, s in sides.items())
    if side is None:
        undecided = [test for test, s in sides.items() if s is None]
        return None, f"undecided on {', '.join(undecided)}" + (f" ({said})" if len(sides) > 1 else "")
    state = GOOD if side == BEFORE else BAD
    if len(set(sides.values())) > 1:
        return state, f"the tests disagree ({said}); {search.leader}, which moved most, decides"
    return state, None


@dataclass(frozen=True)
class StepRule:
    """A step's rule as data: the runs of a candidate against GOOD (or BAD, `against_bad`) are
    enough once every measured test puts it on one side of its search's half-way point (`halves`,
    with `rising`: whether the search's upper end lies above its lower one), its place taken on
    each followed test's endpoint change (`steps`: BAD/GOOD), or once the leader does (`halves` keep
    the search's order: the leader first). Tests that disagree are not helped by more runs.
    Callable as a `Settled`; its JSON form travels in a fleet job (redline.fleet.bisection)."""

    halves: dict[str, float]
    rising: dict[str, bool]
    steps: dict[str, float]
    against_bad: bool

    def __call__(self, changes: dict[str, Change]) -> bool:
        search = Search(-1, 0, dict(self.halves), dict(self.rising))
        return search.side(mark_of(changes, self.steps, self.against_bad)) is not None

    def as_json(self) -> dict:
        return {"halves": dict(self.halves), "rising": dict(self.rising), "steps": dict(self.steps),
                "against_bad": self.against_bad}

    @classmethod
    def from_json(cls, document: dict) -> StepRule:
        return cls(dict(document["halves"]), dict(document["rising"]), dict(document["steps"]),
                   bool(document["against_bad"]))


def settled_by(search: Search, steps: dict[str, float], against_bad: bool) -> StepRule:
    """The step rule of a candidate of `search`, measured against GOOD or BAD (`against_bad`)."""
    return StepRule({test: search.halves[test] for test in search.halves},
                    {test: search.rising[test] for test in search.halves},
                    {test: steps[test] for test in search.halves if test in steps}, against_bad)


def endpoints_settled(changes: dict[str, Change]) -> bool:
    """The endpoint check is decided when no test is inconclusive."""
    return all(c.verdict != Verdict.INCONCLUSIVE for c in changes.values())


def own_change_settled(changes: dict[str, Change]) -> bool:
    """A commit's own change (against the commit before it) is measured once its interval excludes
    no change."""
    return all(c.measured and (c.ci_low_pct > 0 or c.ci_high_pct < 0) for c in changes.values())


# -- the search -----------------------------------------------------------------------------
def own_change_settled_on(leader: str | None) -> Settled:
    """own_change_settled on the test that led the search (every test when none is named)."""
    def settled(changes: dict[str, Change]) -> bool:
        return own_change_settled({leader: changes[leader]} if leader in changes else changes)
    return settled


def estimated_steps(candidates: int, per_round: int = 1) -> int:
    """Rounds a bisection of `candidates` undecided commits takes (without skips)."""
    return rounds_needed(candidates, per_round)


@dataclass
class Endpoints:
    good: Commit
    bad: Commit
    changes: dict[str, Change]
    moved: dict[str, float]           # test → BAD/GOOD ratio of the moved tests that are followed
    too_close: dict[str, str] = field(default_factory=dict)   # moved, but too little for one-run steps: why

    def least_share(self) -> dict[str, float]:
        """Per followed test, the least part of its change (log share) one step resolves: what one
        counted run can follow, or the endpoint compare's minimum detectable change."""
        shares = {}
        for test, step in self.moved.items():
            change = self.changes[test]
            least = (least_followed_change_pct(change.step_tolerance_pct) if change.step_tolerance_pct is not None
                     else change.min_detectable_pct or 0.0)
            shares[test] = math.log(1 + least / 100) / abs(math.log(step))
        return shares

    def as_json(self) -> dict:
        return {"good": asdict(self.good), "bad": asdict(self.bad), "moved": self.moved,
                "too_close": self.too_close, "changes": {test: asdict(c) for test, c in self.changes.items()}}


@dataclass
class Step:
    number: int
    candidate: Commit
    reference: Commit | None          # GOOD or BAD; None: not measured (it did not build)
    reference_state: str | None
    outcome: str                      # good, bad (which side of its search's half-way point), skipped, undecidable
    changes: dict[str, Change] = field(default_factory=dict)
    note: str | None = None
    remaining_before: int = 0         # candidates left before this step
    round: int = 1
    places: dict[str, Place] = field(default_factory=dict)   # test → its place on GOOD→BAD (0 to 1)

    def as_json(self) -> dict:
        return {"number": self.number, "round": self.round, "candidate": asdict(self.candidate),
                "reference": asdict(self.reference) if self.reference else None,
                "reference_state": self.reference_state, "outcome": self.outcome, "note": self.note,
                "remaining_before": self.remaining_before,
                "places": {test: place.as_json() for test, place in self.places.items()},
                "changes": {test: asdict(c) for test, c in self.changes.items()}}


@dataclass
class Remainder:
    """A commit's own change: the commit before it against it, and how much of each moved test's
    endpoint change that is (log scale), with where the rest lies."""

    before: Commit                      # the last commit before the half-way point
    changes: dict[str, Change]
    explained: dict[str, float | None]  # share of each moved test's endpoint change (log scale)
    explained_at_most: dict[str, float | None]   # the same from the interval's far end
    explained_at_least: dict[str, float | None] = field(default_factory=dict)   # ... and from its near end
    commit: Commit | None = None        # the commit whose change this is
    place_before: dict[str, float] = field(default_factory=dict)   # where `before` lies on GOOD→BAD
    place_after: dict[str, float] = field(default_factory=dict)    # where `commit` lies on GOOD→BAD
    rising: dict[str, bool] = field(default_factory=dict)   # the tests its search followed: toward BAD?

    @property
    def resolved(self) -> bool:
        """The commit's own change is told from no change, in its search's direction, on the test
        that led its search (the first of `rising`; every test when none is known): only then is it
        named. The other followed tests' shares are shown beside it: in a range with several steps
        a culprit of one test's change may explain none of another's."""
        judged = dict([next(iter(self.rising.items()))]) if self.rising else {test: True for test in self.explained}
        return all((self.explained_at_least.get(t) or 0) > 0 if up else (self.explained_at_most.get(t) or 0) < 0
                   for t, up in judged.items())

    @property
    def large(self) -> bool:
        """The culprit's change is, with the interval's confidence, less than EXPLAINED_ENOUGH of
        the endpoints' change for some moved test (or could not be measured)."""
        return any(e is None or e < EXPLAINED_ENOUGH for e in self.explained_at_most.values())

    def as_json(self) -> dict:
        return {"commit": asdict(self.commit) if self.commit else None, "before": asdict(self.before),
                "explained": self.explained, "explained_at_most": self.explained_at_most,
                "explained_at_least": self.explained_at_least, "resolved": self.resolved, "large": self.large,
                "place_before": self.place_before, "place_after": self.place_after, "rising": self.rising,
                "changes": {test: asdict(c) for test, c in self.changes.items()}}


@dataclass
class Outcome:
    endpoints: Endpoints
    path: list[Commit]
    steps: list[Step] = field(default_factory=list)
    culprit: Commit | None = None
    candidates: list[Commit] = field(default_factory=list)   # the culprit is one of these (skips in the way)
    remainder: Remainder | None = None
    per_round: int = 1
    each_step: bool = False
    rounds: int = 0
    found: list[Remainder] = field(default_factory=list)     # every step found, resolved or not, in path order
    unresolved: str | None = None     # why no commit is named though the search ended at one

    @property
    def no_change(self) -> bool:
        return not self.endpoints.moved and not self.endpoints.too_close

    def as_json(self) -> dict:
        return {"endpoints": self.endpoints.as_json(), "path": [asdict(c) for c in self.path],
                "steps": [s.as_json() for s in self.steps],
                "culprit": asdict(self.culprit) if self.culprit else None,
                "candidates": [asdict(c) for c in self.candidates],
                "remainder": self.remainder.as_json() if self.remainder else None,
                "per_round": self.per_round, "each_step": self.each_step, "rounds": self.rounds,
                "found": [r.as_json() for r in self.found], "unresolved": self.unresolved,
                "no_change": self.no_change}


Progress = Callable[[str], None]


def confirm_endpoints(comparer: Comparer, good: Commit, bad: Commit, tests: list[str]) -> Endpoints:
    """GOOD vs BAD: the tests with a regression or improvement verdict, and their step ratios."""
    changes = comparer.compare(good, bad, tests, endpoints_settled)
    moved = {t: c.ratio() for t, c in changes.items()
             if c.verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT) and c.measured}
    moved = dict(sorted(moved.items(), key=lambda item: -abs(math.log(item[1]))))   # the leader first
    too_close = {}
    for test, step in list(moved.items()):
        tolerance = changes[test].step_tolerance_pct
        if tolerance is not None and not one_run_decides(step, tolerance):
            del moved[test]
            too_close[test] = (f"moved {changes[test].delta_pct:+.1f}%, but one counted run per commit may sit "
                               f"±{tolerance:.1f}% from the truth: it tells a commit from both ends only when "
                               f"they are {least_followed_change_pct(tolerance):.1f}% apart")
    return Endpoints(good, bad, changes, moved, too_close)


def bisect(comparer: Comparer, good: Commit, path: list[Commit], tests: list[str], *,
           per_round: int = 1, each_step: bool = False,
           progress: Progress = lambda line: None, on_step: Callable[[Outcome], None] = lambda outcome: None,
           profile: bool = False) -> Outcome:
    """The whole search: endpoint check, rounds of `per_round` commits (redline.bisect.planner),
    each measured against GOOD or BAD, then each commit at which the value crossed a half-way point
    against the commit before it (profiled with `profile`): named only when that change is told from
    none. `each_step`: every step, not only the one across the middle of the change.
    `on_step(outcome)` is called after the endpoint check and after each round (to store what is
    known so far)."""
    bad = path[-1]
    progress(f"endpoints: {good.short} (good) vs {bad.short} (bad), {len(path) - 1} commits between")
    outcome = Outcome(confirm_endpoints(comparer, good, bad, tests), path, per_round=per_round, each_step=each_step)
    on_step(outcome)
    if not outcome.endpoints.moved:
        return outcome
    steps = outcome.endpoints.moved
    planner = RoundPlanner(len(path), list(steps), per_round=per_round, each_step=each_step,
                           least_share=outcome.endpoints.least_share())
    marks: dict[int, Mark] = {}

    def commit_at(index: int) -> Commit:
        return good if index < 0 else path[index]

    while not (plan := planner.plan(marks)).over:
        outcome.rounds += 1
        asks = [Ask(path[index], good if search.reference_is_good(index) else bad,
                    settled_by(search, steps, against_bad=not search.reference_is_good(index)))
                for index, search in plan.round]
        left = sum(len(s.open) for s in plan.searches if not s.done)
        progress(_round_line(outcome, plan, asks, commit_at, left))
        for (index, search), ask, answer in zip(plan.round, asks, comparer.measure(asks, list(steps))):
            step = _step(len(outcome.steps) + 1, ask, answer, search, steps, against_bad=ask.reference is bad)
            step.remaining_before, step.round = left, outcome.rounds
            marks[index] = Mark(step.places, why=step.note if not step.places else None)
            outcome.steps.append(step)
            progress(f"step {step.number}: {ask.candidate.short} is {step.outcome}"
                     + "".join(f", at {round(p.share, 2) + 0.0:.0%} of {test}'s change" for test, p in step.places.items()))
        on_step(outcome)
    _conclude(comparer, outcome, planner, marks, commit_at, progress=progress, profile=profile)
    return outcome


def _round_line(outcome: Outcome, plan: Plan, asks: list[Ask], commit_at: Callable[[int], Commit], left: int) -> str:
    """Before a round: what is left, the rounds still expected, what is measured against which end."""
    live = [s for s in plan.searches if not s.done]
    ranges = ", ".join(f"{commit_at(s.before).short}..{commit_at(s.beyond).short}" for s in live)
    about = max(estimated_steps(len(s.open), outcome.per_round) for s in live)
    good = outcome.endpoints.good
    measuring = "; ".join(f"{ask.candidate.short} against {GOOD if ask.reference == good else BAD} {ask.reference.short}"
                          for ask in asks)
    label, unit = ((f"step {len(outcome.steps) + 1}", "steps") if outcome.per_round == 1
                   else (f"round {outcome.rounds}", "rounds"))
    return f"{label}: {left} commits left ({ranges}), about {about} {unit}; {measuring}"


def _step(number: int, ask: Ask, answer: Answer, search: Search, steps: dict[str, float], *,
          against_bad: bool) -> Step:
    """One measured commit as a step: skipped (does not build), or placed on the change and judged
    against its search's half-way point (undecidable: why)."""
    state = BAD if against_bad else GOOD
    if answer.unbuildable is not None:
        return Step(number, ask.candidate, None, None, SKIPPED, note="does not build:\n" + "\n".join(answer.unbuildable))
    mark = mark_of(answer.changes, steps, against_bad=against_bad)
    decided, why = judge(search, mark)
    return Step(number, ask.candidate, ask.reference, state, decided or UNDECIDABLE, answer.changes,
                note=why, places=mark.places)


def _conclude(comparer: Comparer, outcome: Outcome, planner: RoundPlanner, marks: dict[int, Mark],
              commit_at: Callable[[int], Commit], *, progress: Progress, profile: bool) -> None:
    """The commits at which the value crossed each search's half-way point, each measured against
    the commit before it; the named one (the largest resolved step) and what remains."""
    path, searches = outcome.path, planner.searches(marks)
    top = searches[0]
    if top.passed:
        outcome.candidates = [*(path[i] for i in top.passed), path[top.beyond]]
    for search in searches:
        if search.culprit is None:
            continue
        before, commit = commit_at(search.before), path[search.culprit]
        progress(f"{commit.short} crosses the half-way point; its own change: against {before.short}")
        remainder = check_remainder(comparer, outcome, before, commit, profile=profile, leader=search.leader)
        remainder.rising = dict(search.rising)
        remainder.place_before, remainder.place_after = (
            {t: place.share for t in outcome.endpoints.moved if (place := planner.place(index, marks, t)) is not None}
            for index in (search.before, search.culprit))
        outcome.found.append(remainder)
    outcome.found.sort(key=lambda r: path.index(r.commit))
    named = [r for r in outcome.found if r.resolved]
    top_found = next((r for r in outcome.found if top.culprit is not None and r.commit == path[top.culprit]), None)
    if outcome.each_step and named:
        outcome.remainder = max(named, key=lambda r: sum(e or 0 for e in r.explained.values()))
    else:
        outcome.remainder = top_found
    if outcome.remainder is not None and outcome.remainder.resolved:
        outcome.culprit = outcome.remainder.commit
    elif outcome.remainder is not None:
        r = outcome.remainder
        outcome.unresolved = (f"{r.commit.short} crosses the half-way point, but its own change against "
                              f"{r.before.short} cannot be told from none: "
                              + "; ".join(f"{t} {_pct_text(c)}" for t, c in r.changes.items())
                              + "; no commit is named (noise, or a value that moves back and forth)")


def _pct_text(change: Change) -> str:
    if not change.measured:
        return change.note or "not measured"
    return f"{change.delta_pct:+.1f}% [{change.ci_low_pct:+.1f}%, {change.ci_high_pct:+.1f}%]"


def check_remainder(comparer: Comparer, outcome: Outcome, before: Commit, commit: Commit, *,
                    profile: bool = False, leader: str | None = None) -> Remainder:
    """`before` (the last commit before the half-way point) against `commit` (unless profiled, a
    step that measured exactly that is reused, with more runs while the change of `leader`, the
    test that led the search, cannot be told from none): the share of each moved test's endpoint
    change this commit explains."""
    reused = next((s for s in outcome.steps if s.reference == before and s.candidate == commit
                   and s.outcome in (GOOD, BAD)), None)
    steps = outcome.endpoints.moved
    changes = reused.changes if reused and not profile else comparer.compare(
        before, commit, list(steps), own_change_settled_on(leader), profile=profile)
    explained, at_most, at_least = {}, {}, {}
    for test, step in steps.items():
        change = changes.get(test)
        measured = change is not None and change.measured
        explained[test] = _share(change.delta_pct, step) if measured else None
        far, near = ((change.ci_high_pct, change.ci_low_pct) if step > 1 else (change.ci_low_pct, change.ci_high_pct)) \
            if measured else (None, None)
        at_most[test] = _share(far, step) if measured else None
        at_least[test] = _share(near, step) if measured else None
    return Remainder(before, changes, explained, at_most, at_least, commit=commit)


def _share(change_pct: float, step: float) -> float | None:
    """A change as a share of the step, in log terms (1.0: all of it)."""
    ratio = 1 + change_pct / 100
    return math.log(ratio) / math.log(step) if ratio > 0 else None


# -- hand-off from `redline history` --------------------------------------------------------
@dataclass(frozen=True)
class HandOff:
    """GOOD and BAD of a change point found by `redline history --json`, with what it was found on."""

    good: str
    bad: str
    metric: str
    test: str
    session: int
    delta_pct: float


def from_change_point(document: dict, *, session: int | None, tests: set[str], source: str) -> HandOff:
    """The change point of `document` (redline history --json) on one of `tests` — the one at
    `session` if given, else the only one — whose builds on both sides are git commits."""
    found = []
    for series in document.get("series", []):
        if series.get("test") not in tests:
            continue
        for cp in series.get("change_points", []):
            if session is None or cp.get("session") == session:
                found.append((series, cp))
    if not found:
        where = f" at session {session}" if session is not None else ""
        raise UsageError(f"{source}: no change point{where} on the selected tests ({', '.join(sorted(tests))})")
    if len(found) > 1:
        listed = ", ".join(f"{s['test']} session {cp['session']}" for s, cp in found)
        raise UsageError(f"{source}: {len(found)} change points ({listed}); choose one with {source}#SESSION")
    series, cp = found[0]
    commits = [((cp.get(side) or {}).get("commit") or {}).get("sha") for side in ("build_before", "build_after")]
    if not all(commits):
        raise UsageError(f"{source}: the change point at session {cp['session']} of {series['test']} was not "
                         "measured on git: builds, so it names no commits to bisect")
    if commits[0] == commits[1]:
        raise UsageError(f"{source}: the change point at session {cp['session']} of {series['test']} has the same "
                         f"commit {commits[0][:12]} on both sides: the build did not change there")
    return HandOff(good=commits[0], bad=commits[1], metric=document.get("metric", ""), test=series["test"],
                   session=cp["session"], delta_pct=cp.get("delta_pct"))
