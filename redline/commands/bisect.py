"""`redline bisect`: the first commit between --good and --bad at which a metric moved, found by
builds and interleaved A/B runs (the search is redline/bisect.py; this module builds, measures,
stores and reports)."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from redline import bisect as search
from redline import machine, metrics
from redline.bisect import Change, Commit, Outcome, Settled, Unbuildable
from redline.builder import BuildFailed
from redline.commands.session import check_outputs, measured_runs_by_test, select_tests
from redline.comparison import (BASELINE, COMPARISON, COMPARED_METRICS, TestComparison,
                                apply_false_discovery_control, attach_profiles, compare_test, looks_confidence)
from redline.engine import local_engine
from redline.errors import RunError, UsageError
from redline.output import files, terminal
from redline.output.bisect_report import report_lines, report_markdown
from redline.output.progress import ConsoleObserver, print_plan
from redline.run_plan import RunSettings, Side
from redline.job import JobResolver, execute_job, jobs_for
from redline.run import Run
from redline.store import Store, inspect_store_file
from redline.suites import TestSpec
from redline.targets import Target, ensure_built, parse_target
from redline.topology import DEFAULT_TOPOLOGY, parse_topology
from redline.workdirs import remove_abandoned_workdirs

FDR_Q = 0.05
EXIT_OK, EXIT_UNRESOLVED = 0, 1


@dataclass
class StepSettings:
    """How each compare of a bisection measures: the run settings, the metric decided on, the
    run budget for undecided steps, this machine's noise floors."""

    runs: RunSettings
    metric: str
    max_runs: int
    noise_floors: dict[tuple[str, str], float]


@dataclass
class Measuring:
    """Where the compares go: the store session of the bisection and the progress display."""

    store: Store
    session_id: int
    observer: ConsoleObserver


def compare_targets(baseline: Target, comparison: Target, tests: list[TestSpec], settings: StepSettings, *,
                    settled: Settled, measuring: Measuring, profile: bool = False) -> dict[str, Change]:
    """The one way a bisection measures: baseline vs comparison, interleaved, on the tests; two
    more runs per side while `settled` says the runs do not decide yet (up to max_runs); the
    change of the metric per test, with the compare verdict (false-discovery controlled over
    the tests). With `profile`, one more run per side under perf: moved symbols and a
    differential flame graph per test."""
    confidence = looks_confidence(settings.runs.runs, settings.max_runs)

    def changes(records: list[Run], artifacts: Path | None = None) -> dict[str, Change]:
        by_test = measured_runs_by_test(records)
        found = [c for key, runs in by_test.items()
                 for c in compare_test(key, runs, settings.noise_floors, confidence=confidence)
                 if c.metric == settings.metric]
        apply_false_discovery_control(found, q=FDR_Q)
        if artifacts is not None:
            attach_profiles(found, records, artifacts)
        return {c.test: _change(c, by_test[c.test]) for c in found}

    def more_runs(test: TestSpec, records: list[Run], runs_so_far: int) -> int:
        key = records[-1].key if records else test.name
        if runs_so_far >= settings.max_runs or settled(changes([r for r in records if r.key == key])):
            return 0
        return min(2, settings.max_runs - runs_so_far)

    sides = [Side(baseline, BASELINE), Side(comparison, COMPARISON)]
    jobs = jobs_for(tests, sides, replace(settings.runs, profile=profile), max_runs=settings.max_runs)
    engine, resolver = local_engine(measuring.store, observers=[measuring.observer]), JobResolver(tests=tests, sides=sides)
    records = [run for number, job in enumerate(jobs, 1)
               for run in execute_job(job, engine=engine, session_id=measuring.session_id, resolver=resolver,
                                      position=(number, len(jobs)), more_runs=more_runs)]
    store = measuring.store.path
    return changes(records, store.with_name(f"{store.stem}-artifacts") / f"bisect-{measuring.session_id}"
                   if profile else None)


