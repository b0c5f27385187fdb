"""The closed loop (#34): a work item's regression or improvement, or a change point of a branch's
history, confirmed, then bisected by the fleet's agents, and the culprit reported — with no one in
the loop. The one place for the concept; the collector calls it at four moments
(redline/fleet/collector.py):

  `trigger`        a work item of a push or pull request is complete and a test moved on it (after
                   false-discovery control): a bisection is admitted (`admit`: opened, or queued,
                   or refused, with one line for the work item's comment: the queue is full, a
                   range that is not one repository's git commits)
  `work_complete`  a work item of the loop is complete (its `bisection` field names the bisection),
                   or the work item that opened one: the bisection advances
  `tick`           periodically (every LOOP_TICK_S in the collector's loop, and at its start): what
                   time alone changes — stalled platforms, agent time freed, queued ones opened
  `history_check`  a push's work item (one with a `branch`) is stored: `redline history`'s detector
                   runs over the branch's series of its tests in the collector's store
                   (redline.fleet.branch_history); each change point not decided on at an earlier
                   check whose two builds around it (the heads of the pushes before and after it)
                   are git commits of one repository is opened as a bisection, GOOD the build before,
                   BAD the build after, on the tests and metric that changed there — unless a
                   bisection's range (a push's own, or another) holds it already. What each check
                   decided is recorded in the store, so a second look or a restart opens nothing new.

Both triggers open through `open` (an `Opening`: range, tests, metric, platform, the work item whose
sides and settings the pairs take, and the origin), which walks the range and calls `admit`, the one
admission path (cap, queue, agent time: redline.fleet.admission); the state and the report are
shared; the report's heading says what opened it.

**A bisection is a store session** of kind `bisect` with two documents: `bisection` (what
`redline bisect` stores: the outcome so far and the context; the report is rendered from it by
redline/output/bisect_report.py) and `fleet_bisection` (the coordinator's state: the range, the tests
followed, the metric and how it is measured, the platform, k, and every measured pair of commits —
or counted commit — with its work item and its answer). Nothing of it lives in the collector's
memory.

**Each measurement is fleet work.** A pair (reference, candidate) of commits is one work item:
`git:REPO@reference` as baseline, `git:REPO@candidate` as comparison, one job per followed test,
on the bisection's platform, with the original work item's settings. So it goes through
everything a work item does: the agents' build caches, XAUTOCLAIM of a killed agent's job,
retries and dead letters, the collector storing each job once. The pair's answer is its runs'
change of the metric per test (redline.bisect.measure.timed_changes); a pair whose jobs died is
"does not build or measure", with the error, and is not queued again.

**How it advances: by replaying the search.** `redline.bisect.search.bisect` is run from the start
with a comparer that answers from the stored pairs (`StoredAnswers`) and raises `Pending` with the
pairs it has no answer for. The search is deterministic given its answers, so each replay reaches
the same point and stops at the first thing not measured yet: the endpoint pair (the
confirmation: GOOD against BAD again, on the moved tests — only if the change is seen again, i.e.
the search finds moved tests, does it go on), then each round's k commits (k = the platform's live
agents when the bisection opened, fixed for it: the planner's rounds split the range into k + 1
parts), then the culprit's own change — profiled (the search is replayed with `profile=True`, as
`redline bisect --profile` runs it), so it is a pair of its own (`pair_key(..., profiled=True)`),
never the unprofiled answer of a step or of the confirmation of the same two commits. Pending
pairs become work items, recorded in the state
before they are enqueued (a restart between the two enqueues the same work id: `FleetQueue.submit`
skips a work item Redis already holds). An answer is recorded once per pair: a work item complete
twice (a replayed side effect) changes nothing.

Limits: at most `max_steps` work items (pairs, counted commits) per bisection (the confirmation
included); past it the bisection ends with one line. Per repository (redline.fleet.admission, `admit` — the one admission
path, for any trigger): at most `max_concurrent` bisections hold a slot; a change past it is
`queued` (a store session like an open one, opened in arrival order when a slot frees: a bisection
ends or stalls, the tick), at most `max_queued` of them (beyond: refused, one line). The agent time
spent on the repository's pairs over 24 hours (`Fleet.agent_seconds` of each pair's work item,
recorded with its answer) at `agent_time_s`: no bisection opens and none enqueues new pairs — it is
`waiting` and the tick resumes it when the window frees (at most 24 hours: waiting, not ending, so
the pairs measured are not thrown away). A bisection whose platform has had no live agent for
`stall_after_s` is `stalled`: no slot, its work items left in the stream; it resumes when an agent
of the platform is back (the tick) or completes its work item. The stages: queued → confirming →
bisecting → checking → reported / not reproduced / failed, with waiting and stalled in between.

**The culprit's own change names the moved functions.** Its work item alone has `profile` on: each
side gets one profiled run after its measured ones (the measured runs are what they would be
without it). The agents ship the profiled runs' folded stacks, bounded (redline.fleet.profiles,
checked by redline.fleet.entries); the collector keeps them as the runs' folded files; `answer_of`
computes the moved symbols and the differential flame graph (in the store's `bisect-ID`
artifacts, where `redline bisect` keeps it) with redline.analysis.comparison.profile_differences,
or records why a test has none (`profile_notes`). The comment lists them, each function's name
(an agent's text) quoted, with the flame graph's path and the `redline report` command that
embeds it, or one line per test saying why there are none.

A round's step carries its rule as job data (`step_rule`: the search's half-way points, directions,
the endpoints' ratios, which end it is measured against, the metric; checked by
redline.fleet.entries): the agent adds runs while the candidate's interval straddles the half-way
point, as `redline bisect` does on one machine (redline.fleet.execution.step_rule_runs). The timed
confirmation and culprit's own change follow compare's adaptive rule.

**Counted where the tests can be counted** (`measuring`, `--bisect-measure`, default auto). When
every followed test can be counted (`timed_because` finds nothing callgrind does not see or run:
redline.analysis.gate.timed_reasons), the loop measures as `redline bisect --measure instructions`
does, with the same comparer: redline.bisect.measure.CountedComparer over `StoredCounts`, a
CommitCounter that answers from the counts stored in the state and raises `Pending` with `CountAsk`s
for what is not counted yet (the replay of StoredAnswers, for counts). The confirmation is one
counted work item, GOOD and BAD interleaved by `endpoint_runs` runs per side on one agent, deciding
on instructions per op; its τ sets each test's step tolerance and its request count per connection
goes into every later job of the test (the work item's `window_requests`). Each later commit is a
work item of one side, the commit counted by one run, compared with the counts of GOOD or BAD; the
culprit's own change is one more counted work item (the two commits interleaved, one run each, with
their profile). Counted work lives under keys of its own
(`counted:…`) beside the timed pairs, recorded before it is enqueued, answered once, like them. If
the counted confirmation does not see the change (its effect lives where counts do not look:
system calls, waiting, memory latency), sees it too small for one-run steps, or cannot count (its
jobs died), the bisection goes on timed from a timed confirmation (`_fall_back`; with
--bisect-measure instructions it ends "not reproduced"); the comment says why in one line. Tests
counts cannot see are timed from the start.

A counted own change is profiled like a timed one, by callgrind's call graph: its counted work item
has `profile` on, and `counted_answer_of` keeps the moved symbols and the flame graph beside the
counts (`profile_answer`).

What is not here (docs/fleet.md "The closed loop"): a wider range than the two builds around a
history change point (a slow drift whose change point falls between two builds that differ by less
than the confirmation can see is "not reproduced").
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Protocol

from redline.analysis.comparison import (BASELINE, COMPARISON, TestComparison, looks_confidence,
                                         measured_runs_by_test, profile_differences)
from redline.analysis.counted import MIN_RUNS as COUNTED_MIN_RUNS
from redline.analysis.stats import Verdict
from redline.bisect import search
from redline.bisect.measure import DEFAULT_METRIC, Count, Counted, CountedComparer, failed_runs_note, timed_changes
from redline.bisect.planner import rounds_needed
from redline.bisect.search import Answer, Ask, Change, Commit, Outcome, Settled, StepRule, Unbuildable
from redline.core import metrics
from redline.core.errors import RunError, UsageError
from redline.core.numbers import format_duration
from redline.core.run import Run
from redline.engine.job import Job, JobResolver, SideSpec
from redline.fleet import branch_history, work as fleet_work
from redline.fleet.admission import (ACTIVE_STAGES, CLOSED_STAGES, DEFAULT_MAX_QUEUED, DEFAULT_STALL_AFTER_S, QUEUED,
                                     STALLED, WAITING, Admission, Limits, ordinal)
from redline.output.bisect_report import report_markdown
from redline.output.markdown_text import literal
from redline.store.results import Store
from redline.system import machine

STATE = "fleet_bisection"         # the coordinator's document in the bisection's session
DOCUMENT = "bisection"            # the report's document (as `redline bisect` stores it)
PREFERRED_METRIC = "server_cpu_us_per_op"     # redline bisect's default: the least moved by a noisy neighbour
DEFAULT_MAX_CONCURRENT = 2
DEFAULT_MAX_STEPS = 24
MEASURES = ("auto", metrics.TIME, metrics.INSTRUCTIONS)     # --bisect-measure
DEFAULT_MEASURE = "auto"
COUNTED = "counted:"              # the key prefix of counted work in a bisection's pairs and answers
COUNTED_ENDPOINT_RUNS = 5         # runs per side of the counted confirmation at most (redline bisect's default)


class Pending(Exception):
    """The search asked for pairs (reference, candidate) not measured yet — `profiled`: the culprit's
    own change, asked with its profile — or (counted) commits not counted yet."""

    def __init__(self, pairs: list[tuple[Commit, Commit]], rules: dict[str, StepRule] | None = None, *,
                 profiled: bool = False, counts: list[CountAsk] | None = None):
        super().__init__(f"{len(pairs) + len(counts or [])} pairs or counts not measured yet")
        self.pairs, self.rules = pairs, rules or {}       # pair key → the step's rule (round steps)
        self.profiled = profiled
        self.counts = counts or []                        # counted work (StoredCounts)


def pair_key(reference: Commit | str, candidate: Commit | str, *, profiled: bool = False) -> str:
    """A measured pair's key; the profiled own change of a culprit is a pair of its own (the same
    commits measured as a step or as the confirmation were not profiled)."""
    sha = lambda c: c if isinstance(c, str) else c.sha     # noqa: E731
    return f"{sha(reference)}..{sha(candidate)}" + ("+profile" if profiled else "")


class StoredAnswers:
    """redline.bisect.search.Comparer over the answers stored so far: what is not measured yet is
    `Pending` (a round: every missing pair of it at once)."""

    def __init__(self, answers: dict[str, dict]):
        self.answers = answers

    def _answer(self, reference: Commit, candidate: Commit, *, profiled: bool = False) -> Answer | None:
        stored = self.answers.get(pair_key(reference, candidate, profiled=profiled))
        if stored is None:
            return None
        if stored.get("unbuildable") is not None:
            return Answer(unbuildable=list(stored["unbuildable"]))
        return Answer({test: Change(**change) for test, change in stored["changes"].items()})

    def compare(self, reference: Commit, candidate: Commit, tests: list[str], settled: Settled, *,
                profile: bool = False) -> dict[str, Change]:
        answer = self._answer(reference, candidate, profiled=profile)
        if answer is None:
            raise Pending([(reference, candidate)], profiled=profile)
        if answer.unbuildable is not None:
            raise Unbuildable(candidate, answer.unbuildable)
        return {test: change for test, change in answer.changes.items() if test in tests}

    def measure(self, asks: list[Ask], tests: list[str]) -> list[Answer]:
        answers = [self._answer(ask.reference, ask.candidate) for ask in asks]
        missing = [ask for ask, answer in zip(asks, answers) if answer is None]
        if missing:
            raise Pending([(ask.reference, ask.candidate) for ask in missing],
                          {pair_key(ask.reference, ask.candidate): ask.settled for ask in missing
                           if isinstance(ask.settled, StepRule)})
        return answers


def answer_of(runs: list[Run], dead: list[tuple[str, str, str]], *, metric: str, runs_per_side: int,
              max_runs: int, artifacts: Path | None = None) -> dict:
    """A pair's stored answer from its work item: the change of `metric` per test, or — when a job
    of it died (a side does not build, its runs failed on every attempt) — why, as a skipped step.
    With `artifacts` (the culprit's own change, profiled): each test's moved symbols and
    differential flame graph (written there) from its profiled runs, as `redline bisect --profile`
    has them (redline.analysis.comparison.profile_differences), and for a test without them why
    (`profile_notes`); a profile that cannot be drawn never costs the pair its answer."""
    if dead:
        return {"changes": {}, "unbuildable": [f"{job_id}: {' '.join((error or '').split())[:600]}"
                                               for job_id, _, error in dead]}
    confidence = looks_confidence(runs_per_side, max(runs_per_side, max_runs))
    failed = None
    try:
        changes = timed_changes(runs, metric, {}, confidence=confidence, artifacts=artifacts)
    except (RunError, UsageError) as exc:            # inferno missing or failing, an unreadable folded file
        changes, failed = timed_changes(runs, metric, {}, confidence=confidence), str(exc)
    answer = {"changes": {test: asdict(change) for test, change in changes.items()}, "unbuildable": None}
    if artifacts is not None:
        answer["profile_notes"] = {test: profile_gap(runs, test, failed)
                                   for test, change in changes.items() if not change.moved_symbols}
    return answer


def profile_gap(runs: list[Run], test: str, drawing_failed: str | None = None) -> dict:
    """Why a profiled pair's test has no moved symbols: {"why": redline's sentence, "detail": the
    run's own error (an agent's text) or None}; `drawing_failed`: the error that kept the
    differential flame graph from being drawn."""
    if drawing_failed:
        return {"why": "the differential flame graph could not be drawn", "detail": drawing_failed}
    profiled = {run.side: run for run in runs if run.purpose == "profile" and run.key == test}
    missing = [side for side in (BASELINE, COMPARISON) if side not in profiled]
    if missing:
        return {"why": f"no profiled run of the {' and the '.join(missing)} came back", "detail": None}
    for side in (BASELINE, COMPARISON):
        run = profiled[side]
        if run.status != "ok":
            return {"why": f"the {side}'s profiled run {run.status}", "detail": run.error}
        if not run.profile:
            return {"why": f"the {side}'s profiled run came without its stacks", "detail": None}
        if not run.profile.get("samples"):
            return {"why": f"the {side}'s profile has no samples", "detail": None}
    return {"why": "no function's share of the server's CPU differs between the two profiles", "detail": None}


# -- counted: the confirmation, the steps and the culprit's own change under callgrind --------------
@dataclass(frozen=True)
class CountAsk:
    """Counted work the search waits for: `commits` counted by `runs` runs each, as one work item —
    one commit alone (a step: one run), or two interleaved on one agent, the first as baseline (the
    confirmation: GOOD and BAD; a profiled own change: one run each)."""

    commits: tuple[Commit, ...]
    runs: int
    purpose: str                      # confirmation | step | own change
    profile: bool = False

    @property
    def key(self) -> str:
        return COUNTED + "..".join(c.sha for c in self.commits) + (":profile" if self.profile else "")


class StoredCounts:
    """redline.bisect.measure.CommitCounter over the counts stored so far, for the CountedComparer a
    replay builds: what is not counted yet is `Pending` (a round: every commit of it at once); a
    work item whose jobs died is a commit that does not build (a round's: its answer; else
    Unbuildable)."""

    def __init__(self, answers: dict[str, dict], good: Commit, bad: Commit):
        self.answers, self.ends = answers, (good.sha, bad.sha)

    def count(self, commits: list[Commit], tests: list[str], *, runs: int, profile: bool = False,
              apart: bool = False) -> Counted:
        if apart:
            asks = [CountAsk((commit,), runs, "step") for commit in commits]
        else:
            ends = tuple(c.sha for c in commits) == self.ends and not profile
            asks = [CountAsk(tuple(commits), runs, "confirmation" if ends else "own change", profile)]
        missing = [ask for ask in asks if ask.key not in self.answers]
        if missing:
            raise Pending([], counts=missing)
        counted = Counted()
        for ask in asks:
            answer = self.answers[ask.key]
            if answer.get("unbuildable") is not None:
                if not apart:
                    raise Unbuildable(ask.commits[-1], list(answer["unbuildable"]))
                counted.unbuildable[ask.commits[0].sha] = list(answer["unbuildable"])
                continue
            for sha, by_test in answer["counts"].items():
                for test, counts in by_test.items():
                    if test in tests:
                        counted.counts[(sha, test)] = [Count(**count) for count in counts]
            for sha, by_test in answer["failures"].items():
                counted.failures.update({(sha, test): why for test, why in by_test.items() if test in tests})
            counted.profiles.update({test: tuple(found) for test, found in (answer.get("profiles") or {}).items()
                                     if test in tests})
        return counted


def counted_answer_of(runs: list[Run], dead: list[tuple[str, str, str]], *, metric: str, reference: str | None,
                      candidate: str, artifacts: Path | None = None) -> dict:
    """A counted work item's stored answer: each commit's counts of `metric` per test (its baseline
    side is `reference`, its comparison or only side `candidate`), why runs failed, the request count
    per connection each test's runs sent (the confirmation's is carried to every later job of the
    test); or — when a job of it died — why, as a commit that does not build or count."""
    if dead:
        return {"counts": {}, "failures": {}, "requests": {},
                "unbuildable": [f"{job_id}: {' '.join((error or '').split())[:600]}" for job_id, _, error in dead]}
    sha_of = {"baseline": reference, "comparison": candidate, None: candidate}
    counts: dict[str, dict[str, list[dict]]] = {}
    failures: dict[str, dict[str, str]] = {}
    requests: dict[str, int] = {}
    for key, measured in measured_runs_by_test(runs).items():
        for run in measured:
            value = run.metrics.get(metric) if run.status == "ok" else None
            if value and sha_of.get(run.side):
                counts.setdefault(sha_of[run.side], {}).setdefault(key, []).append(
                    {"value": value, "run_id": run.run_id, "state": run.state})
                fixed = (run.facts.get("instructions") or {}).get("requests_per_connection")
                if fixed:
                    requests.setdefault(run.test, int(fixed))
        for side, sha in sha_of.items():
            failed = failed_runs_note([run for run in measured if run.side == side])
            if failed and sha:
                failures.setdefault(sha, {})[key] = failed
    answer = {"counts": counts, "failures": failures, "requests": requests, "unbuildable": None}
    if artifacts is not None:          # the culprit's own change, profiled by callgrind's call graph
        answer.update(profile_answer(runs, artifacts, list(measured_runs_by_test(runs))))
    return answer


def profile_answer(runs: list[Run], artifacts: Path, tests: list[str]) -> dict:
    """A counted own change's profile part: per test the moved symbols and the differential flame
    graph (`profiles`), or why there are none (`profile_notes`), as answer_of keeps them for a timed
    one; a flame graph that cannot be drawn never costs the counts."""
    try:
        found, failed = profile_differences(runs, artifacts), None
    except (RunError, UsageError) as exc:            # inferno missing or failing, an unreadable folded file
        found, failed = {}, str(exc)
    return {"profiles": {test: [moved, svg] for test, (moved, svg) in found.items()},
            "profile_notes": {test: profile_gap(runs, test, failed)
                              for test in tests if not (found.get(test) or [None])[0]}}


def timed_because(tests: list[list[str]], topologies: list[str]) -> str | None:
    """Why the followed tests are measured by time, in one line (None: every one can be counted):
    what callgrind does not see or cannot run for one of them (redline.analysis.gate.timed_reasons:
    pipelining, large values, io-threads, clusters, replicas, several clients, roles, waiting, a
    suite that asks for time), or a suite file the collector cannot read."""
    from redline.analysis.gate import timed_reasons
    from redline.topology import DEFAULT_TOPOLOGY, parse_topology
    resolver = JobResolver()
    for suite, name in tests:
        try:
            test = resolver.test(Job(suite=suite, test=name, sides=[]))
        except Exception as exc:        # noqa: BLE001 — a suite not readable here is measured as it always was
            return f"the suite file of {name} cannot be read here to tell whether counts see it ({exc})"
        for topology in topologies:
            reasons = timed_reasons(test, parse_topology(topology), [])
            if reasons:
                where = "" if topology == DEFAULT_TOPOLOGY else f"@{topology}"
                return f"counts cannot see {name}{where} ({reasons[0]})"
    return None


def measuring(measure: str, metric: str, tests: list[list[str]], topologies: list[str], settings: dict) -> dict:
    """How a bisection opened now measures (its state's fields): counted when `measure` allows it
    and every followed test can be counted, else timed; the timed metric is kept for a fall-back."""
    known = metrics.BY_NAME.get(metric)
    counted_metric = metric if known is not None and known.measure == metrics.INSTRUCTIONS else None
    timed_metric = PREFERRED_METRIC if counted_metric else metric
    timed_settings = {**settings, "window_requests": {},
                      "measure": None if settings.get("measure") == metrics.INSTRUCTIONS else settings.get("measure")}
    fields = {"measure": metrics.TIME, "metric": timed_metric, "timed_metric": timed_metric, "settings": timed_settings,
              "timed_because": None}
    if measure == metrics.TIME:
        return fields
    why = timed_because(tests, topologies)
    if why is not None:
        return {**fields, "timed_because": why}
    counted_metric = counted_metric or DEFAULT_METRIC[metrics.INSTRUCTIONS]
    return {**fields, "measure": metrics.INSTRUCTIONS, "metric": counted_metric, "counted_metric": counted_metric,
            "endpoint_runs": max(COUNTED_MIN_RUNS, min(settings["runs"], COUNTED_ENDPOINT_RUNS)),
            "fall_back": measure == "auto"}


# -- what the coordinator needs of the fleet -----------------------------------------------------
class Fleet(Protocol):
    def submit(self, item: fleet_work.WorkItem) -> None:
        """Enqueue the work item unless Redis holds it already (same work id)."""

    def live_agents(self, platform: str) -> int:
        """Agents of the platform alive now."""

    def results(self, work_id: str) -> tuple[list[Run], list[tuple[str, str, str]]]:
        """The stored runs of a complete work item and its dead jobs (job id, platform, error)."""

    def agent_seconds(self, work_id: str) -> float:
        """The wall time agents spent on a complete work item's jobs (redline.fleet.admission's budget)."""

    def mirror(self, state: dict) -> None:
        """The bisection's stage where `redline fleet status` reads it."""

    def publish(self, state: dict, markdown: str, *, again: bool) -> str | None:
        """The report as a comment (the comments stream; GitHub when the state names a pull request
        and a token is given); `again`: tried before, look for it first. Returns where it went."""


