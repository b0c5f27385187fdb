"""`redline bisect`'s search: from "the metric moved between GOOD and BAD" to the first commit at
which it moved, as git bisect does by hand, with a measured decision at every step.

The pure part (everything but `ancestry_path`) never builds or measures: it asks a `Comparer`
for the change of one commit against another and decides. The command (redline/commands/bisect.py)
gives it the real comparer (builds and interleaved runs); tests give it an in-process fake.

The method (docs/bisect.md):
  1. endpoints: GOOD vs BAD must give a regression or improvement verdict on the metric for at
     least one test; those tests ("moved") are the ones followed, and the ratio BAD/GOOD of each
     is the step looked for. No moved test: "no change to bisect".
  2. each step measures the middle commit of the undecided range against the nearer decided
     end (its good or its bad bound) on the moved tests. The candidate is like that end when
     the change's confidence interval lies entirely on that end's side of the half-way point
     (the geometric middle of 1 and the step); like the other end when it lies entirely on the
     other side; else undecided, and the comparer adds runs. Still undecided, a commit that
     does not build, tests that disagree, runs that failed: the commit is skipped (git bisect
     skip) and the next candidate is the unskipped commit nearest the middle.
  3. the first bad commit after the last good one is the culprit (with skipped commits in
     between: one of them or it, as git says). The remainder check measures the last good
     commit before it against it: how much of the endpoints' change this commit explains.

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


class Comparer(Protocol):
    def compare(self, reference: Commit, candidate: Commit, tests: list[str], settled: Settled, *,
                profile: bool = False) -> dict[str, Change]:
        """The change of `candidate` against `reference` per test. `settled(changes)` says whether
        the runs so far decide the question; while not, the comparer may add runs. With
        `profile`, both sides are profiled too (moved symbols, differential flame graph).
        Raises Unbuildable for a commit that does not build."""
        ...


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
def side_of(change: Change, other_ratio: float) -> str | None:
    """'same' when the candidate is like the reference, 'other' when it is like the other end
    (which is `other_ratio` times the reference), None when the interval straddles the half-way
    point (the geometric middle of 1 and other_ratio) or there is no interval."""
    if not change.measured:
        return None
    half = math.sqrt(other_ratio)
    low, high = 1 + change.ci_low_pct / 100, 1 + change.ci_high_pct / 100
    if other_ratio > 1:
        return "other" if low > half else "same" if high < half else None
    return "other" if high < half else "same" if low > half else None


@dataclass
class Step:
    number: int
    candidate: Commit
    reference: Commit | None          # None: not measured (it did not build)
    reference_state: str | None
    outcome: str                      # good, bad, skipped (does not build), undecidable
    changes: dict[str, Change] = field(default_factory=dict)
    note: str | None = None
    remaining_before: int = 0         # candidates left before this step

    def as_json(self) -> dict:
        return {"number": self.number, "candidate": asdict(self.candidate),
                "reference": asdict(self.reference) if self.reference else None,
                "reference_state": self.reference_state, "outcome": self.outcome, "note": self.note,
                "remaining_before": self.remaining_before,
                "changes": {test: asdict(c) for test, c in self.changes.items()}}


def one_run_decides(step: float, tolerance_pct: float) -> bool:
    """Whether one run whose ratio may sit ±`tolerance_pct` (u) from the truth, its interval widened
    by as much again, always tells a commit like one end from one like the other when the ends are
    `step` apart: the half-way point (√step) must lie (1 + u)² from each end."""
    return abs(math.log(step)) >= 4 * math.log(1 + tolerance_pct / 100)


def least_followed_change_pct(tolerance_pct: float) -> float:
    """The smallest endpoint change (rise, in %) `one_run_decides` follows."""
    return ((1 + tolerance_pct / 100) ** 4 - 1) * 100


def decide(changes: dict[str, Change], steps: dict[str, float], reference_state: str) -> tuple[str | None, str | None]:
    """(good/bad, None) when every moved test puts the candidate on one side; (None, why) when
    not: undecided (more runs may help) or the tests disagree."""
    other_state = BAD if reference_state == GOOD else GOOD
    sides = {}
    for test, step in steps.items():
        change = changes.get(test)
        ratio = step if reference_state == GOOD else 1 / step
        sides[test] = side_of(change, ratio) if change else None
    undecided = [t for t, s in sides.items() if s is None]
    if undecided:
        return None, f"undecided on {', '.join(undecided)}"
    if len(set(sides.values())) > 1:
        said = "; ".join(f"{t}: {reference_state if s == 'same' else other_state}" for t, s in sides.items())
        return None, f"the tests disagree ({said}); bisect them one at a time with --name"
    return (reference_state if next(iter(sides.values())) == "same" else other_state), None


def settled_by(steps: dict[str, float], reference_state: str) -> Settled:
    """The runs of the tests in `changes` are enough once each puts the candidate on one side
    (tests that disagree are not helped by more runs)."""
    def settled(changes: dict[str, Change]) -> bool:
        return all(side_of(change, steps[test] if reference_state == GOOD else 1 / steps[test]) is not None
                   for test, change in changes.items())
    return settled


def endpoints_settled(changes: dict[str, Change]) -> bool:
    """The endpoint check is decided when no test is inconclusive."""
    return all(c.verdict != Verdict.INCONCLUSIVE for c in changes.values())


# -- the search -----------------------------------------------------------------------------
def estimated_steps(candidates: int) -> int:
    """Steps a bisection of `candidates` undecided commits takes (without skips)."""
    return math.ceil(math.log2(candidates + 1)) if candidates > 0 else 0


@dataclass
class Range:
    """The undecided part of the path: path[lo] is the last known good (-1: GOOD itself), path[hi]
    the first known bad, skipped commits are left out of the candidates."""

    size: int
    lo: int = -1
    hi: int = 0
    skipped: set[int] = field(default_factory=set)

    def __post_init__(self):
        self.hi = self.size - 1

    def candidates(self) -> list[int]:
        return [i for i in range(self.lo + 1, self.hi) if i not in self.skipped]

    def next(self) -> int | None:
        """The unskipped candidate nearest the middle (the lower one first)."""
        middle = (self.lo + self.hi) // 2
        left = self.candidates()
        return min(left, key=lambda i: (abs(i - middle), i)) if left else None

    def nearer_bound(self, index: int) -> str:
        return GOOD if index - self.lo <= self.hi - index else BAD


@dataclass
class Endpoints:
    good: Commit
    bad: Commit
    changes: dict[str, Change]
    moved: dict[str, float]           # test → BAD/GOOD ratio of the moved tests that are followed
    too_close: dict[str, str] = field(default_factory=dict)   # moved, but too little for one-run steps: why

    def as_json(self) -> dict:
        return {"good": asdict(self.good), "bad": asdict(self.bad), "moved": self.moved,
                "too_close": self.too_close, "changes": {test: asdict(c) for test, c in self.changes.items()}}


@dataclass
class Remainder:
    before: Commit                      # the last good commit before the culprit
    changes: dict[str, Change]
    explained: dict[str, float | None]  # share of each moved test's endpoint change (log scale)
    explained_at_most: dict[str, float | None]   # the same from the interval's far end

    @property
    def large(self) -> bool:
        """The culprit's change is, with the interval's confidence, less than EXPLAINED_ENOUGH of
        the endpoints' change for some moved test (or could not be measured)."""
        return any(e is None or e < EXPLAINED_ENOUGH for e in self.explained_at_most.values())

    def as_json(self) -> dict:
        return {"before": asdict(self.before), "explained": self.explained,
                "explained_at_most": self.explained_at_most, "large": self.large,
                "changes": {test: asdict(c) for test, c in self.changes.items()}}


