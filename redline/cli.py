"""redline's command line: `redline run`, `redline suites`, …"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
from pathlib import Path

from redline import __version__
from redline.core import metrics
from redline.commands.argtypes import duration, positive_float, positive_int, regex, session_id, store_path, whole_seconds
from redline.commands.build import add_build_parser
from redline.commands.fleet import add_fleet_parsers
from redline.core.errors import RunError, UsageError
from redline.export.options import add_export_arguments, add_placement_arguments, since_date
from redline.core.terminal import printable
from redline.commands.suites import add_suites_parser

# What redline.commands.session_exit_code decides (README "Exit codes").
EXIT_STATUS = ("exit status: 0 every run finished (skips included); 1 a run failed or the store failed "
               "(disk full, locked); 2 bad input; 3 compare --fail-on-regression found a regression "
               "(1 wins when runs failed too); 130 interrupted")


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line: `redline: error: …`, exit code 2."""

    def error(self, message: str):
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def add_selection_arguments(parser: argparse.ArgumentParser) -> None:
    """Which tests: suites and a name filter (shared by run and compare)."""
    parser.add_argument("suites", nargs="*", metavar="SUITE",
                        help="a suite YAML file, a directory of them, or a built-in suite name (default: quick)")
    parser.add_argument("--name", type=regex, metavar="REGEX", help="keep the tests whose name matches REGEX")


COMPARE_MAX_RUNS = 15
INSTRUCTION_RUNS = 3       # --measure instructions: near-deterministic runs need few (docs/measure-instructions.md)