@dataclass
class Decision:
    """What `trigger` decided for a complete work item: the line for its comment (None: nothing to
    say) and the bisection it opened (None: none)."""

    line: str | None
    bisection: int | None = None


@dataclass
class Opening:
    """What a bisection is opened on, whichever trigger found the change: the range as the targets
    name it, the tests and metric followed, the platform, and the work item whose sides (variant,
    configuration) and run settings its pairs take."""

    repository: str
    good_ref: str
    bad_ref: str
    keys: list[str]               # test keys followed
    tests: list[list[str]]        # [suite reference, test name] of each
    topologies: list[str]
    metric: str
    platform: str
    work: "WorkLike"
    origin: dict                  # {"kind": "verdict"} or a history change point's (redline.fleet.branch_history)


@dataclass
class Moved:
    metric: str
    tests: list[str]              # test keys
    platform: str


def moved_by(comparisons: list[TestComparison], platforms: list[str]) -> Moved | None:
    """The tests whose verdict on one metric survived false-discovery control as a regression or an
    improvement, on one platform: server CPU per op when it moved, else the first metric that did."""
    moved = [c for c in comparisons if c.verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT)]
    if not moved:
        return None
    metrics = [c.metric for c in moved]
    metric = PREFERRED_METRIC if PREFERRED_METRIC in metrics else metrics[0]
    found: dict[str, list[str]] = {}
    for c in moved:
        if c.metric != metric:
            continue
        key, _, platform = c.test.partition(" on ")         # collector.verdict_label with several platforms
        platform = platform or (platforms[0] if platforms else "")
        found.setdefault(platform, []).append(key)
    platform = sorted(found)[0]
    return Moved(metric, sorted(set(found[platform])), platform)