def _change(c: TestComparison, records: list[Run]) -> Change:
    result = c.result
    note = c.note or c.state_refusal
    failed = [r.error for r in records if r.status == "failed" and r.error]
    if failed:
        note = f"{note + '; ' if note else ''}{len(failed)} runs failed: {failed[0]}"
    return Change(test=c.test, verdict=c.verdict, delta_pct=result.delta_pct if result else None,
                  ci_low_pct=result.ci_low_pct if result and not c.state_refusal else None,
                  ci_high_pct=result.ci_high_pct if result and not c.state_refusal else None,
                  runs=result.n_baseline if result else 0,
                  min_detectable_pct=result.min_detectable_pct if result else None, note=note,
                  run_ids=[r.run_id for r in records], moved_symbols=c.moved_symbols, diff_flamegraph=c.diff_flamegraph)


class EngineComparer:
    """search.Comparer on real builds and runs: each commit built once (the build cache makes a
    commit built by an earlier bisection a hit), then compare_targets."""

    def __init__(self, *, repo: Path, variant: str | None, tests: list[TestSpec], settings: StepSettings,
                 measuring: Measuring):
        self.repo, self.variant, self.settings, self.measuring = repo, variant, settings, measuring
        self.tests = {test.name: test for test in tests}
        self.built: dict[str, Target] = {}

    def target(self, commit: Commit) -> Target:
        if commit.sha not in self.built:
            observer = self.measuring.observer
            observer.phase(f"build {commit.short}")
            target = parse_target(f"git:{self.repo}@{commit.sha}", variant=self.variant)
            try:
                built = ensure_built(target, progress=observer.detail)
            except BuildFailed as failure:
                raise Unbuildable(commit, failure.tail) from None
            facts = built.build_facts or {}
            observer.note(f"{commit.short}: {'cache hit' if facts.get('cache_hit') else 'built'} → {built.binary}")
            self.built[commit.sha] = built
        return self.built[commit.sha]

    def compare(self, reference: Commit, candidate: Commit, tests: list[str], settled: Settled, *,
                profile: bool = False) -> dict[str, Change]:
        baseline, comparison = self.target(reference), self.target(candidate)
        specs = [self.tests[key.split("@", 1)[0]] for key in tests]
        return compare_targets(baseline, comparison, specs, self.settings, settled=settled, measuring=self.measuring,
                               profile=profile)


def _repository(text: str) -> Path:
    if not text.startswith("git:"):
        raise UsageError(f"bisect needs a git:REPO target, got {text!r}")
    location = text[len("git:"):]
    if not location:
        raise UsageError("git: needs a repository path")
    path = Path(location).expanduser()
    if not path.exists():
        if "@" in location and Path(location.rsplit("@", 1)[0]).expanduser().exists():
            raise UsageError(f"{text}: give the repository without @REF; the refs are --good and --bad")
        raise UsageError(f"repository does not exist: {path}")
    return path.resolve()


DEFAULT_METRIC = "server_cpu_us_per_op"


def _hand_off(args, tests: list[TestSpec]) -> None:
    """--from-change-point FILE[#SESSION]: --good, --bad and --metric from `redline history --json`."""
    text = args.from_change_point
    if args.good or args.bad:
        raise UsageError("--from-change-point gives --good and --bad; give either, not both")
    name, _, session = text.partition("#")
    if session and not session.isdigit():
        raise UsageError(f"--from-change-point {text}: SESSION after # must be a session number")
    try:
        document = json.loads(Path(name).read_text())
    except (OSError, ValueError) as exc:
        raise UsageError(f"--from-change-point {name}: cannot read `redline history --json` output ({exc})") from None
    if not isinstance(document, dict) or "series" not in document:
        raise UsageError(f"--from-change-point {name}: not `redline history --json` output (no series)")
    hand_off = search.from_change_point(document, session=int(session) if session else None,
                                        tests={t.name for t in tests}, source=name)
    if args.metric and args.metric != hand_off.metric:
        raise UsageError(f"--metric {args.metric}: the change point was found on {hand_off.metric}")
    args.good, args.bad, args.metric = hand_off.good, hand_off.bad, hand_off.metric


