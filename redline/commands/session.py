"""What run, compare and calibrate share on the command line: checking the arguments before
anything starts, the run settings the flags give, executing the session (redline.lab.session),
and the exit status."""

from __future__ import annotations

import sys
from pathlib import Path

from redline.core import metrics, terminal
from redline.core.errors import UsageError
from redline.engine.run_plan import RunSettings, Side
from redline.export.jsonl import JsonLinesSink
from redline.export.sink import live_export
from redline.lab.session import Session, SessionPlan, execute_session, select_tests
from redline.output import files, renderer
from redline.output.files import check_output_paths
from redline.store.results import check_output_path, inspect_store_file
from redline.suites import TestSpec
from redline.topology import DEFAULT_TOPOLOGY, parse_topology

# Exit codes of run, compare and calibrate (README "Exit codes"); 2 is a usage error (core/errors.py).
EXIT_OK = 0
EXIT_FAILED_RUNS = 1      # a run failed: the session's results are incomplete
EXIT_REGRESSION = 3       # compare --fail-on-regression found a false-discovery-controlled regression


OUTPUT_FLAGS = ("json", "markdown", "html")     # the files rendered from the session when it ends
STREAM_FLAGS = ("jsonl",)                       # the files written while it runs


def check_before_starting(args, sides: list[Side]) -> list[TestSpec]:
    """What can be checked before a server starts or the store is opened: the store file, the
    output paths, the build variant and the suites. Returns the tests the arguments select."""
    inspect_store_file(args.store)          # a store that can never be opened ends here, not after a build
    check_outputs(args, {f"--{name}": getattr(args, name, None) for name in OUTPUT_FLAGS + STREAM_FLAGS})
    if args.variant and not any(side.target.build for side in sides):
        raise UsageError(f"--variant {args.variant}: only git: and src: targets are built, and "
                         f"{' and '.join(side.target.spec for side in sides)} is not one")
    tests = select_tests(args.suites, args.name)
    if getattr(args, "measure", None) is None and any(test.extensions.get("measure") == metrics.INSTRUCTIONS
                                                       for test in tests):
        from redline.instructions.callgrind import find_valgrind
        find_valgrind()          # a suite's own `measure: instructions` needs valgrind as the flag does
    return tests


DUET_HELP = ("timed A/B as duets: run i of both sides at once, both servers sharing the same cores, so that what "
             "the machine does meanwhile falls on both; server CPU per operation keeps its meaning, throughput and "
             "latency are each side's share (docs/statistics.md, \"Duets\")")


def check_duet(args, sides: list[Side]) -> None:
    """--duet needs two servers redline runs on this machine, measured by time."""
    if not getattr(args, "duet", False):
        return
    if getattr(args, "measure", None) == metrics.INSTRUCTIONS:
        raise UsageError("--duet: counted runs (--measure instructions) do not feel the machine's noise; "
                         "a duet is for timed runs")
    remote = [side.target.spec for side in sides if not side.target.managed]
    if remote:
        raise UsageError(f"--duet: both servers must run on this machine to share its cores, and {remote[0]} "
                         "is a server redline does not run")


def check_outputs(args, outputs: dict[str, Path | None]) -> None:
    """The files a command will write ({flag: path}): never the store (checked before the file is
    touched), and writable."""
    for flag, path in outputs.items():
        if path is not None:
            check_output_path(args.store, path, flag)
    check_output_paths(outputs)


def run_settings(args) -> RunSettings:
    """The run settings the measuring flags give (--runs, --duration, --topology, --measure, …)."""
    topologies = tuple(parse_topology(name) for name in (args.topology or [DEFAULT_TOPOLOGY]))
    return RunSettings(runs=args.runs, duration_s=args.duration, warmup_s=args.warmup, scale=args.scale,
                       profile=args.profile, topologies=topologies, snapshots=args.snapshots,
                       measure=args.measure, window_instructions=args.window_instructions,
                       duet=getattr(args, "duet", False))


def session_sinks(args) -> tuple:
    """The result sinks the flags ask for besides the store (--export URL, --jsonl FILE), made and
    checked before anything is measured."""
    export = live_export(args)
    lines = JsonLinesSink(args.jsonl) if getattr(args, "jsonl", None) else None
    return tuple(sink for sink in (export, lines) if sink)


def execute(args, plan: SessionPlan) -> Session:
    """The planned session on this machine, into the store and the sinks the flags ask for."""
    return execute_session(plan, store_path=args.store, argv=sys.argv, sinks=session_sinks(args))


def finish(args, session: Session, *, regressions: int = 0) -> int:
    """The end every measuring command shares, once its verdicts and documents are stored: the
    sinks hear the session end, the terminal shows it, --json/--markdown/--html are written from
    the stored document, and the exit status."""
    document = session.close()
    sys.stdout.write(renderer("terminal")(document))
    for flag in OUTPUT_FLAGS:
        path = getattr(args, flag, None)
        if path is not None:
            files.write_output(path, renderer(flag)(document))
            if flag == "html":
                said_written(path, f"session {session.session_id}")
    return session_exit_code(session, regressions=regressions)


def said_written(path: Path, what: str) -> None:
    size = path.stat().st_size / 1e6
    terminal.console(stderr=True).print(f"wrote {path} ({what}, {size:.1f} MB)")


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
    for problem in session.problems:
        console.print(problem, style="red", soft_wrap=True)
    code = EXIT_FAILED_RUNS if failed else EXIT_REGRESSION if regressions else EXIT_OK
    return code or (EXIT_FAILED_RUNS if session.problems else EXIT_OK)
