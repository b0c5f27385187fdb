"""`redline compare`: interleaved A/B runs of a baseline and a comparison, and their verdicts."""

from __future__ import annotations

from pathlib import Path

from redline.analysis.stats import FUTILITY_CHANCE, Verdict
from redline.commands.argtypes import positive_int, session_id
from redline.commands.arguments import (COMPARE_MAX_RUNS, EXIT_STATUS, Parser, add_measurement_arguments,
                                       add_selection_arguments, measurement_defaults)
from redline.commands.session import (DUET_HELP, check_before_starting, check_duet, execute, finish,
                                      run_settings)
from redline.core.errors import UsageError
from redline.engine.run_plan import Side
from redline.export.options import add_export_arguments
from redline.lab.compare import compare_plan, session_verdicts
from redline.lab.compare_resume import (EarlierCompare, carry_ended_tests, earlier_compare, refuse_measurement_flags,
                                        with_outputs_of)
from redline.lab.session import target_from
from redline.store.results import Store


def add_parser(commands) -> None:
    parser = commands.add_parser("compare", help="A/B: two servers, interleaved runs, verdicts with confidence intervals",
                                 epilog=EXIT_STATUS)
    add_selection_arguments(parser)
    parser.add_argument("--baseline", metavar="TARGET", help="baseline server (default: redis-server on PATH)")
    parser.add_argument("--comparison", metavar="TARGET", help="comparison server (default: redis-server on PATH)")
    parser.add_argument("--baseline-config", action="append", default=[], metavar="NAME=VALUE",
                        help="server configuration for the baseline (repeatable)")
    parser.add_argument("--comparison-config", action="append", default=[], metavar="NAME=VALUE",
                        help="server configuration for the comparison (repeatable)")
    add_measurement_arguments(parser, default_runs=7)
    parser.add_argument("--max-runs", type=positive_int, default=None,
                        help=f"inconclusive tests get more runs, up to this many per side, while those runs have at "
                             f"least a {100 * FUTILITY_CHANCE:g}%% chance to decide (default {COMPARE_MAX_RUNS}; "
                             "with --measure instructions: --runs)")
    parser.add_argument("--duet", action="store_true", help=DUET_HELP)
    parser.add_argument("--fail-on-regression", action="store_true",
                        help="exit 3 when a regression survives Benjamini–Hochberg false-discovery control "
                             "(exit 1, as always, when a run failed)")
    parser.add_argument("--markdown", type=Path, metavar="FILE", help="write a pull-request comment to FILE")
    parser.add_argument("--resume", type=session_id, metavar="SESSION",
                        help="continue an interrupted compare of this store ('latest') with its own suites, targets "
                             "and settings: tests that ended are not measured again, the verdicts cover every test")
    add_export_arguments(parser)
    parser.set_defaults(func=compare_command)


def compare_command(args) -> int:
    earlier = None
    if args.resume is not None:
        earlier, args = resumed_arguments(args)
    baseline = Side(target_from(args.baseline, args.baseline_config, "--baseline-config", args.variant), "baseline")
    comparison = Side(target_from(args.comparison, args.comparison_config, "--comparison-config", args.variant),
                      "comparison")
    if args.max_runs < args.runs:
        raise UsageError(f"--max-runs ({args.max_runs}) is smaller than --runs ({args.runs})")
    check_duet(args, [baseline, comparison])
    tests = check_before_starting(args, [baseline, comparison])
    floors = Store(args.store).noise_floors() if args.store.exists() else {}
    plan = compare_plan([baseline, comparison], tests, run_settings(args), max_runs=args.max_runs, floors=floors)
    if earlier is not None:
        carry_ended_tests(plan, earlier)
    session = execute(args, plan)
    comparisons = session_verdicts(session, plan)
    regressions = [c for c in comparisons if c.verdict == Verdict.REGRESSION]
    return finish(args, session, regressions=len(regressions) if args.fail_on_regression else 0)


def resumed_arguments(args) -> tuple[EarlierCompare, object]:
    """`--resume SESSION`: the stored compare, and its arguments with this command's store and
    outputs. Suites, targets or settings given with --resume are refused."""
    parser = Parser(prog="redline")         # compare's own parser: the stored argv is a compare's
    add_parser(parser.add_subparsers(dest="command", parser_class=Parser))
    defaults = parser.parse_args(["compare"])
    measurement_defaults(defaults)
    refuse_measurement_flags(args, defaults)
    if not args.store.exists():
        raise UsageError(f"--resume {args.resume}: {args.store} does not exist")
    store = Store(args.store)
    try:
        earlier = earlier_compare(store, args.resume)
    finally:
        store.close()
    try:
        earlier_args = parser.parse_args(earlier.argv)
        measurement_defaults(earlier_args)
    except UsageError as exc:
        raise UsageError(f"--resume {earlier.session_id}: its command line no longer parses: {exc}") from exc
    return earlier, with_outputs_of(earlier_args, args)