def git_range(baseline: str, comparison: str) -> tuple[str, str, str] | None:
    """(repository as the targets name it, GOOD, BAD) when both sides are git: targets of one
    repository. The collector walks its ancestry path there: it needs the repository at the path
    the agents see it (one machine, or the same path on the collector's)."""
    def split(spec: str):
        if not spec.startswith("git:") or "@" not in spec:
            return None
        repo, _, ref = spec[4:].rpartition("@")
        return (repo, ref) if repo and ref else None
    a, b = split(baseline), split(comparison)
    if a is None or b is None or a[0] != b[0]:
        return None
    return a[0], a[1], b[1]


class Loop:
    """The bisection coordinator over a store and a fleet (see the module docstring)."""

    def __init__(self, store: Store, fleet: Fleet, *, max_concurrent: int = DEFAULT_MAX_CONCURRENT,
                 max_steps: int = DEFAULT_MAX_STEPS, max_queued: int = DEFAULT_MAX_QUEUED,
                 agent_time_s: float | None = None, stall_after_s: float = DEFAULT_STALL_AFTER_S,
                 say: Callable[..., None] = lambda event, **fields: None,
                 path_of: Callable[[Path, str, str], tuple[Commit, list[Commit]]] | None = None,
                 clock: Callable[[], float] = time.time, history: bool = True, measure: str = DEFAULT_MEASURE):
        if max_steps < 2:
            raise ValueError(f"max_steps must be at least 2 (the confirmation and one step), got {max_steps}")
        if measure not in MEASURES:
            raise ValueError(f"measure must be one of {', '.join(MEASURES)}, got {measure!r}")
        self.limits = Limits(max_concurrent=max_concurrent, max_queued=max_queued, agent_time_s=agent_time_s,
                             stall_after_s=stall_after_s)
        self.admission = Admission(self.limits)
        self.store, self.fleet, self.say, self.clock = store, fleet, say, clock
        self.max_concurrent, self.max_steps, self.measure = max_concurrent, max_steps, measure
        self.history = history            # `redline history` change points of a push's branch trigger it too
        self.path_of = path_of or (lambda repo, good, bad: search.ancestry_path(repo, good, bad))

    # -- state ------------------------------------------------------------------------------
    def states(self) -> list[tuple[int, dict]]:
        return self.store.documents_named(STATE)

    def state(self, bisection: int) -> dict:
        state = self.store.session_document(bisection, STATE)
        if state is None:
            raise KeyError(f"no fleet bisection {bisection}")
        return state

    def _save(self, state: dict) -> None:
        state["updated_at"] = self.clock()
        self.store.save_session_document(state["bisection"], STATE, state)
        self.fleet.mirror(state)

    def of_work(self, work_id: str) -> int | None:
        """The bisection opened by the work item `work_id`'s own verdict."""
        return next((bisection for bisection, state in self.states()
                     if state["work_id"] == work_id and origin_kind(state) == "verdict"), None)

    # -- opening ----------------------------------------------------------------------------
    def trigger(self, work: "WorkLike", comparisons: list[TestComparison], records: list[Run]) -> Decision:
        """A complete work item: a bisection through `open` (opened, queued or refused) when a push's
        or pull request's change moved a test and it names a git range; idempotent (the same work
        item again: the same bisection)."""
        if work.source not in ("push", "pull_request"):
            return Decision(None)
        moved = moved_by(comparisons, work.platforms)
        if moved is None:
            return Decision(None)
        known = self.of_work(work.work_id)
        if known is not None:
            return Decision(self._line(self.state(known)), known)
        if self.max_concurrent == 0:
            return Decision("Not bisected: the collector's loop is off (--bisect-max-concurrent 0).")
        found = git_range(work.baseline, work.comparison)
        if found is None:
            return Decision("Not bisected: the two sides are not git commits of one repository.")
        repo, good_ref, bad_ref = found
        suites = {run.key: (fleet_work.suite_of(run), run.topology) for run in records if run.suite_file}
        tests = [[suites[key][0], key.split("@", 1)[0]] for key in moved.tests if key in suites]
        if not tests:
            return Decision("Not bisected: the stored runs of the moved tests do not name their suite files.")
        topologies = sorted({suites[key][1] for key in moved.tests if key in suites}) or ["oss-standalone"]
        return self.open(Opening(repository=repo, good_ref=good_ref, bad_ref=bad_ref, keys=moved.tests, tests=tests,
                                 topologies=topologies, metric=moved.metric, platform=moved.platform, work=work,
                                 origin={"kind": "verdict"}))

    def open(self, opening: Opening) -> Decision:
        """A bisection on `opening`, whichever trigger found the change: the range's ancestry path,
        then `admit` (opened now, queued, or refused with one line). Its confirmation (GOOD against
        BAD again) is the first pair `advance` asks for: only a confirmed change goes on."""
        work, repo = opening.work, opening.repository
        try:
            good, path = self.path_of(Path(repo).expanduser(), opening.good_ref, opening.bad_ref)
        except UsageError as exc:
            self.say("bisection not opened", work=work.work_id, reason=str(exc))
            return Decision(f"Not bisected: {exc}.")
        sides = {side.name: side for side in work.sides}
        state = {
            "format": 1, "work_id": work.work_id, "repository": repo,
            "github": work.github, "platform": opening.platform, "metric": opening.metric, "keys": opening.keys,
            "tests": opening.tests, "topologies": opening.topologies,
            "sides": {name: side.to_json() for name, side in sides.items()},
            "settings": dict(work.settings) or {"runs": work.runs, "max_runs": work.max_runs},
            "good": asdict(good), "path": [asdict(c) for c in path], "good_ref": opening.good_ref,
            "bad_ref": opening.bad_ref, "origin": opening.origin,
        }
        state.update(measuring(self.measure, opening.metric, opening.tests, opening.topologies,
                               state["settings"]))          # counted or timed
        return self.admit(state)

    def admit(self, state: dict) -> Decision:
        """The one admission path of every trigger: a new bisection's state (what it measures: the
        range, tests, metric, platform, sides, settings) through its repository's cap, queue and
        agent time (redline.fleet.admission): opened now, queued (a store session whose stage is
        `queued`, opened in arrival order when a slot frees), or refused with one line and nothing
        stored. The collector starts an opened one with `work_complete` of the work item that
        opened it (the history check: at once); a queued one starts when it is opened."""
        now = self.clock()
        admitted = self.admission.admit([s for _, s in self.states()], state["repository"], now)
        if admitted.verdict == "refuse":
            self.say("bisection not opened", work=state["work_id"], reason=admitted.line)
            return Decision(admitted.line)
        bisection = self.store.begin_session(kind="bisect", argv=["fleet", "bisect", state["work_id"]],
                                             machine=machine.facts())
        state.update({
            "bisection": bisection, "per_round": max(1, self.fleet.live_agents(state["platform"])),
            "max_steps": self.max_steps, "stage": QUEUED, "round": 0, "pairs": {}, "answers": {},
            "note": admitted.why or None, "culprit": None, "comment": None, "published": None,
            "publish_attempts": 0, "started_at": now, "queued_at": now,
            "position": admitted.position, "queue_length": admitted.length})
        state["rounds"] = rounds_needed(len(state["path"]) - 1, state["per_round"])
        self.store.save_session_document(bisection, DOCUMENT, self._context(state))
        if admitted.verdict == "open":
            self._open(state)
        else:
            self._save(state)
            self._positions(state["repository"])
            self.say("bisection queued", bisection=bisection, work=state["work_id"], position=admitted.position,
                     why=admitted.why)
        return Decision(self._line(self.state(bisection)), bisection)

    def _open(self, state: dict) -> None:
        """A queued (or just admitted) bisection opened: k = the platform's live agents now."""
        state["per_round"] = max(1, self.fleet.live_agents(state["platform"]))
        state["rounds"] = rounds_needed(len(state["path"]) - 1, state["per_round"])
        state.update(stage="confirming", note=None, position=0, queue_length=0, opened_at=self.clock())
        self.store.save_session_document(state["bisection"], DOCUMENT, self._context(state))
        self._save(state)
        self.say("bisection opened", bisection=state["bisection"], work=state["work_id"], origin=origin_kind(state),
                 platform=state["platform"], per_round=state["per_round"], commits=len(state["path"]),
                 tests=",".join(state["keys"]), metric=state["metric"])

    def _open_queued(self, repository: str) -> None:
        """The repository's oldest queued bisections opened and started while a slot and agent time
        allow (a bisection ended, one stalled, the periodic tick); the others' positions updated."""
        while True:
            states = [s for _, s in self.states()]
            waiting = self.admission.queue(states, repository)
            if not waiting or not self.admission.may_open(states, repository, self.clock()):
                break
            self._open(waiting[0])
            self.advance(waiting[0]["bisection"])
        self._positions(repository)

    def _positions(self, repository: str) -> None:
        """Each queued bisection of the repository knows its place (for `fleet status`)."""
        states = [s for _, s in self.states()]
        waiting = self.admission.queue(states, repository)
        for position, state in enumerate(waiting, 1):
            if (state.get("position"), state.get("queue_length")) != (position, len(waiting)):
                state["position"], state["queue_length"] = position, len(waiting)
                self._save(state)

    def _line(self, state: dict) -> str:
        """The line for the work item's comment: where its bisection is."""
        bisection = state["bisection"]
        if state["stage"] != QUEUED:
            return self._opened_line(bisection)
        return (f"A change moved: it is queued for a fleet bisection (fleet bisection {bisection}, "
                f"{ordinal(state['position'])} of {state['queue_length']} waiting for this repository: "
                f"{state['note']}); it opens when a slot frees, its stage in `redline fleet status`; the culprit "
                f"comes as a comment marked `redline bisection {bisection}`.")

    # -- the second trigger: a change point of a branch's history ---------------------------------
    def checks_history(self, work: "WorkLike") -> bool:
        """Whether the complete work item `work` is a push whose branch's history is checked."""
        return self.history and self.max_concurrent > 0 and work.source == "push" and bool(work.branch)

    def history_check(self, work: "WorkLike") -> list[int]:
        """After a push's work item is stored: the change points of its branch's series (redline.fleet.
        branch_history, `redline history`'s detector) not decided on at an earlier check are each
        opened as a bisection (the push before it GOOD, the push after it BAD), or refused with one log
        line; what was decided is recorded in the store. The bisections this check opened (now or
        before a restart) are advanced. Idempotent. Returns the bisections it opened now."""
        if not self.checks_history(work):
            return []
        seen, opened = branch_history.seen(self.store), []
        for found in branch_history.change_points(self.store, work, preferred=PREFERRED_METRIC, say=self.say):
            if found.key in seen:
                continue
            decision = self._open_change_point(found, work.work_id)
            branch_history.record(self.store, work.work_id, [{"key": found.key, "bisection": decision.bisection,
                                                              "line": decision.line}])
            if decision.bisection is not None:
                opened.append(decision.bisection)
        for bisection, state in self.states():
            if state.get("origin", {}).get("checked_by") == work.work_id:
                self.advance(bisection)
        return opened

    def _open_change_point(self, found: "branch_history.Found", checked_by: str) -> Decision:
        where = {"work": checked_by, "change_point": found.key}
        span = git_range(found.before.comparison, found.after.comparison)
        if span is None:
            self.say("history change point not bisected: its builds are not git commits of one repository", **where)
            return Decision("not git commits of one repository")
        explained = self.covering(*span)
        if explained is not None:
            self.say("history change point already bisected", bisection=explained, **where)
            return Decision(f"inside the range of fleet bisection {explained}")
        repo, good_ref, bad_ref = span
        return self.open(Opening(repository=repo, good_ref=good_ref, bad_ref=bad_ref, keys=found.keys,
                                 tests=found.tests, topologies=found.topologies, metric=found.metric,
                                 platform=found.platform, work=found.after, origin=found.origin(checked_by)))

    def covering(self, repository: str, good_ref: str, bad_ref: str) -> int | None:
        """A bisection of `repository` whose range holds GOOD..BAD (the same range or inside it)."""
        for bisection, state in self.states():
            if state["repository"] != repository:
                continue
            commits = [state["good"]["sha"]] + [c["sha"] for c in state["path"]]
            at = {ref: next((n for n, sha in enumerate(commits) if ref_names(ref, sha)), None)
                  for ref in (good_ref, bad_ref)}
            if None not in at.values() and at[good_ref] < at[bad_ref]:
                return bisection
        return None

    @staticmethod
    def _opened_line(bisection: int) -> str:
        return (f"A change moved: the fleet confirms it and bisects the range (fleet bisection {bisection}, its "
                f"stage in `redline fleet status`); the culprit comes as a comment marked "
                f"`redline bisection {bisection}`.")

    @staticmethod
    def _context(state: dict) -> dict:
        """What the report needs besides the outcome (as redline bisect's)."""
        variant = (state["sides"].get("comparison") or {}).get("variant")
        return {"repository": state["repository"], "metric": state["metric"], "variant": variant or "default",
                "tests": state["keys"], "selection": ["--name", "|".join(f"^{key}$" for key in state["keys"])],
                "store": "", "all_parents": False, "good_ref": state["good_ref"], "bad_ref": state["bad_ref"],
                "measure": state.get("measure"), "fleet": {"work_id": state["work_id"], "platform": state["platform"],
                                           "per_round": state["per_round"]},
                "session": state["bisection"]}

    # -- advancing --------------------------------------------------------------------------
    def work_complete(self, work: "WorkLike") -> None:
        """A complete work item: a pair's answer recorded (once) and its bisection advanced, or the
        bisection a moved work item opened started."""
        if work.bisection:
            bisection = int(work.bisection)
            state = self.state(bisection)
            key = next((k for k, pair in state["pairs"].items() if pair["work_id"] == work.work_id), None)
            if key is None:
                self.say("work item of a bisection it did not ask for, ignored", work=work.work_id, bisection=bisection)
                return
            if key not in state["answers"]:
                runs, dead = self.fleet.results(work.work_id)
                settings, pair = state["settings"], state["pairs"][key]
                artifacts = self._artifacts(state, key)
                state["answers"][key] = (
                    counted_answer_of(runs, dead, metric=state["counted_metric"], reference=pair["reference"],
                                      candidate=pair["candidate"], artifacts=artifacts) if key.startswith(COUNTED) else
                    answer_of(runs, dead, metric=state["metric"], runs_per_side=settings["runs"],
                              max_runs=settings["max_runs"], artifacts=artifacts))
                pair.update(state="failed" if dead else "done", done_at=self.clock(),
                            agent_s=self.fleet.agent_seconds(work.work_id))
                state["no_agents_since"] = None          # an agent of its platform answered: alive
                self._save(state)
            self.advance(bisection)
            return
        opened = self.of_work(work.work_id)
        if opened is not None:
            self.advance(opened)

    def advance(self, bisection: int) -> None:
        """Replay the search over the stored answers: queue what it asks next, or end it."""
        state = self.state(bisection)
        if state["stage"] in CLOSED_STAGES:
            return self._publish(state)
        if state["stage"] == QUEUED:                # it starts when it is opened (`_open_queued`)
            return
        good, path = Commit(**state["good"]), [Commit(**c) for c in state["path"]]
        so_far: list[Outcome] = []
        counted = state.get("measure") == metrics.INSTRUCTIONS
        comparer = StoredAnswers(state["answers"]) if not counted else CountedComparer(
            StoredCounts(state["answers"], good, path[-1]), metric=state["metric"], endpoint_runs=state["endpoint_runs"])
        try:
            outcome = search.bisect(comparer, good, path, state["keys"], per_round=state["per_round"],
                                    on_step=so_far.append, profile=True)
        except Pending as pending:
            self._document(state, so_far[-1] if so_far else None)
            if pending.counts:
                return self._queue_counted(state, pending.counts, so_far[-1] if so_far else None)
            return self._queue(state, pending, so_far[-1] if so_far else None)
        except Unbuildable as failure:
            tail = " ".join(failure.tail[-1:])[:300]
            if counted and not so_far and state.get("fall_back"):
                return self._fall_back(state, f"the counted confirmation did not count "
                                              f"({failure.commit.short}: {tail})")
            return self._end(state, "failed", f"an end of the range does not build or measure "
                                              f"({failure.commit.short}: {tail}); nothing to bisect", None)
        self._document(state, outcome)
        if not outcome.endpoints.moved and counted:
            if state.get("fall_back"):
                return self._fall_back(state, unseen(state["metric"], outcome))
            return self._end(state, "not reproduced", f"{unseen(state['metric'], outcome)}; not bisected "
                                                      "(--bisect-measure instructions)", outcome)
        if not outcome.endpoints.moved:
            verdicts = "; ".join(f"{test} {c.verdict}" for test, c in outcome.endpoints.changes.items()) or "no runs"
            return self._end(state, "not reproduced", f"the confirmation did not see the change again "
                                                      f"({state['metric']}: {verdicts}); not bisected", outcome)
        state["culprit"] = asdict(outcome.culprit) if outcome.culprit else None
        self._end(state, "reported", None, outcome)

    def _artifacts(self, state: dict, key: str) -> Path | None:
        """Where the culprit's own change (the profiled pair) gets its differential flame graph: the
        bisection's artifacts, as `redline bisect --profile` keeps them; None for any other pair."""
        if state["pairs"][key].get("purpose") != "own change":
            return None
        return self.store.artifacts(f"bisect-{state['bisection']}")

    def _document(self, state: dict, outcome: Outcome | None) -> None:
        if outcome is not None:
            self.store.save_session_document(state["bisection"], DOCUMENT, {**self._context(state),
                                                                            **outcome.as_json()})

    def _queue(self, state: dict, pending: Pending, outcome: Outcome | None) -> None:
        good, bad = state["good"]["sha"], state["path"][-1]["sha"]
        pairs, rules, profiled = pending.pairs, pending.rules, pending.profiled
        new = [(r, c) for r, c in pairs if pair_key(r, c, profiled=profiled) not in state["pairs"]]
        if self._held_back(state, len(new), outcome):
            return
        confirming = not profiled and any(pair_key(r, c) == pair_key(good, bad) for r, c in pairs)
        state["stage"] = "confirming" if confirming else ("checking" if profiled else "bisecting")
        purpose = {"confirming": "confirmation", "checking": "own change", "bisecting": "step"}[state["stage"]]
        for reference, candidate in new:
            state["pairs"][pair_key(reference, candidate, profiled=profiled)] = {
                "work_id": fleet_work.new_work_id(), "reference": reference.sha, "candidate": candidate.sha,
                "state": "queued", "round": outcome.rounds if outcome else 0, "purpose": purpose,
                "step_rule": ({**rules[key].as_json(), "metric": state["metric"]}
                              if (key := pair_key(reference, candidate)) in rules else None)}
        self._enqueue(state, [pair_key(r, c, profiled=profiled) for r, c in pairs], outcome, self._work_item)

    def _held_back(self, state: dict, new: int, outcome: Outcome | None) -> bool:
        """Whether `new` more work items may not be enqueued now: past the step cap the bisection
        ends; with the repository's agent time spent it waits (`_wait`)."""
        if len(state["pairs"]) + new > state["max_steps"]:
            self._end(state, "failed", f"the step cap (--bisect-max-steps {state['max_steps']}) is reached "
                                       f"with {len(state['pairs'])} pairs measured; no culprit named", outcome)
            return True
        if new and not self.admission.has_agent_time([s for _, s in self.states()], state["repository"],
                                                     self.clock()):
            self._wait(state)
            return True
        return False

    def _enqueue(self, state: dict, keys: list[str], outcome: Outcome | None,
                 work_item: Callable[[dict, dict], fleet_work.WorkItem]) -> None:
        """The pairs (or counted work) under `keys`, recorded in the state, saved, then each not yet
        answered submitted as a work item (`submit` skips one Redis holds already)."""
        state["round"] = outcome.rounds if outcome else 0
        state["note"] = state["frees_at"] = None            # no longer waiting nor stalled
        state["rounds"] = max(state["round"], rounds_needed(len(state["path"]) - 1, state["per_round"]))
        self._save(state)            # the work ids are recorded before anything is enqueued
        for key in keys:
            pair = state["pairs"][key]
            if pair["state"] == "queued":
                self.fleet.submit(work_item(state, pair))
        self.say("bisection waits", bisection=state["bisection"], stage=state["stage"], round=state["round"],
                 pairs=",".join(state["pairs"][key]["work_id"] for key in keys))

    def _wait(self, state: dict) -> None:
        """The repository's agent time is spent: no new pair is enqueued; `tick` resumes it when the
        window frees (at most WINDOW_S later)."""
        states, now = [s for _, s in self.states()], self.clock()
        note = f"waiting for agent time: {self.admission.agent_time_note(states, state['repository'], now)}"
        frees_at = self.admission.frees_at(states, state["repository"], now)
        if (state["stage"], state.get("frees_at")) != (WAITING, frees_at):
            state.update(stage=WAITING, note=note, frees_at=frees_at)
            self._save(state)
            self.say("bisection waits for agent time", bisection=state["bisection"], frees_at=frees_at)

    def _queue_counted(self, state: dict, asks: list[CountAsk], outcome: Outcome | None) -> None:
        """Counted work as _queue does pairs: each ask a work item (recorded before it is enqueued,
        under its own key; one already recorded is enqueued again under its work id)."""
        new = [ask for ask in asks if ask.key not in state["pairs"]]
        if self._held_back(state, len(new), outcome):
            return
        state["stage"] = {"confirmation": "confirming", "step": "bisecting", "own change": "checking"}[asks[0].purpose]
        for ask in new:
            state["pairs"][ask.key] = {
                "work_id": fleet_work.new_work_id(), "reference": ask.commits[0].sha if len(ask.commits) == 2 else None,
                "candidate": ask.commits[-1].sha, "state": "queued", "round": outcome.rounds if outcome else 0,
                "purpose": ask.purpose, "step_rule": None, "measure": metrics.INSTRUCTIONS, "runs": ask.runs,
                "profile": ask.profile}
        self._enqueue(state, [ask.key for ask in asks], outcome, self._counted_work_item)

    def _counted_work_item(self, state: dict, pair: dict) -> fleet_work.WorkItem:
        """A counted work item: the reference and the candidate interleaved (the confirmation), or the
        candidate alone (a step), under callgrind, `runs` runs each; every job but the
        confirmation's sends the confirmation's request count per connection."""
        repository, sides = state["repository"], state["sides"]

        def side(name: str, sha: str, as_name: str | None) -> SideSpec:
            spec = SideSpec.from_json(sides.get(name) or {"name": name, "target": ""})
            return SideSpec(as_name, f"git:{repository}@{sha}", spec.config, spec.variant)
        confirmation = CountAsk((Commit(state["good"]["sha"]), Commit(state["path"][-1]["sha"])),
                                state["endpoint_runs"], "confirmation").key
        fixed = {} if pair["purpose"] == "confirmation" else dict((state["answers"].get(confirmation) or {}).get(
            "requests") or {})
        two = pair["reference"] is not None
        return fleet_work.WorkItem(
            work_id=pair["work_id"], source="bisect",
            sides=([side("baseline", pair["reference"], "baseline"),
                    side("comparison", pair["candidate"], "comparison")] if two else
                   [side("comparison", pair["candidate"], None)]),
            platforms=[state["platform"]], tests=[tuple(t) for t in state["tests"]], topologies=state["topologies"],
            settings=fleet_work.Settings(**{**state["settings"], "runs": pair["runs"], "max_runs": pair["runs"],
                                            "profile": pair["profile"], "measure": metrics.INSTRUCTIONS,
                                            "window_requests": fixed}),
            bisection=str(state["bisection"]))

    def _fall_back(self, state: dict, why: str) -> None:
        """The counted confirmation did not see the change (or could not count it): the bisection
        goes on timed, from its confirmation, as if it had opened so; the comment says why."""
        state.update(measure=metrics.TIME, metric=state["timed_metric"], timed_because=why)
        self.store.save_session_document(state["bisection"], DOCUMENT, self._context(state))
        self._save(state)
        self.say("bisection measured by time", bisection=state["bisection"], why=why)
        self.advance(state["bisection"])

    def _work_item(self, state: dict, pair: dict) -> fleet_work.WorkItem:
        repository, sides = state["repository"], state["sides"]

        def side(name: str, sha: str) -> SideSpec:
            spec = SideSpec.from_json(sides.get(name) or {"name": name, "target": ""})
            return SideSpec(name, f"git:{repository}@{sha}", spec.config, spec.variant)
        return fleet_work.WorkItem(
            work_id=pair["work_id"], source="bisect",
            sides=[side("baseline", pair["reference"]), side("comparison", pair["candidate"])],
            platforms=[state["platform"]], tests=[tuple(t) for t in state["tests"]], topologies=state["topologies"],
            # the culprit's own change only: one profiled run per side after its measured runs
            settings=fleet_work.Settings(**{**state["settings"], "profile": pair["purpose"] == "own change"}),
            bisection=str(state["bisection"]),
            step_rule=pair.get("step_rule"))

    def _end(self, state: dict, stage: str, note: str | None, outcome: Outcome | None) -> None:
        state["stage"], state["note"], state["ended_at"] = stage, note, self.clock()
        state["comment"] = self._comment(state, outcome)
        self._save(state)
        self.store.finish_session(state["bisection"], "finished" if stage == "reported" else "failed")
        self.say("bisection ended", bisection=state["bisection"], stage=stage,
                 culprit=(state["culprit"] or {}).get("sha"), note=note)
        self._publish(state)
        self._open_queued(state["repository"])            # its slot is free

    # -- what time alone changes ------------------------------------------------------------
    def tick(self) -> None:
        """Called periodically by the collector (and at its start): an open bisection with nothing in
        the stream is advanced (opened from the queue, then a restart before its first pairs were
        enqueued); a bisection whose platform has had no live agent for `stall_after_s` becomes
        `stalled` (its slot freed, its work items left in the stream) and resumes when an agent of
        the platform is back; a `waiting` one resumes when its repository's agent time frees;
        queued ones open where a slot is free. Saves only what changed."""
        live: dict[str, int] = {}
        for bisection, _ in self.states():
            state = self.state(bisection)           # as it is now: an earlier one may have opened it
            if state["stage"] in ACTIVE_STAGES and not any(p["state"] == "queued" for p in state["pairs"].values()):
                self.advance(bisection)             # opened, its pairs never enqueued (a restart in between)
            elif state["stage"] in ACTIVE_STAGES + (STALLED,):
                if state["platform"] not in live:
                    live[state["platform"]] = self.fleet.live_agents(state["platform"])
                self._liveness(state, live[state["platform"]])
            elif state["stage"] == WAITING:
                states = [s for _, s in self.states()]
                if self.admission.has_agent_time(states, state["repository"], self.clock()):
                    self.advance(bisection)         # its pairs enqueued now
                else:
                    self._wait(state)               # when it frees, again (pairs answered since count)
        for repository in sorted({s["repository"] for _, s in self.states() if s["stage"] == QUEUED}):
            self._open_queued(repository)

    def _liveness(self, state: dict, live: int) -> None:
        """`live` agents of its platform now: none for `stall_after_s`, it is stalled (its slot to
        the next queued change); an agent back, it resumes."""
        now, since = self.clock(), state.get("no_agents_since")
        if live and state["stage"] == STALLED:
            state["no_agents_since"] = None
            self._save(state)
            self.say("bisection resumed", bisection=state["bisection"], platform=state["platform"], agents=live)
            return self.advance(state["bisection"])      # its stage again, from its pairs
        if live:
            if since is not None:
                state["no_agents_since"] = None
                self._save(state)
            return
        if since is None:
            state["no_agents_since"] = now
            return self._save(state)
        if state["stage"] != STALLED and now - since >= self.limits.stall_after_s:
            queued = sum(1 for pair in state["pairs"].values() if pair["state"] == "queued")
            state.update(stage=STALLED, note=f"no live agent of platform {state['platform']} for "
                                             f"{format_duration(now - since)}; its {queued} work item(s) stay "
                                             f"in the stream, it resumes when an agent of the platform is back")
            self._save(state)
            self.say("bisection stalled", bisection=state["bisection"], platform=state["platform"], queued=queued)
            self._open_queued(state["repository"])        # it holds no slot

    def _comment(self, state: dict, outcome: Outcome | None) -> str:
        head = (f"### redline: fleet bisection {state['bisection']} {triggered_by(state)}\n\n"
                f"{len(state['path'])} commits after `{state['good']['sha'][:12]}`, on platform "
                f"`{state['platform']}`, {state['per_round']} commit(s) per round, "
                f"{len(state['pairs'])} work items measured on the fleet.\n\n") + measured_line(state)
        if state["stage"] != "reported" or outcome is None:
            body = f"**Not bisected:** {state['note']}\n"
        else:
            document = outcome.as_json()
            body = report_markdown({**self._context(state), **without_profiles(document)})
            body += self._moved_functions(state, document.get("remainder"))
        return head + body + f"\n{marker(state['bisection'])}\n"

    def _moved_functions(self, state: dict, remainder: dict | None) -> str:
        """The culprit's own change's moved functions, each name (an agent's text) quoted, and where
        its differential flame graph is; or, per test, why there are none (never an empty table)."""
        if not remainder or not remainder.get("changes"):
            return ""
        before, culprit = Commit(remainder["before"]["sha"]), Commit(remainder["commit"]["sha"])
        answer = state["answers"].get(pair_key(before, culprit, profiled=True)) or \
            state["answers"].get(CountAsk((before, culprit), 1, "own change", profile=True).key)
        notes = (answer or {}).get("profile_notes") or {}
        whole = ("the server's instructions (callgrind's call graph)" if state.get("measure") == metrics.INSTRUCTIONS
                 else "the server's CPU")
        out = ["", f"**Moved functions** of the culprit's own change (a profiled run per side after the measured "
                   f"ones; each function's self share of {whole} at {remainder['before']['sha'][:12]} "
                   f"→ at the culprit):", ""]
        rows = [f"| {literal(test)} | {literal(move['symbol'])} | {move['baseline_share']:.1%} | "
                f"{move['comparison_share']:.1%} |"
                for test, change in remainder["changes"].items() for move in change.get("moved_symbols") or []]
        if rows:
            out += ["| test | function | before | culprit |", "|---|---|---:|---:|", *rows, ""]
        for test, change in remainder["changes"].items():
            if not change.get("moved_symbols"):
                note = notes.get(test) or {"why": "its own change was not profiled", "detail": None}
                out.append(f"No moved functions for {literal(test)}: {note['why']}"
                           + (f" ({literal(note['detail'][:300])})" if note.get("detail") else "") + ".")
            if change.get("diff_flamegraph"):
                command = ["redline", "report", str(state["bisection"]), "--store", str(self.store.path),
                           "-o", f"bisection-{state['bisection']}.html"]
                out.append(f"Differential flame graph of {literal(test)} (the culprit against the commit before it) "
                           f"on the collector: {literal(change['diff_flamegraph'])}; {literal(shlex.join(command))} "
                           "shows it with this report.")
        return "\n".join(out) + "\n"

    def _publish(self, state: dict) -> None:
        """The report's comment, once: attempts are counted (and saved) before each try; a try that
        may have happened is looked for first."""
        if state.get("published") or not state.get("comment"):
            return
        again = state["publish_attempts"] > 0
        state["publish_attempts"] += 1
        self._save(state)
        state["published"] = self.fleet.publish(state, state["comment"], again=again) or "comments"
        self._save(state)