def add_measurement_arguments(parser: argparse.ArgumentParser, *, default_runs: int) -> None:
    parser.add_argument("--runs", type=positive_int, default=None,
                        help=f"runs per test (default {default_runs}; {INSTRUCTION_RUNS} with --measure instructions)")
    parser.set_defaults(time_runs=default_runs)
    parser.add_argument("--measure", choices=(metrics.TIME, metrics.INSTRUCTIONS), default=None,
                        help="time (default; a suite may say `redline: measure: instructions`): throughput, latency, "
                             "CPU per op; instructions: the server under valgrind's callgrind, a fixed request count, "
                             "instructions and estimated cycles per op (docs/measure-instructions.md)")
    parser.add_argument("--window-instructions", type=positive_int, metavar="N",
                        help="--measure instructions: size the fixed request count for a window of at least N "
                             "instructions (default 150000000)")
    parser.add_argument("--duration", type=whole_seconds, metavar="TIME",
                        help="measured time per run in whole seconds, replacing the suite's --test-time "
                             "(e.g. 10s, 2m)")
    parser.add_argument("--warmup", type=duration, default=2.0, metavar="TIME",
                        help="warm-up before each measured window, excluded from every metric "
                             "(default 2s; e.g. 500ms, 0s)")
    parser.add_argument("--scale", type=positive_float, metavar="S",
                        help="scale of generated datasets (default: the suite's dataset-scale, else 1)")
    parser.add_argument("--store", type=store_path, default=Path("redline.db"), metavar="PATH",
                        help="SQLite result store (default ./redline.db)")
    parser.add_argument("--no-snapshots", dest="snapshots", action="store_false",
                        help="always prepare datasets from scratch instead of restoring cached RDB snapshots")
    parser.add_argument("--json", type=Path, metavar="FILE", help="write every run as JSON to FILE")
    parser.add_argument("--html", type=Path, metavar="FILE",
                        help="write the session's self-contained HTML report to FILE (as `redline report`)")
    parser.add_argument("--topology", action="append", metavar="NAME",
                        help="oss-standalone (default), oss-standalone-NN-io-threads, oss-cluster-NN-primaries, "
                             "oss-standalone-NN-replicas; repeatable; tests that do not list it are skipped")
    parser.add_argument("--variant", metavar="NAME",
                        help="build variant for git:/src: targets (default: default; see `redline build --list-variants`)")
    parser.add_argument("--profile", action="store_true",
                        help="after the measured runs, one extra run per test and side under perf: "
                             "flame graph and top symbols (never part of a metric)")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="redline", description="A performance lab for Redis-protocol servers.")
    parser.add_argument("--version", action="version", version=f"redline {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)

    run = commands.add_parser("run", help="measure suites against one server and store every run",
                              epilog=EXIT_STATUS)
    add_selection_arguments(run)
    run.add_argument("--target", default=None, metavar="TARGET",
                     help="bin:/path/to/redis-server or tcp://host:port (default: redis-server on PATH)")
    run.add_argument("--config", action="append", default=[], metavar="NAME=VALUE",
                     help="server configuration for the target (repeatable)")
    add_measurement_arguments(run, default_runs=1)
    add_export_arguments(run)
    run.set_defaults(func=_command("run"))

    compare = commands.add_parser("compare", help="A/B: two servers, interleaved runs, verdicts with confidence intervals",
                                  epilog=EXIT_STATUS)
    add_selection_arguments(compare)
    compare.add_argument("--baseline", metavar="TARGET", help="baseline server (default: redis-server on PATH)")
    compare.add_argument("--comparison", metavar="TARGET", help="comparison server (default: redis-server on PATH)")
    compare.add_argument("--baseline-config", action="append", default=[], metavar="NAME=VALUE",
                         help="server configuration for the baseline (repeatable)")
    compare.add_argument("--comparison-config", action="append", default=[], metavar="NAME=VALUE",
                         help="server configuration for the comparison (repeatable)")
    add_measurement_arguments(compare, default_runs=7)
    compare.add_argument("--max-runs", type=positive_int, default=None,
                         help=f"inconclusive tests get more runs, up to this many per side (default {COMPARE_MAX_RUNS}; "
                              "with --measure instructions: --runs)")
    compare.add_argument("--fail-on-regression", action="store_true",
                         help="exit 3 when a regression survives Benjamini–Hochberg false-discovery control "
                              "(exit 1, as always, when a run failed)")
    compare.add_argument("--markdown", type=Path, metavar="FILE", help="write a pull-request comment to FILE")
    add_export_arguments(compare)
    compare.set_defaults(func=_command("compare"))

    calibrate = commands.add_parser("calibrate", help="A/A runs: measure each test's noise floor on this machine",
                                    epilog=EXIT_STATUS)
    add_selection_arguments(calibrate)
    calibrate.add_argument("--target", metavar="TARGET", help="server (default: redis-server on PATH)")
    calibrate.add_argument("--config", action="append", default=[], metavar="NAME=VALUE")
    add_measurement_arguments(calibrate, default_runs=7)
    calibrate.set_defaults(func=_command("calibrate"))

    hot = commands.add_parser("hotspots", help="the hottest symbols and stacks across every profiled test of a session")
    hot.add_argument("session", nargs="?", default="latest", type=session_id, metavar="SESSION",
                     help="session id (see `redline run` output) or 'latest' (default)")
    hot.add_argument("--store", type=store_path, default=Path("redline.db"), metavar="PATH")
    hot.add_argument("--top", type=positive_int, default=20, help="rows per table (default 20)")
    hot.set_defaults(func=_command("hotspots"))

    history = commands.add_parser("history", help="stored results over time, with change points")
    history.add_argument("--name", type=regex, metavar="REGEX", help="only tests whose name matches REGEX")
    history.add_argument("--metric", default="ops_per_sec",
                         help=f"{', '.join(m.name for m in metrics.COMPARED)} or any other stored metric "
                              f"({', '.join(m.name for m in metrics.REGISTRY if not m.compared)}); "
                              "default ops_per_sec")
    history.add_argument("--p-value", type=positive_float, default=0.001,
                         help="change-point significance (default 0.001); a change also needs 2 sessions on each "
                              "side and at least max(2%%, 2 × the calibrated noise floor), else 3%%")
    history.add_argument("--store", type=store_path, default=Path("redline.db"), metavar="PATH")
    history.add_argument("--json", type=Path, metavar="FILE",
                         help="write the series (every session's runs and build) and change points as JSON to FILE")
    history.set_defaults(func=_command("history"))

    export = commands.add_parser("export", help="stored results to other tools: RedisTimeSeries in the upstream scheme")
    sinks = export.add_subparsers(dest="sink", metavar="SINK", parser_class=Parser, required=True)
    rts = sinks.add_parser("redistimeseries", help="a session's runs and verdicts as RedisTimeSeries series in the "
                                                   "Redis Benchmarks Specification's key scheme (docs/export.md)")
    rts.add_argument("session", nargs="?", default=None, type=session_id, metavar="SESSION",
                     help="session id or 'latest' (default)")
    rts.add_argument("--since", type=since_date, metavar="DATE",
                     help="every session started since DATE (YYYY-MM-DD or ISO 8601 time, UTC)")
    rts.add_argument("--redis", required=True, metavar="URL",
                     help="redis://[user:password@]host:port[/db], rediss:// for TLS, unix://path")
    rts.add_argument("--store", type=store_path, default=Path("redline.db"), metavar="PATH")
    add_placement_arguments(rts)
    rts.set_defaults(func=_command("export"))

    report = commands.add_parser("report", help="one self-contained HTML file: a session's report, or --history")
    report.add_argument("session", nargs="?", default=None, type=session_id, metavar="SESSION",
                        help="session id or 'latest' (default)")
    report.add_argument("--history", action="store_true",
                        help="every series (test × topology × target) over its sessions, with change points")
    report.add_argument("--name", type=regex, metavar="REGEX", help="with --history: only tests whose name matches")
    report.add_argument("--metric", metavar="M", help=f"with --history: the metric (default ops_per_sec; any of "
                                                      f"{', '.join(metrics.NAMES)})")
    report.add_argument("--p-value", type=positive_float, default=0.001,
                        help="with --history: change-point significance (default 0.001)")
    report.add_argument("--store", type=store_path, default=Path("redline.db"), metavar="PATH")
    report.add_argument("-o", "--output", type=Path, required=True, metavar="FILE", help="the HTML file to write")
    report.set_defaults(func=_command("report"))

    bisect = commands.add_parser("bisect", help="the first commit between --good and --bad at which a metric moved "
                                                "(builds, interleaved A/B runs, verdicts)")
    bisect.add_argument("target", metavar="git:REPO", help="the repository (the refs are --good and --bad)")
    add_selection_arguments(bisect)
    bisect.add_argument("--good", metavar="REF", help="a commit before the change")
    bisect.add_argument("--bad", metavar="REF", help="a later commit, after the change")
    bisect.add_argument("--from-change-point", metavar="FILE[#SESSION]",
                        help="take --good, --bad and --metric from a change point in `redline history --json` "
                             "output (the one on the selected tests, or the one at SESSION)")
    bisect.add_argument("--metric",
                        help=f"the metric decided on: {', '.join(m.name for m in metrics.COMPARED)} "
                             "(default server_cpu_us_per_op, or the history's with --from-change-point); with "
                             "--measure instructions: "
                             f"{', '.join(m.name for m in metrics.compared(metrics.INSTRUCTIONS))} "
                             "(default instructions_per_op)")
    bisect.add_argument("--all-parents", action="store_true",
                        help="descend into merged branches (default: the first-parent line from good to bad)")
    add_measurement_arguments(bisect, default_runs=5)
    bisect.add_argument("--max-runs", type=positive_int, default=None,
                        help="an undecided step gets more runs, up to this many per side; then the commit is "
                             "skipped as undecidable (default 9; not with --measure instructions, whose steps "
                             "are one run each)")
    bisect.add_argument("--markdown", type=Path, metavar="FILE", help="write the report as markdown to FILE")
    bisect.set_defaults(func=_command("bisect"))

    add_build_parser(commands)

    add_suites_parser(commands)

    add_fleet_parsers(commands)
    return parser


def _command(name: str):
    """`redline.commands.NAME.NAME_command`, imported when it runs (keeps `redline --help` fast)."""
    def call(args) -> int:
        module = importlib.import_module(f"redline.commands.{name}")
        return getattr(module, f"{name}_command")(args)
    return call


def _measurement_defaults(args) -> None:
    """Defaults that depend on --measure: the run count (and compare's --max-runs: no adaptive extra
    runs under callgrind); --duration means nothing when a run sends a fixed number of requests."""
    if not hasattr(args, "time_runs"):
        return
    instructions = args.measure == metrics.INSTRUCTIONS
    if instructions and args.duration is not None:
        raise UsageError("--duration does not apply to --measure instructions: each run sends a fixed number "
                         "of requests (see --window-instructions)")
    if instructions:
        from redline.instructions.callgrind import find_valgrind
        find_valgrind()                     # one line and exit 1 before anything starts when it is missing
    if args.runs is None:
        args.runs = INSTRUCTION_RUNS if instructions else args.time_runs
    if args.command == "compare" and args.max_runs is None:
        args.max_runs = args.runs if instructions else COMPARE_MAX_RUNS


def _terminate(signum, frame):
    """SIGTERM ends a run like Ctrl-C: the current run is marked interrupted, servers are stopped."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    signal.signal(signal.SIGTERM, _terminate)
    try:
        args = build_parser().parse_args(argv)
        _measurement_defaults(args)
        if not getattr(args, "func", None):
            build_parser().print_help()
            return 2
        return args.func(args)
    except UsageError as exc:      # one line, whatever the input held (a path with a newline)
        print(printable(f"redline: error: {exc}").replace("\n", "\\n"), file=sys.stderr)
        return exc.exit_code
    except RunError as exc:        # may carry a log's tail (a failed build): lines kept, controls shown
        print(printable(f"redline: error: {exc}"), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("redline: interrupted; finished runs are stored, the current one is marked interrupted",
              file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
