"""A session's work on this machine: the tests selected, the sides made ready (built, their server
configuration checked), the store session opened, every job (test × topology) run through the
local engine with progress, the session closed cleanly whatever happens."""

from __future__ import annotations

from dataclasses import dataclass, field

from redline.core import terminal
from redline.core.errors import UsageError
from redline.core.run import Run
from redline.engine.job import JobResolver, jobs_for
from redline.engine.run_plan import RunSettings, Side
from redline.lab.local import execute_jobs, local_engine
from redline.output.progress import ConsoleObserver, print_plan
from redline.server.targets import Target, default_target, ensure_built, parse_config_pairs, parse_target
from redline.server.traits import binary_traits
from redline.store.results import Store
from redline.store.session import SessionDocument
from redline.suites import SpecError, TestSpec, resolve_suites, select
from redline.system import machine
from redline.system.workdirs import remove_abandoned_workdirs

DEFAULT_SUITE = "quick"


def select_tests(suites: list[str], name: str | None = None) -> list[TestSpec]:
    """The tests `suites` (default: the quick suite) hold whose name matches `name`; a suite with errors is a usage error, never a skip."""
    try:
        tests = select(resolve_suites(suites or [DEFAULT_SUITE]), name)
    except SpecError as exc:
        raise UsageError(str(exc)) from exc
    if not tests:
        raise UsageError(f"no test matches --name {name!r}" if name else "the suites hold no tests")
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
class SessionPlan:
    """What a session is asked: its kind, sides, tests and run settings; for compare, the adaptive
    extra runs (`max_runs`, the p a lone finding needs: `lone_p_value`) and the noise floors."""

    kind: str                           # run | compare | calibrate
    sides: list[Side]
    tests: list[TestSpec]
    settings: RunSettings
    max_runs: int | None = None
    lone_p_value: float | None = None
    floors: dict = field(default_factory=dict)
    documents: dict = field(default_factory=dict)     # stored with the session as it begins ({name: document})
    carried: list[Run] = field(default_factory=list)  # a resumed compare: earlier runs judged with its own

    def lone_p_value_for(self, measured: list[Run]) -> float | None:
        """The p a lone finding of the next job needs, given the runs this session measured before
        it: `lone_p_value` here; a compare grants more as its tests decide changes
        (redline.lab.compare.ComparePlan)."""
        return self.lone_p_value


@dataclass
class Session:
    """One invocation's work: the store session, the engine run, the records, and the sinks that
    hear its end (`close`, once the command has stored its verdicts and documents)."""

    kind: str
    store: Store
    session_id: int
    records: list[Run]                                 # the runs this session measured
    sinks: tuple = ()
    problems: list[str] = field(default_factory=list)     # what the sinks could not do (a failed export)

    def close(self) -> SessionDocument:
        """The stored session document, handed to every sink; their problems are kept."""
        document = self.store.load_session(self.session_id)
        for sink in (self.store, *self.sinks):
            problem = sink.session_finished(document)
            if problem:
                self.problems.append(problem)
        return document


def execute_session(plan: SessionPlan, *, store_path, argv: list[str], sinks: tuple = ()) -> Session:
    """Get the sides ready, open the store, run the session's jobs (every test × topology) through
    the engine with progress, always close cleanly. `sinks`: result sinks besides the store."""
    console = terminal.console(stderr=True)
    observer = ConsoleObserver(console)
    settings = plan.settings
    try:
        sides = ready_sides(plan.sides, observer)
        print_plan(console, f"{plan.kind}: {len(plan.tests)} tests × {settings.runs} runs", sides, settings.topologies)
        jobs = jobs_for(plan.tests, sides, settings, max_runs=plan.max_runs, lone_p_value=plan.lone_p_value)
        store = Store(store_path)            # recovers what a killed redline left in the store …
        carry_request_counts(jobs, plan.tests, settings, store)
        remove_abandoned_workdirs()          # … and in the temp directory
        session_id = store.begin_session(kind=plan.kind, argv=argv, machine=machine.facts())
        for name, document in plan.documents.items():
            store.save_session_document(session_id, name, document)
        started = store.load_session(session_id)
        for sink in (store, *sinks):
            sink.session_started(started)
        status = "interrupted"
        try:
            records = execute_jobs(jobs, engine=local_engine(store, observers=[observer], sinks=sinks),
                                   session_id=session_id, resolver=JobResolver(tests=plan.tests, sides=sides),
                                   floors=plan.floors, lone_p_value=plan.lone_p_value_for)
            status = "finished"
        finally:
            store.finish_session(session_id, status)
    finally:
        observer.close()
    return Session(plan.kind, store, session_id, records, tuple(sinks))


def carry_request_counts(jobs: list, tests: list, settings: RunSettings, store: Store) -> None:
    """--measure instructions: each counted job offers the request count of this store's earlier
    counted runs of its test, which its runs keep while it fits (redline.instructions.window), so
    that sessions of one store count the same requests."""
    from redline.instructions.window import WINDOW_INSTRUCTIONS
    by_name = {test.name: test for test in tests}
    target = settings.window_instructions or WINDOW_INSTRUCTIONS
    for job in jobs:
        if settings.counts(by_name[job.test]):
            job.settings["earlier_window_requests"] = store.earlier_window_requests(job.test, job.topology, target)