def without_profiles(document: dict) -> dict:
    """A bisection's document without its moved symbols and flame graph paths: the comment lists
    them itself, each function's name quoted (an agent's text), not inside report_markdown's lines."""
    remainder = document.get("remainder")
    if not remainder:
        return document
    changes = {test: {**change, "moved_symbols": None, "diff_flamegraph": None}
               for test, change in (remainder.get("changes") or {}).items()}
    return {**document, "remainder": {**remainder, "changes": changes}}


def origin_kind(state: dict) -> str:
    """What opened a bisection: a work item's own verdict, or a change point of a branch's history."""
    return (state.get("origin") or {}).get("kind", "verdict")


def triggered_by(state: dict) -> str:
    """The report heading's words for what opened the bisection."""
    origin = state.get("origin") or {}
    if origin_kind(state) != "history":
        return f"of work item `{state['work_id']}`"
    series = "; ".join(f"`{name}`" for name in origin["series"][:3]) + (
        f" and {len(origin['series']) - 3} more" if len(origin["series"]) > 3 else "")
    return (f"of a `redline history` change point ({origin['time']}): {series}, {origin['metric']} "
            f"{origin['delta_pct']:+.1f}% (p {origin['p_value']:.2g}) from the push of work item `{origin['after']}`")


def ref_names(ref: str, sha: str) -> bool:
    """Whether a target's reference names the commit `sha` (the sha itself, or its abbreviation)."""
    return len(ref) >= 7 and sha.startswith(ref.lower())