def check_arguments(args) -> tuple[Path, list[TestSpec]]:
    """Everything that can be checked before a build starts."""
    repo = _repository(args.target)
    tests = select_tests(args)
    if args.from_change_point:
        _hand_off(args, tests)
    elif not (args.good and args.bad):
        raise UsageError("bisect needs --good REF and --bad REF (or --from-change-point FILE)")
    args.metric = args.metric or DEFAULT_METRIC
    if args.metric not in COMPARED_METRICS:
        raise UsageError(f"--metric {args.metric}: bisect decides on a compared metric: {', '.join(COMPARED_METRICS)}")
    if args.max_runs < args.runs:
        raise UsageError(f"--max-runs ({args.max_runs}) is smaller than --runs ({args.runs})")
    if args.measure == metrics.INSTRUCTIONS:
        raise UsageError("--measure instructions: bisect measures time only (its metrics and step rule are timed ones)")
    if args.topology and len(args.topology) > 1:
        raise UsageError("bisect follows one topology at a time; give --topology once")
    if args.variant:
        from redline.builder import load_variant
        load_variant(args.variant)
    inspect_store_file(args.store)          # a store that can never be opened ends here, not after a build
    check_outputs(args, {"--json": args.json, "--markdown": args.markdown})
    return repo, tests


def _context(args, repo: Path, tests: list[TestSpec], session_id: int) -> dict:
    """What the report needs besides the outcome: what was bisected, how, where it is stored."""
    return {"repository": str(repo), "metric": args.metric, "variant": args.variant or "default",
            "tests": [t.name for t in tests], "selection": [*args.suites, *(["--name", args.name] if args.name else [])],
            "session": session_id, "store": str(args.store), "all_parents": args.all_parents,
            "good_ref": args.good, "bad_ref": args.bad}


def bisect_command(args) -> int:
    repo, tests = check_arguments(args)
    good, path = search.ancestry_path(repo, args.good, args.bad, all_parents=args.all_parents)
    topologies = (parse_topology(args.topology[0] if args.topology else DEFAULT_TOPOLOGY),)
    console = terminal.console(stderr=True)
    store = Store(args.store)
    floors = store.noise_floors()
    remove_abandoned_workdirs()
    session_id = store.begin_session(kind="bisect", argv=sys.argv, machine=machine.facts())
    settings = StepSettings(runs=RunSettings(runs=args.runs, duration_s=args.duration, warmup_s=args.warmup,
                                             scale=args.scale, topologies=topologies, snapshots=args.snapshots,
                                             measure=metrics.TIME),
                            metric=args.metric, max_runs=args.max_runs, noise_floors=floors)
    context = _context(args, repo, tests, session_id)
    observer = ConsoleObserver(console)
    status = "interrupted"
    try:
        print_plan(console, f"bisect: {len(path)} commits after {good.short}, {len(tests)} tests × {args.runs} runs "
                            f"per step, deciding on {args.metric}", [], topologies)
        comparer = EngineComparer(repo=repo, variant=args.variant, tests=tests, settings=settings,
                                  measuring=Measuring(store, session_id, observer))

        def save(outcome: Outcome) -> None:
            store.save_bisection(session_id, {**context, **outcome.as_json()})

        try:
            outcome = search.bisect(comparer, good, path, [t.name for t in tests],
                                    progress=lambda line: console.print(line, style="bold"), on_step=save,
                                    profile=args.profile)
        except Unbuildable as failure:           # an endpoint does not build: nothing to bisect against
            raise RunError(f"{failure}: an endpoint must build; its build log ends:\n" + "\n".join(failure.tail)) from None
        save(outcome)
        status = "finished"
    finally:
        observer.close()
        store.finish_session(session_id, status)
    document = {**context, **outcome.as_json()}
    out = terminal.console()
    for line in report_lines(document):
        out.print(line, soft_wrap=True)
    if args.markdown:
        files.write_output(args.markdown, report_markdown(document))
    if args.json:
        files.write_json(args.json, document)
    console.print(f"stored in {store.path} (session {session_id}, kind bisect)")
    if _failed_endpoints(outcome):
        return EXIT_UNRESOLVED
    return EXIT_OK if outcome.no_change or outcome.culprit else EXIT_UNRESOLVED


def _failed_endpoints(outcome: Outcome) -> bool:
    """The endpoint compare could not measure a test (failed runs): its 'no change' is no answer."""
    return outcome.no_change and any(not c.measured for c in outcome.endpoints.changes.values())
