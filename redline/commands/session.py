"""What run, compare and calibrate share: checking the arguments before anything starts, getting
the sides ready, running the engine in one store session, and the exit status."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from redline.system import machine
from redline.core.metrics import INSTRUCTIONS
from redline.engine.engine import local_engine
from redline.engine.job import JobResolver, execute_jobs, jobs_for
from redline.core.run import Run
from redline.engine.run_plan import RunSettings, Side
from redline.core.errors import UsageError
from redline.output import terminal
from redline.output.files import check_output_paths
from redline.output.progress import ConsoleObserver, print_plan
from redline.server.traits import binary_traits
from redline.store.results import Store, check_output_path, inspect_store_file
from redline.suites import SpecError, TestSpec, resolve_suites, select
from redline.server.targets import Target, default_target, ensure_built, parse_config_pairs, parse_target
from redline.topology import DEFAULT_TOPOLOGY, parse_topology
from redline.system.workdirs import remove_abandoned_workdirs

DEFAULT_SUITE = "quick"

# Exit codes of run, compare and calibrate (README "Exit codes"); 2 is a usage error (errors.py).
EXIT_OK = 0
EXIT_FAILED_RUNS = 1      # a run failed: the session's results are incomplete
EXIT_REGRESSION = 3       # compare --fail-on-regression found a false-discovery-controlled regression


OUTPUT_FLAGS = ("json", "markdown", "html")     # every file a measuring command writes besides the store


def check_before_starting(args, sides: list[Side]) -> list:
    """What can be checked before a server starts or the store is opened: the store file, the
    output paths, the build variant and the suites. Returns the tests the arguments select."""
    inspect_store_file(args.store)          # a store that can never be opened ends here, not after a build
    check_outputs(args, {f"--{name}": getattr(args, name, None) for name in OUTPUT_FLAGS})
    if args.variant and not any(side.target.build for side in sides):
        raise UsageError(f"--variant {args.variant}: only git: and src: targets are built, and "
                         f"{' and '.join(side.target.spec for side in sides)} is not one")
    return select_tests(args)


def check_outputs(args, outputs: dict[str, Path | None]) -> None:
    """The files a command will write ({flag: path}): never the store (checked before the file is
    touched), and writable."""
    for flag, path in outputs.items():
        if path is not None:
            check_output_path(args.store, path, flag)
    check_output_paths(outputs)


def select_tests(args) -> list:
    """The tests the arguments select; a suite with errors is a usage error, never a skip."""
    try:
        tests = select(resolve_suites(args.suites or [DEFAULT_SUITE]), args.name)
    except SpecError as exc:
        raise UsageError(str(exc)) from exc
    if not tests:
        raise UsageError(f"no test matches --name {args.name!r}" if args.name else "the suites hold no tests")
    first_of: dict[str, TestSpec] = {}
    for test in tests:
        other = first_of.setdefault(test.name, test)
        if other is not test:       # their runs would be stored, compared and reported as one test
            raise UsageError(f"two suites are named {test.name!r}: {other.path} and {test.path}")
    broken = [t for t in tests if t.has_errors]
    if broken:
        first = next(d for d in broken[0].diagnostics if d.severity == "error")
        others = f" and {len(broken) - 1} more suites with errors" if len(broken) > 1 else ""
        raise UsageError(f"{first.location}: {first.message} ({broken[0].name}{others}; "
                         "`redline suites validate` lists every error)")
    return tests


def target_from(text: str | None, pairs: list[str], flag: str, variant: str | None = None) -> Target:
    config = parse_config_pairs(pairs, flag)
    return parse_target(text or default_target().spec, config, variant)


def ready_sides(sides: list[Side], observer: ConsoleObserver) -> list[Side]:
    """Build (or fetch from the cache) every git:/src: target and check the server configuration
    given for it, before the store is opened and anything is measured."""
    ready = []
    for side in sides:
        if side.target.build is not None and side.target.binary is None:
            observer.phase(f"build {side.target.spec}")
            target = ensure_built(side.target, progress=observer.detail)
            facts = target.build_facts or {}
            observer.note(f"{side.target.spec}: {'cache hit' if facts.get('cache_hit') else 'built'} → {target.binary}")
            side = Side(target, side.name)
        check_server_config(side.target)
        ready.append(side)
    return ready


def check_server_config(target: Target) -> None:
    """Server configuration from the command line must exist in the binary (CONFIG GET *): a
    misspelt name is a usage error, not a skipped test or a one-sided comparison."""
    if not target.managed or not target.config:
        return
    known = binary_traits(target.binary).config_parameters
    unknown = sorted(name for name in target.config if name.lower() not in known)
    if unknown:
        raise UsageError(f"server configuration {', '.join(unknown)}: {target.binary} has no such "
                         "configuration parameter (CONFIG GET *)")


@dataclass
class Session:
    """One invocation's work: the store session, the engine run, the records."""

    kind: str
    store: Store
    session_id: int
    records: list[Run]


