"""How a bisection measures: each commit built once, its runs through the engine into the
bisection's store session, and two comparers (redline.bisect.search.Comparer) that turn runs into the
changes the search decides on.

  TimedComparer     every step is an interleaved A/B compare of the candidate against GOOD or BAD,
                    with two more runs per side while the step's interval straddles the half-way
                    point (timed metrics: server CPU per op, latency, throughput). A round's
                    commits are compared one after another.
  CountedComparer   --measure instructions: the endpoints are an interleaved A/B compare of
                    `runs` runs per side under callgrind (the near-deterministic rule of
                    redline.analysis.counted gives the verdict and τ); every later commit is
                    measured by ONE run, with the endpoints' request count, and compared with the
                    counts of GOOD or BAD taken then (redline.analysis.counted.one_run_step).
                    More runs of a commit would not narrow how far two binaries' counts can sit
                    apart, so an undecided step is not given more runs: it is skipped. A round's
                    commits are counted in one call, each commit's jobs apart from the others'
                    (EngineCounter.count(apart=True)): the place a scheduler of counted work
                    runs them side by side.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from redline.analysis import same_state
from redline.analysis.comparison import (BASELINE, COMPARISON, FDR_Q, TestComparison, apply_false_discovery_control,
                                         attach_profiles, compare_test, looks_confidence, measured_runs_by_test,
                                         profile_differences)
from redline.analysis.counted import deterministic_verdict, one_run_step, step_tolerance_pct
from redline.analysis.stats import MetricComparison, Verdict
from redline.bisect.search import Answer, Ask, Change, Commit, OneAtATime, Settled, Unbuildable
from redline.builder import BuildFailed
from redline.core import metrics
from redline.core.run import Run
from redline.engine.engine import MoreRuns
from redline.engine.job import Job, JobResolver, jobs_for
from redline.engine.run_plan import RunSettings, Side
from redline.lab.local import execute_job, local_engine
from redline.output.progress import ConsoleObserver
from redline.server.targets import Target, ensure_built, parse_target
from redline.store.results import Store
from redline.suites import TestSpec



# the metric a bisection decides on by default, per way of measuring (redline bisect, the fleet's loop)
DEFAULT_METRIC = {metrics.TIME: "server_cpu_us_per_op", metrics.INSTRUCTIONS: "instructions_per_op"}


@dataclass
class StepSettings:
    """How each compare of a bisection measures: the run settings, the metric decided on, the
    run budget for undecided timed steps, this machine's noise floors (A/A spreads)."""

    runs: RunSettings
    metric: str
    max_runs: int
    noise_floors: dict[tuple[str, str], float]

    @property
    def counted(self) -> bool:
        return self.runs.measure == metrics.INSTRUCTIONS


@dataclass
class Measuring:
    """Where the runs go: the store session of the bisection and the progress display."""

    store: Store
    session_id: int
    observer: ConsoleObserver

    def artifacts(self) -> Path:
        """Where a profiled compare writes its differential flame graphs."""
        return self.store.artifacts(f"bisect-{self.session_id}")


class CommitBuilds:
    """Each commit of the repository built once (the build cache makes a commit built by an
    earlier bisection a hit); a commit that does not build raises redline.bisect.search.Unbuildable."""

    def __init__(self, *, repo: Path, variant: str | None, observer: ConsoleObserver):
        self.repo, self.variant, self.observer = repo, variant, observer
        self.built: dict[str, Target] = {}

    def target(self, commit: Commit) -> Target:
        if commit.sha not in self.built:
            self.observer.phase(f"build {commit.short}")
            target = parse_target(f"git:{self.repo}@{commit.sha}", variant=self.variant)
            try:
                built = ensure_built(target, progress=self.observer.detail)
            except BuildFailed as failure:
                raise Unbuildable(commit, failure.tail) from None
            facts = built.build_facts or {}
            self.observer.note(f"{commit.short}: {'cache hit' if facts.get('cache_hit') else 'built'} → {built.binary}")
            self.built[commit.sha] = built
        return self.built[commit.sha]


def execute(jobs: list[Job], sides: list[Side], tests: list[TestSpec], measuring: Measuring, *,
            more_runs: MoreRuns | None = None) -> list[Run]:
    """The jobs through the local engine into the bisection's session; every run returned."""
    engine = local_engine(measuring.store, observers=[measuring.observer])
    resolver = JobResolver(tests=tests, sides=sides)
    return [run for number, job in enumerate(jobs, 1)
            for run in execute_job(job, engine=engine, session_id=measuring.session_id, resolver=resolver,
                                   position=(number, len(jobs)), more_runs=more_runs)]