@dataclass
class Outcome:
    endpoints: Endpoints
    path: list[Commit]
    steps: list[Step] = field(default_factory=list)
    culprit: Commit | None = None
    candidates: list[Commit] = field(default_factory=list)   # the culprit is one of these (skips in the way)
    remainder: Remainder | None = None

    @property
    def no_change(self) -> bool:
        return not self.endpoints.moved and not self.endpoints.too_close

    def as_json(self) -> dict:
        return {"endpoints": self.endpoints.as_json(), "path": [asdict(c) for c in self.path],
                "steps": [s.as_json() for s in self.steps],
                "culprit": asdict(self.culprit) if self.culprit else None,
                "candidates": [asdict(c) for c in self.candidates],
                "remainder": self.remainder.as_json() if self.remainder else None,
                "no_change": self.no_change}


Progress = Callable[[str], None]


def confirm_endpoints(comparer: Comparer, good: Commit, bad: Commit, tests: list[str]) -> Endpoints:
    """GOOD vs BAD: the tests with a regression or improvement verdict, and their step ratios."""
    changes = comparer.compare(good, bad, tests, endpoints_settled)
    moved = {t: c.ratio() for t, c in changes.items()
             if c.verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT) and c.measured}
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
           progress: Progress = lambda line: None, on_step: Callable[[Outcome], None] = lambda outcome: None,
           profile: bool = False) -> Outcome:
    """The whole search: endpoint check, steps, culprit, remainder (profiled with `profile`).
    `on_step(outcome)` is called after the endpoint check and after each step (to store what is
    known so far)."""
    bad = path[-1]
    progress(f"endpoints: {good.short} (good) vs {bad.short} (bad), {len(path) - 1} commits between")
    outcome = Outcome(confirm_endpoints(comparer, good, bad, tests), path)
    on_step(outcome)
    if not outcome.endpoints.moved:
        return outcome
    steps = outcome.endpoints.moved
    span = Range(len(path))

    def commit_at(index: int) -> Commit:
        return good if index < 0 else path[index]

    while (index := span.next()) is not None:
        left = len(span.candidates())
        reference_state = span.nearer_bound(index)
        reference = commit_at(span.lo if reference_state == GOOD else span.hi)
        candidate = path[index]
        progress(f"step {len(outcome.steps) + 1}: {left} commits left ({commit_at(span.lo).short}..{commit_at(span.hi).short}), "
                 f"about {estimated_steps(left)} steps; {candidate.short} against {reference_state} {reference.short}")
        step = Step(len(outcome.steps) + 1, candidate, reference, reference_state, UNDECIDABLE, remaining_before=left)
        try:
            step.changes = comparer.compare(reference, candidate, list(steps), settled_by(steps, reference_state))
        except Unbuildable as failure:
            step.outcome, step.reference, step.reference_state = SKIPPED, None, None
            step.note = "does not build:\n" + "\n".join(failure.tail)
        else:
            state, why = decide(step.changes, steps, reference_state)
            step.outcome, step.note = (state, None) if state else (UNDECIDABLE, why)
        outcome.steps.append(step)
        on_step(outcome)
        progress(f"step {step.number}: {candidate.short} is {step.outcome}")
        if step.outcome == GOOD:
            span.lo = index
        elif step.outcome == BAD:
            span.hi = index
        else:
            span.skipped.add(index)
    in_between = [path[i] for i in range(span.lo + 1, span.hi)]       # all skipped
    if in_between:
        outcome.candidates = [*in_between, path[span.hi]]
        return outcome
    outcome.culprit = path[span.hi]
    progress(f"culprit {outcome.culprit.short}; remainder check against {commit_at(span.lo).short}")
    outcome.remainder = check_remainder(comparer, outcome, commit_at(span.lo), profile=profile)
    return outcome


def check_remainder(comparer: Comparer, outcome: Outcome, before: Commit, *, profile: bool = False) -> Remainder:
    """The last good commit before the culprit against the culprit (unless profiled, a step that
    measured exactly that is reused): the share of each moved test's endpoint change this commit
    explains."""
    reused = next((s for s in outcome.steps if s.reference == before and s.candidate == outcome.culprit
                   and s.outcome in (GOOD, BAD)), None)
    steps = outcome.endpoints.moved
    changes = reused.changes if reused and not profile else comparer.compare(
        before, outcome.culprit, list(steps), settled_by(steps, GOOD), profile=profile)
    explained, at_most = {}, {}
    for test, step in steps.items():
        change = changes.get(test)
        measured = change is not None and change.measured
        explained[test] = _share(change.delta_pct, step) if measured else None
        far = (change.ci_high_pct if step > 1 else change.ci_low_pct) if measured else None
        at_most[test] = _share(far, step) if measured else None
    return Remainder(before, changes, explained, at_most)


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
