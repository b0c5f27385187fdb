"""`redline bisect`: the first commit between --good and --bad at which a metric moved, found by
builds and interleaved A/B runs (the search is redline/bisect/search.py; this module builds, measures,
stores and reports)."""

from __future__ import annotations

import json
from pathlib import Path

from redline.analysis.comparison import MIN_RUNS as COMPARED_MIN_RUNS
from redline.bisect import search
from redline.bisect.measure import DEFAULT_METRIC, StepSettings
from redline.bisect.search import Outcome
from redline.bisect.session import run_bisection
from redline.commands.argtypes import positive_int
from redline.commands.arguments import add_measurement_arguments, add_selection_arguments
from redline.commands.session import check_outputs
from redline.core import metrics, terminal
from redline.core.errors import UsageError
from redline.engine.run_plan import RunSettings
from redline.lab.session import select_tests
from redline.output import files
from redline.output.bisect_report import report_lines, report_markdown
from redline.store.results import Store, inspect_store_file
from redline.suites import TestSpec
from redline.topology import DEFAULT_TOPOLOGY, parse_topology

EXIT_OK, EXIT_UNRESOLVED = 0, 1


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


TIMED_MAX_RUNS = 9
TIMED_MIN_RUNS = COMPARED_MIN_RUNS       # what a timed comparison needs to give a verdict at all


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
    tests = select_tests(args.suites, args.name)
    if args.from_change_point:
        _hand_off(args, tests)
    elif not (args.good and args.bad):
        raise UsageError("bisect needs --good REF and --bad REF (or --from-change-point FILE)")
    args.measure = _measure(args, tests)
    args.metric = args.metric or DEFAULT_METRIC[args.measure]
    _check_metric(args.metric, args.measure)
    if args.measure == metrics.INSTRUCTIONS:
        _check_counted(args)
    else:
        if args.runs < TIMED_MIN_RUNS:
            raise UsageError(f"--runs {args.runs}: a timed bisection step needs at least {TIMED_MIN_RUNS} runs per "
                             "side (the interval over interleaved pairs cannot decide with fewer; --measure "
                             "instructions decides with 2)")
        args.max_runs = args.max_runs or TIMED_MAX_RUNS
        if args.max_runs < args.runs:
            raise UsageError(f"--max-runs ({args.max_runs}) is smaller than --runs ({args.runs})")
    if args.topology and len(args.topology) > 1:
        raise UsageError("bisect follows one topology at a time; give --topology once")
    if args.variant:
        from redline.builder import load_variant
        load_variant(args.variant)
    inspect_store_file(args.store)          # a store that can never be opened ends here, not after a build
    check_outputs(args, {"--json": args.json, "--markdown": args.markdown})
    return repo, tests


def _measure(args, tests: list[TestSpec]) -> str:
    """--measure, else the selected tests' own `redline: measure` when they agree, else time."""
    if args.measure:
        return args.measure
    ways: dict[str, list[str]] = {}
    for test in tests:
        ways.setdefault(test.extensions.get("measure") or metrics.TIME, []).append(test.name)
    if len(ways) > 1:
        told = "; ".join(f"{way}: {', '.join(names[:2])}{' …' if len(names) > 2 else ''}" for way, names in ways.items())
        raise UsageError(f"the selected tests measure in different ways ({told}); bisect one way at a time: "
                         "--measure time or --measure instructions")
    return next(iter(ways), metrics.TIME)


def _check_metric(name: str, measure: str) -> None:
    allowed = [m.name for m in metrics.compared(measure)]
    if name in allowed:
        return
    other = metrics.BY_NAME.get(name)
    if other is not None and other.compared and other.measure == metrics.INSTRUCTIONS:
        raise UsageError(f"--metric {name} is counted under callgrind: add --measure instructions")
    if other is not None and other.compared:
        raise UsageError(f"--metric {name} is a timed metric; --measure instructions decides on {', '.join(allowed)}")
    raise UsageError(f"--metric {name}: bisect decides on a compared metric: {', '.join(allowed)}")