def execute_session(args, *, kind: str, sides: list[Side], tests: list, max_runs: int | None = None,
                    lone_p_value: float | None = None, floors: dict | None = None, sinks: tuple = ()) -> Session:
    """Get the sides ready, open the store, run the session's jobs (every test × topology) through
    the engine with progress, always close cleanly. `max_runs`/`lone_p_value`: compare's adaptive
    extra runs. `sinks`: result sinks besides the store (--export)."""
    topologies = tuple(parse_topology(name) for name in (args.topology or [DEFAULT_TOPOLOGY]))
    console = terminal.console(stderr=True)
    observer = ConsoleObserver(console)
    try:
        sides = ready_sides(sides, observer)
        print_plan(console, f"{kind}: {len(tests)} tests × {args.runs} runs", sides, topologies)
        settings = RunSettings(runs=args.runs, duration_s=args.duration, warmup_s=args.warmup, scale=args.scale,
                               profile=args.profile, topologies=topologies, snapshots=args.snapshots,
                               measure=args.measure, window_instructions=args.window_instructions)
        jobs = jobs_for(tests, sides, settings, max_runs=max_runs, lone_p_value=lone_p_value)
        store = Store(args.store)            # recovers what a killed redline left in the store …
        _carry_request_counts(jobs, tests, settings, store)
        remove_abandoned_workdirs()          # … and in the temp directory
        session_id = store.begin_session(kind=kind, argv=sys.argv, machine=machine.facts())
        status = "interrupted"
        try:
            records = execute_jobs(jobs, engine=local_engine(store, observers=[observer], sinks=sinks), session_id=session_id,
                                   resolver=JobResolver(tests=tests, sides=sides), floors=floors)
            status = "finished"
        finally:
            store.finish_session(session_id, status)
    finally:
        observer.close()
    return Session(kind, store, session_id, records)


def _carry_request_counts(jobs: list, tests: list, settings: RunSettings, store: Store) -> None:
    """--measure instructions: each counted job offers the request count of this store's earlier
    counted runs of its test, which its runs keep while it fits (redline.instructions.window), so
    that sessions of one store count the same requests."""
    from redline.instructions.window import WINDOW_INSTRUCTIONS
    by_name = {test.name: test for test in tests}
    target = settings.window_instructions or WINDOW_INSTRUCTIONS
    for job in jobs:
        if settings.measure_for(by_name[job.test]) == INSTRUCTIONS:
            job.settings["earlier_window_requests"] = store.earlier_window_requests(job.test, job.topology, target)


def measured_runs_by_test(records: list[Run]) -> dict[str, list[Run]]:
    """The measured runs (not the profiled ones) grouped by test (and topology)."""
    by_test: dict[str, list[Run]] = {}
    for r in records:
        if r.purpose == "measure":
            by_test.setdefault(r.key, []).append(r)
    return by_test


def session_exit_code(session: Session, *, regressions: int = 0) -> int:
    """The one place that decides how run, compare and calibrate exit: says what was stored and
    what failed, then 1 if any run failed (before a regression: the comparison is incomplete),
    3 for `regressions` (those that fail the job under --fail-on-regression), else 0."""
    console = terminal.console(stderr=True)
    failed = [r for r in session.records if r.status == "failed"]
    skipped = {r.test for r in session.records if r.status == "skipped"}
    console.print(terminal.styled(
        f"stored {len(session.records) - len(skipped)} runs in {session.store.path} (session {session.session_id})"
        + (f"; {len(skipped)} tests skipped" if skipped else ""), (f"; {len(failed)} failed" if failed else "", "red")))
    if regressions:
        console.print(f"{regressions} regression(s), false-discovery controlled", style="red")
    if failed:
        return EXIT_FAILED_RUNS
    return EXIT_REGRESSION if regressions else EXIT_OK
