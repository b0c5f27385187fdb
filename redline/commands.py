"""What each CLI command does, on top of the one engine."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from redline import machine, outputs, preparation, terminal, verdict_report
from redline.comparison import (COMPARED_METRICS, apply_false_discovery_control, attach_profiles, compare_test,
                                extra_runs_needed, looks_confidence)
from redline.engine import Engine, RunRecord, RunSettings, Side
from redline.errors import UsageError
from redline.outputs import check_output_paths
from redline.pinning import available_cpus
from redline.preparation import DEFAULT_TOPOLOGY
from redline.report import ConsoleObserver, print_profiles, print_results, write_json
from redline.spec import SpecError, TestSpec, resolve_suites, select
from redline.stats import Verdict, noise_floor_pct
from redline.store import Store, check_output_path
from redline.topology import parse_topology, plan_cpus
from redline.targets import Target, default_target, ensure_built, parse_config_pairs, parse_target
from redline.workdirs import remove_abandoned_workdirs

DEFAULT_SUITE = "quick"
FDR_Q = 0.05          # Benjamini–Hochberg false-discovery rate for verdicts of change

# Exit codes of run, compare and calibrate (README "Exit codes"); 2 is a usage error (errors.py).
EXIT_OK = 0
EXIT_FAILED_RUNS = 1      # a run failed: the session's results are incomplete
EXIT_REGRESSION = 3       # compare --fail-on-regression found a false-discovery-controlled regression


OUTPUT_FLAGS = ("json", "markdown")     # every file a measuring command writes besides the store


def check_before_starting(args, sides: list[Side]) -> list:
    """What can be checked before a server starts or the store is opened: the output paths, the
    build variant and the suites. Returns the tests the arguments select."""
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
    known = preparation.binary_traits(target.binary).config_parameters
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
    records: list[RunRecord]


def _print_plan(console: Console, what: str, sides: list[Side], topologies) -> None:
    """What is about to be measured, on which servers and cores."""
    labels = " vs ".join(f"{s.name + ' ' if s.name else ''}{s.target.label}" for s in sides)
    console.print(f"redline {machine.facts()['redline_version']} {what}; {labels}")
    for topology in topologies:
        if not topology.unsupported:
            plan = plan_cpus(topology, available_cpus())
            console.print(f"{topology.name}: {plan.describe()}")
            for warning in plan.warnings:
                console.print(warning, style="yellow")
    if any(not s.target.managed for s in sides):
        console.print("tcp target: someone else's server — no process control, no server CPU, no profiles",
                      style="yellow")


def execute_session(args, *, kind: str, sides: list[Side], tests: list, more_runs=None) -> Session:
    """Get the sides ready, open the store, run the engine on the tests with progress, always
    close cleanly."""
    topologies = tuple(parse_topology(name) for name in (args.topology or [DEFAULT_TOPOLOGY]))
    console = terminal.console(stderr=True)
    observer = ConsoleObserver(console)
    try:
        sides = ready_sides(sides, observer)
        _print_plan(console, f"{kind}: {len(tests)} tests × {args.runs} runs", sides, topologies)
        store = Store(args.store)            # recovers what a killed redline left in the store …
        remove_abandoned_workdirs()          # … and in the temp directory
        session_id = store.begin_session(kind=kind, argv=sys.argv, machine=machine.facts())
        status = "interrupted"
        try:
            engine = Engine(store=store, observer=observer)
            records = engine.execute(tests=tests, sides=sides, session_id=session_id, more_runs=more_runs,
                                     settings=RunSettings(runs=args.runs, duration_s=args.duration,
                                                          warmup_s=args.warmup, scale=args.scale,
                                                          profile=args.profile, topologies=topologies,
                                                          snapshots=args.snapshots))
            status = "finished"
        finally:
            store.finish_session(session_id, status)
    finally:
        observer.close()
    return Session(kind, store, session_id, records)


def measured_runs_by_test(records: list[RunRecord]) -> dict[str, list[RunRecord]]:
    """The measured runs (not the profiled ones) grouped by test (and topology)."""
    by_test: dict[str, list[RunRecord]] = {}
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


# -- redline run ---------------------------------------------------------------------------------
def run_command(args) -> int:
    target = target_from(args.target, args.config, "--config", args.variant)
    sides = [Side(target)]
    session = execute_session(args, kind="run", sides=sides, tests=check_before_starting(args, sides))
    measured = [r for r in session.records if r.purpose == "measure"]
    out = terminal.console()
    print_results(out, measured)
    print_profiles(out, [r for r in session.records if r.purpose == "profile"])
    if args.json:
        write_json(args.json, measured)
    return session_exit_code(session)


# -- redline compare -----------------------------------------------------------------------------
def compare_command(args) -> int:
    baseline = Side(target_from(args.baseline, args.baseline_config, "--baseline-config", args.variant), "baseline")
    comparison = Side(target_from(args.comparison, args.comparison_config, "--comparison-config", args.variant),
                      "comparison")
    if args.max_runs < args.runs:
        raise UsageError(f"--max-runs ({args.max_runs}) is smaller than --runs ({args.runs})")
    tests = check_before_starting(args, [baseline, comparison])
    floors = Store(args.store).noise_floors() if args.store.exists() else {}
    confidence = looks_confidence(args.runs, args.max_runs)
    lone_p_value = FDR_Q / (len(tests) * len(args.topology or [DEFAULT_TOPOLOGY]) * len(COMPARED_METRICS))

    def more_runs(test, records, runs_so_far):
        key = records[-1].key if records else test.name
        return extra_runs_needed(compare_test(key, [r for r in records if r.key == key], floors,
                                              confidence=confidence), runs_so_far, args.max_runs,
                                 lone_p_value=lone_p_value)

    session = execute_session(args, kind="compare", sides=[baseline, comparison], tests=tests,
                              more_runs=more_runs)
    by_test = measured_runs_by_test(session.records)
    comparisons = [c for test, records in by_test.items()
                   for c in compare_test(test, records, floors, confidence=confidence)]
    apply_false_discovery_control(comparisons, q=FDR_Q)
    if args.profile:
        artifacts = session.store.path.with_name(session.store.path.stem + "-artifacts") / f"compare-{session.session_id}"
        attach_profiles(comparisons, session.records, artifacts)
    session.store.save_comparisons(session.session_id, [c.as_json() for c in comparisons])
    out = terminal.console()
    out.print(verdict_report.terminal_table(comparisons, width=out.width))
    out.print(verdict_report.summary_sentence(comparisons, len(by_test)))
    for line in verdict_report.profile_lines(comparisons):
        out.print(line)
    if args.markdown:
        outputs.write_output(args.markdown, verdict_report.markdown(comparisons, session.records,
                                                         baseline=baseline.target.label,
                                                         comparison=comparison.target.label))
    if args.json:
        verdict_report.write_json(args.json, comparisons, session.records)
    regressions = [c for c in comparisons if c.verdict == Verdict.REGRESSION]
    return session_exit_code(session, regressions=len(regressions) if args.fail_on_regression else 0)


# -- redline calibrate ---------------------------------------------------------------------------
def calibrate_command(args) -> int:
    target = target_from(args.target, args.config, "--config", args.variant)
    sides = [Side(target, "baseline"), Side(target, "comparison")]
    session = execute_session(args, kind="calibrate", sides=sides, tests=check_before_starting(args, sides))
    out = terminal.console()
    by_test = measured_runs_by_test(session.records)
    from rich.table import Table
    table = Table(title="noise floor on this machine (A/A, % change an identical comparison can show)",
                  title_justify="left")
    table.add_column("test")
    for metric in COMPARED_METRICS:
        table.add_column(metric, justify="right")
    for test, records in by_test.items():
        row = [test]
        for metric in COMPARED_METRICS:
            a = [r.metrics[metric] for r in records if r.side == "baseline" and r.status == "ok" and r.metrics.get(metric)]
            b = [r.metrics[metric] for r in records if r.side == "comparison" and r.status == "ok" and r.metrics.get(metric)]
            try:
                floor = noise_floor_pct(a, b)
            except ValueError as exc:
                row.append(f"– ({exc})")
                continue
            session.store.save_noise_floor(test=test, metric=metric, floor_pct=floor,
                                           runs=min(len(a), len(b)), target=target.label)
            row.append(f"{floor:.1f}%")
        table.add_row(*row)
    out.print(table)
    if args.json:
        write_json(args.json, [r for r in session.records if r.purpose == "measure"])
    return session_exit_code(session)


# -- redline hotspots ----------------------------------------------------------------------------
def hotspots_command(args) -> int:
    from redline.profile import format_hot_stacks_table, format_hotspots_table, hotspots
    if not args.store.exists():
        raise UsageError(f"no result store at {args.store}")
    store = Store(args.store)
    session_id = store.latest_profiled_session() if args.session == "latest" else args.session
    rows = store.profiles(session_id) if session_id is not None else []
    if not rows:
        raise UsageError(f"no profiled runs in session {session_id} of {args.store}: run with --profile first")
    names = [f"{r['test']}" + (f" [{r['side']}]" if r["side"] else "") for r in rows]
    result = hotspots([Path(r["folded_path"]) for r in rows], top=args.top, names=names)
    out = terminal.console()
    out.print(f"session {session_id}: {len(rows)} profiled tests")
    out.print(format_hotspots_table(result))
    out.print(format_hot_stacks_table(result))
    return 0


# -- redline history -----------------------------------------------------------------------------
def history_command(args) -> int:
    """One series per test × topology × target (a point per session, every run), its change
    points and the builds on each side of them."""
    import re

    from rich.table import Table

    from redline import history
    check_outputs(args, {"--json": args.json})
    if not 0 < args.p_value < 1:
        raise UsageError(f"--p-value {args.p_value:g}: a significance level is between 0 and 1")
    if not args.store.exists():
        raise UsageError(f"no result store at {args.store}")
    pattern = re.compile(args.name) if args.name else None     # checked by the argument parser
    store = Store(args.store)
    all_series = history.load_series(store.history(args.metric), pattern)
    if not all_series:
        raise UsageError(f"no stored runs with {args.metric}" + (f" for --name {args.name!r}" if args.name else ""))
    floors = store.noise_floors()
    for series in all_series:
        history.analyse(series, p_threshold=args.p_value, noise_floor_pct=floors.get((series.test, args.metric)))
    out = terminal.console(emoji=False)  # a target like bin:x:y is not an emoji
    table = Table(title=f"history of {args.metric} (a point per session, every run counts; p ≤ {args.p_value})",
                  title_justify="left")
    for column in ("test", "topology", "target", "sessions", "runs", "last", "noise run / session",
                   "change points"):
        table.add_column(column, overflow="fold")
    for s in all_series:
        noise = f"{100 * s.noise.within:.1f}% / {100 * s.noise.between:.1f}%" if s.noise else "–"
        table.add_row(s.test, s.topology, s.target, str(len(s.points)), str(sum(len(p.runs) for p in s.points)),
                      verdict_report.format_number(s.points[-1].level), noise,
                      s.problem or str(len(s.change_points) or f"none ≥ {s.min_effect_pct:g}%"))
    out.print(table)
    for s in (s for s in all_series if s.change_points or s.odd_sessions):
        out.print(f"{s.name}:")
        for odd in s.odd_sessions:
            out.print(f"  {history.odd_line(s, odd, verdict_report.format_number)}")
        for cp in s.change_points:
            for line in history.change_lines(s, cp, verdict_report.format_number):
                out.print(f"  {line}")
    if args.json:
        history.write_json(args.json, history.as_json(all_series, metric=args.metric, p_threshold=args.p_value))
    return 0