def _check_counted(args) -> None:
    """A counted bisection: its endpoint check needs a spread, its steps take one run each."""
    if args.runs < 2:
        raise UsageError(f"--runs {args.runs}: a counted bisection's endpoint check needs at least 2 runs per side "
                         "(its verdict rule measures their spread)")
    if args.max_runs is not None:
        raise UsageError("--max-runs does not apply to --measure instructions: every step is one run of the "
                         "candidate (more runs do not narrow how far two builds' counts sit apart)")
    from redline.instructions.callgrind import find_valgrind
    find_valgrind()


def _context(args, repo: Path, tests: list[TestSpec]) -> dict:
    """What the report needs besides the outcome: what was bisected, how, where it is stored."""
    return {"repository": str(repo), "metric": args.metric, "variant": args.variant or "default",
            "tests": [t.name for t in tests], "selection": [*args.suites, *(["--name", args.name] if args.name else [])],
            "store": str(args.store), "all_parents": args.all_parents,
            "good_ref": args.good, "bad_ref": args.bad, "measure": args.measure}


def _plan_line(args, commits: int, good, tests: int) -> str:
    if args.measure == metrics.INSTRUCTIONS:
        return (f"bisect: {commits} commits after {good.short}, {tests} tests; counted under callgrind: "
                f"{args.runs} runs per side at the endpoints, then one run per commit; deciding on {args.metric}")
    return f"bisect: {commits} commits after {good.short}, {tests} tests × {args.runs} runs per step, deciding on {args.metric}"


def add_parser(commands) -> None:
    parser = commands.add_parser("bisect", help="the first commit between --good and --bad at which a metric moved "
                                                "(builds, interleaved A/B runs, verdicts)")
    parser.add_argument("target", metavar="git:REPO", help="the repository (the refs are --good and --bad)")
    add_selection_arguments(parser)
    parser.add_argument("--good", metavar="REF", help="a commit before the change")
    parser.add_argument("--bad", metavar="REF", help="a later commit, after the change")
    parser.add_argument("--from-change-point", metavar="FILE[#SESSION]",
                        help="take --good, --bad and --metric from a change point in `redline history --json` "
                             "output (the one on the selected tests, or the one at SESSION)")
    parser.add_argument("--metric",
                        help=f"the metric decided on: {', '.join(m.name for m in metrics.COMPARED)} "
                             "(default server_cpu_us_per_op, or the history's with --from-change-point); with "
                             "--measure instructions: "
                             f"{', '.join(m.name for m in metrics.compared(metrics.INSTRUCTIONS))} "
                             "(default instructions_per_op)")
    parser.add_argument("--all-parents", action="store_true",
                        help="descend into merged branches (default: the first-parent line from good to bad)")
    parser.add_argument("--each-step", action="store_true",
                        help="find every commit that moved the metric by more than a step resolves, not only "
                             "the one across the middle of the change")
    add_measurement_arguments(parser, default_runs=5)
    parser.add_argument("--max-runs", type=positive_int, default=None,
                        help="an undecided step gets more runs, up to this many per side; then the commit is "
                             "skipped as undecidable (default 9; not with --measure instructions, whose steps "
                             "are one run each)")
    parser.add_argument("--markdown", type=Path, metavar="FILE", help="write the report as markdown to FILE")
    parser.set_defaults(func=bisect_command)


def bisect_command(args) -> int:
    repo, tests = check_arguments(args)
    good, path = search.ancestry_path(repo, args.good, args.bad, all_parents=args.all_parents)
    topologies = (parse_topology(args.topology[0] if args.topology else DEFAULT_TOPOLOGY),)
    console = terminal.console(stderr=True)
    store = Store(args.store)
    settings = StepSettings(runs=RunSettings(runs=args.runs, duration_s=args.duration, warmup_s=args.warmup,
                                             scale=args.scale, topologies=topologies, snapshots=args.snapshots,
                                             measure=args.measure, window_instructions=args.window_instructions),
                            metric=args.metric, max_runs=args.max_runs or args.runs, noise_floors=store.noise_floors())
    session_id, outcome, document = run_bisection(store, repo=repo, good=good, path=path, tests=tests, settings=settings,
                                         variant=args.variant, context=_context(args, repo, tests),
                                         plan_line=_plan_line(args, len(path), good, len(tests)), console=console,
                                         profile=args.profile, each_step=args.each_step)
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