def unseen(metric: str, outcome: Outcome) -> str:
    """Why a counted confirmation leaves the change to time, in one line."""
    endpoints = outcome.endpoints
    if endpoints.too_close:
        return "the counted confirmation saw it move too little to follow by one counted run per commit (" + \
            "; ".join(f"{test}: {why}" for test, why in endpoints.too_close.items()) + ")"
    verdicts = "; ".join(f"{test} {c.verdict}" + (f" {c.delta_pct:+.1f}%" if c.delta_pct is not None else "")
                         for test, c in endpoints.changes.items()) or "no runs"
    unmoved = endpoints.changes and all(c.verdict == Verdict.NO_CHANGE for c in endpoints.changes.values())
    return (f"the counted confirmation did not see the change ({metric}: {verdicts})"
            + (": it lives where counts do not look (system calls, waiting, memory latency)" if unmoved else ""))


def measured_line(state: dict) -> str:
    """The comment's line on why a bisection that could have been counted was timed (a counted
    one is said by the report itself)."""
    if state.get("measure") != metrics.INSTRUCTIONS and state.get("timed_because"):
        return f"Measured by time: {' '.join(state['timed_because'].split())}.\n\n"
    return ""


def marker(bisection: int) -> str:
    """The invisible line that identifies a bisection's comment."""
    return f"<!-- redline bisection {bisection} -->"


class WorkLike(Protocol):
    work_id: str
    source: str
    baseline: str
    comparison: str
    github: str
    runs: int
    max_runs: int
    sides: list[SideSpec]
    settings: dict
    bisection: str
    platforms: list[str]
    branch: str