def failed_runs_note(records: list[Run]) -> str | None:
    """How many of the runs failed, and the first one's error (None: none failed)."""
    failed = [r.error for r in records if r.status == "failed" and r.error]
    return f"{len(failed)} runs failed: {failed[0]}" if failed else None


def _change(test: str, result: MetricComparison | None, *, verdict: str, note: str | None = None,
            run_ids: list[int] = (), interval: bool = True, **extra) -> Change:
    """The search's view of one comparison of the metric, with the verdict it stands by."""
    return Change(test=test, verdict=verdict,
                  delta_pct=result.delta_pct if result else None,
                  ci_low_pct=result.ci_low_pct if result and interval else None,
                  ci_high_pct=result.ci_high_pct if result and interval else None,
                  runs=result.n_comparison if result else 0,
                  min_detectable_pct=result.min_detectable_pct if result else None, note=note,
                  run_ids=list(run_ids), **extra)


# -- timed ----------------------------------------------------------------------------------
def compare_targets(baseline: Target, comparison: Target, tests: list[TestSpec], settings: StepSettings, *,
                    settled: Settled, measuring: Measuring, profile: bool = False) -> dict[str, Change]:
    """Baseline vs comparison, interleaved, on the tests; two more runs per side while `settled`
    says the runs do not decide yet (up to max_runs); the change of the metric per test, with the
    compare verdict (false-discovery controlled over the tests). With `profile`, one more run per
    side under perf: moved symbols and a differential flame graph per test."""
    confidence = looks_confidence(settings.runs.runs, settings.max_runs)

    def changes(records: list[Run], artifacts: Path | None = None) -> dict[str, Change]:
        return timed_changes(records, settings.metric, settings.noise_floors, confidence=confidence,
                             artifacts=artifacts)

    more_runs = step_more_runs(settled, settings.metric, settings.noise_floors, runs=settings.runs.runs,
                               max_runs=settings.max_runs)
    sides = [Side(baseline, BASELINE), Side(comparison, COMPARISON)]
    jobs = jobs_for(tests, sides, replace(settings.runs, profile=profile), max_runs=settings.max_runs)
    records = execute(jobs, sides, tests, measuring, more_runs=more_runs)
    return changes(records, measuring.artifacts() if profile else None)


def step_more_runs(settled: Settled, metric: str, noise_floors: dict[tuple[str, str], float], *, runs: int,
                   max_runs: int) -> MoreRuns:
    """The engine's extra-runs rule of a timed step: two more runs per side while `settled` says the
    runs so far do not answer the step's question, up to max_runs. The same rule whether the step
    runs here (compare_targets) or on a fleet agent (its job's step rule, redline.fleet.execution)."""
    confidence = looks_confidence(runs, max(runs, max_runs))

    def more_runs(test, records: list[Run], runs_so_far: int) -> int:
        key = records[-1].key if records else test.name
        if runs_so_far >= max_runs or settled(timed_changes([r for r in records if r.key == key], metric, noise_floors,
                                                            confidence=confidence)):
            return 0
        return min(2, max_runs - runs_so_far)
    return more_runs


def timed_changes(records: list[Run], metric: str, noise_floors: dict[tuple[str, str], float], *,
                  confidence: float, artifacts: Path | None = None) -> dict[str, Change]:
    """The change of `metric` per test of interleaved baseline/comparison runs, with the compare
    verdict (false-discovery controlled over the tests): what a timed step decides on, whether its
    runs were measured here (compare_targets) or by fleet agents (redline.fleet.bisection)."""
    by_test = measured_runs_by_test(records)
    found = [c for key, runs in by_test.items()
             for c in compare_test(key, runs, noise_floors, confidence=confidence) if c.metric == metric]
    apply_false_discovery_control(found, q=FDR_Q)
    if artifacts is not None:
        attach_profiles(found, records, artifacts)
    return {c.test: timed_change(c, by_test[c.test]) for c in found}


def timed_change(c: TestComparison, records: list[Run]) -> Change:
    note = c.note or c.state_refusal
    failed = failed_runs_note(records)
    if failed:
        note = f"{note + '; ' if note else ''}{failed}"
    return _change(c.test, c.result, verdict=c.verdict, note=note, run_ids=[r.run_id for r in records],
                   interval=not c.state_refusal,
                   moved_symbols=c.moved_symbols, diff_flamegraph=c.diff_flamegraph)


class TimedComparer(OneAtATime):
    """redline.bisect.search.Comparer on real builds and timed runs (compare_targets). A round's
    commits are compared one after another: timed runs need the machine to themselves."""

    def __init__(self, *, builds: CommitBuilds, tests: list[TestSpec], settings: StepSettings, measuring: Measuring):
        self.builds, self.settings, self.measuring = builds, settings, measuring
        self.tests = {test.name: test for test in tests}

    def compare(self, reference: Commit, candidate: Commit, tests: list[str], settled: Settled, *,
                profile: bool = False) -> dict[str, Change]:
        baseline, comparison = self.builds.target(reference), self.builds.target(candidate)
        specs = [self.tests[key.split("@", 1)[0]] for key in tests]
        return compare_targets(baseline, comparison, specs, self.settings, settled=settled, measuring=self.measuring,
                               profile=profile)


# -- counted --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Count:
    """One measured run's value of the metric."""

    value: float
    run_id: int | None = None
    state: dict | None = None          # the run's server state facts (how it reached its data)


@dataclass
class Counted:
    """What one measurement of one or more commits gave."""

    counts: dict[tuple[str, str], list[Count]] = field(default_factory=dict)   # (sha, test) → runs
    failures: dict[tuple[str, str], str] = field(default_factory=dict)   # (sha, test) → why its runs failed
    profiles: dict[str, tuple[list[dict], str]] = field(default_factory=dict)   # test → moved symbols, diff SVG
    unbuildable: dict[str, list[str]] = field(default_factory=dict)     # sha → its build log's tail (apart)


class CommitCounter(Protocol):
    def count(self, commits: list[Commit], tests: list[str], *, runs: int, profile: bool = False,
              apart: bool = False) -> Counted:
        """`runs` counted runs of each commit on each test: one commit alone, or two interleaved
        (A B B A), the first as baseline. With `profile`, one more run per side whose call graph
        gives the moved symbols and the differential flame graph. Raises Unbuildable.
        `apart`: any number of commits, each in its own jobs, which depend on nothing but the
        commit, so they may run side by side; a commit that does not build is in `unbuildable`."""
        ...


class EngineCounter:
    """CommitCounter on real builds and runs under callgrind. The request count per connection of a
    test's first runs is carried to every later job of that test, so every commit sends the same
    requests."""

    def __init__(self, *, builds: CommitBuilds, tests: list[TestSpec], settings: StepSettings, measuring: Measuring):
        self.builds, self.settings, self.measuring = builds, settings, measuring
        self.tests = {test.name: test for test in tests}
        self.requests_per_connection: dict[str, int] = {}

    def count(self, commits: list[Commit], tests: list[str], *, runs: int, profile: bool = False,
              apart: bool = False) -> Counted:
        counted = Counted()
        specs = [self.tests[key.split("@", 1)[0]] for key in tests]
        settings = replace(self.settings.runs, runs=runs, profile=profile)
        if apart:
            sides = []
            for commit in commits:
                try:
                    sides.append(Side(self.builds.target(commit), None))
                except Unbuildable as failure:
                    counted.unbuildable[commit.sha] = failure.tail
            commit_of = {side.target.label: commit for side, commit in
                         zip(sides, [c for c in commits if c.sha not in counted.unbuildable])}
            jobs = [job for side in sides for job in jobs_for(specs, [side], settings)]
        else:
            names = [BASELINE, COMPARISON] if len(commits) == 2 else [None]
            sides = [Side(self.builds.target(commit), name) for commit, name in zip(commits, names)]
            commit_of = {side.target.label: commit for side, commit in zip(sides, commits)}
            jobs = jobs_for(specs, sides, settings)
        for job in jobs:
            job.settings["window_requests"] = self.requests_per_connection.get(job.test)
        # the one call a scheduler of counted work replaces: jobs made `apart` depend on nothing but
        # their commit, so k of them can run in k lanes (redline/lab/scheduler.py, `run(jobs, ...)`)
        records = execute(jobs, sides, specs, self.measuring)
        for key, measured in measured_runs_by_test(records).items():
            for run in measured:
                value = run.metrics.get(self.settings.metric) if run.status == "ok" else None
                if value:
                    counted.counts.setdefault((commit_of[run.target].sha, key), []).append(
                        Count(value, run.run_id, run.state))
                    fixed = (run.facts.get("instructions") or {}).get("requests_per_connection")
                    if fixed:
                        self.requests_per_connection.setdefault(run.test, fixed)
            for target, commit in commit_of.items():
                failed = failed_runs_note([run for run in measured if run.target == target])
                if failed:
                    counted.failures[(commit.sha, key)] = failed
        if profile:
            counted.profiles = profile_differences(records, self.measuring.artifacts())
        return counted


class CountedComparer:
    """redline.bisect.search.Comparer for counted bisections (see the module docstring). The first
    comparison of a test — the endpoint check, always the search's first — is an interleaved A/B
    of `endpoint_runs` runs per side; its τ sets the test's step tolerance (τ/2) from then on. Later
    comparisons count only the commit not counted yet, once."""

    def __init__(self, counter: CommitCounter, *, metric: str, endpoint_runs: int,
                 noise_floors: dict[tuple[str, str], float] | None = None):
        self.counter, self.metric, self.endpoint_runs = counter, metrics.BY_NAME[metric], endpoint_runs
        self.noise_floors = noise_floors or {}
        self.counts: dict[tuple[str, str], list[Count]] = {}
        self.failures: dict[tuple[str, str], str] = {}
        self.unbuildable: dict[str, list[str]] = {}
        self.tau: dict[str, float] = {}       # test → τ of its endpoint comparison

    def _counted(self, commit: Commit, test: str) -> bool:
        return bool(self.counts.get((commit.sha, test)))

    def compare(self, reference: Commit, candidate: Commit, tests: list[str], settled: Settled, *,
                profile: bool = False) -> dict[str, Change]:
        missing = [c for c in (reference, candidate) if not all(self._counted(c, t) for t in tests)]
        profiles: dict[str, tuple[list[dict], str]] = {}
        if profile:
            profiles = self._take(self.counter.count([reference, candidate], tests, runs=1, profile=True))
        elif len(missing) == 2:
            self._take(self.counter.count(missing, tests, runs=self.endpoint_runs))
        elif missing:
            self._take(self.counter.count(missing, tests, runs=1))
        return {test: self._change(reference, candidate, test, profiles.get(test)) for test in tests}

    def measure(self, asks: list[Ask], tests: list[str]) -> list[Answer]:
        """A round: every candidate not counted yet by one run, all in one call to the counter
        (apart: each commit's jobs on their own, so they may run side by side), each then against
        the counts of its end."""
        missing = list(dict.fromkeys(a.candidate for a in asks if a.candidate.sha not in self.unbuildable
                                     and not all(self._counted(a.candidate, t) for t in tests)))
        if missing:
            self._take(self.counter.count(missing, tests, runs=1, apart=True))
        return [Answer(unbuildable=self.unbuildable[a.candidate.sha]) if a.candidate.sha in self.unbuildable
                else Answer({test: self._change(a.reference, a.candidate, test, None) for test in tests})
                for a in asks]

    def _take(self, counted: Counted) -> dict[str, tuple[list[dict], str]]:
        for key, counts in counted.counts.items():
            self.counts.setdefault(key, []).extend(counts)
        self.failures.update(counted.failures)
        self.unbuildable.update(counted.unbuildable)
        return counted.profiles

    def _change(self, reference: Commit, candidate: Commit, test: str,
                profile: tuple[list[dict], str] | None) -> Change:
        ref, cand = self.counts.get((reference.sha, test), []), self.counts.get((candidate.sha, test), [])
        run_ids = [c.run_id for c in [*ref, *cand] if c.run_id is not None]
        moved, svg = profile or (None, None)
        if not ref or not cand:
            why = self.failures.get((candidate.sha, test)) or self.failures.get((reference.sha, test))
            missing = "the reference" if not ref else "the candidate"
            return _change(test, None, verdict=Verdict.INCONCLUSIVE, run_ids=run_ids,
                           note=f"no counted run of {missing}" + (f" ({why})" if why else ""))
        refusal = same_state.state_refusal({BASELINE: [c.state for c in ref], COMPARISON: [c.state for c in cand]})
        higher = self.metric.higher_is_better
        first = test not in self.tau
        if first:
            result = deterministic_verdict([c.value for c in ref], [c.value for c in cand], higher_is_better=higher,
                                           aa_spread_pct=self.noise_floors.get((test, self.metric.name)),
                                           least_change_pct=self.metric.least_change_pct)
            self.tau[test] = result.tau_pct
        else:
            result = one_run_step([c.value for c in ref], [c.value for c in cand],
                                  tau_pct=self.tau[test], higher_is_better=higher)
        return _change(test, result, verdict=Verdict.INCONCLUSIVE if refusal else result.verdict,
                       note=refusal or self.failures.get((candidate.sha, test)), run_ids=run_ids,
                       interval=not refusal, moved_symbols=moved, diff_flamegraph=svg,
                       step_tolerance_pct=step_tolerance_pct(self.tau[test]))


def comparer_for(*, builds: CommitBuilds, tests: list[TestSpec], settings: StepSettings,
                 measuring: Measuring) -> TimedComparer | CountedComparer:
    """The comparer the run settings ask for."""
    if settings.counted:
        counter = EngineCounter(builds=builds, tests=tests, settings=settings, measuring=measuring)
        return CountedComparer(counter, metric=settings.metric, endpoint_runs=settings.runs.runs,
                               noise_floors=settings.noise_floors)
    return TimedComparer(builds=builds, tests=tests, settings=settings, measuring=measuring)
