"""What the commands' parsers share: the parser class (a usage error is one line, exit 2), the
arguments that select tests and set how they are measured, the fleet's --redis and --platform,
and the defaults that depend on --measure."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from redline.commands.argtypes import duration, positive_float, positive_int, regex, store_path, whole_seconds
from redline.core import metrics
from redline.core.errors import UsageError

# What redline.commands.session.session_exit_code decides (README "Exit codes").
EXIT_STATUS = ("exit status: 0 every run finished (skips included); 1 a run failed or the store failed "
               "(disk full, locked); 2 bad input; 3 compare --fail-on-regression found a regression "
               "(1 wins when runs failed too); 130 interrupted")

COMPARE_MAX_RUNS = 15
INSTRUCTION_RUNS = 3       # --measure instructions: near-deterministic runs need few (docs/measure-instructions.md)
DEFAULT_REDIS = "redis://127.0.0.1:6379/0"


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line: `redline: error: …`, exit code 2."""

    def error(self, message: str):
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def add_selection_arguments(parser: argparse.ArgumentParser) -> None:
    """Which tests: suites and a name filter."""
    parser.add_argument("suites", nargs="*", metavar="SUITE",
                        help="a suite YAML file, a directory of them, or a built-in suite name (default: quick)")
    parser.add_argument("--name", type=regex, metavar="REGEX", help="keep the tests whose name matches REGEX")


def add_store_argument(parser: argparse.ArgumentParser, help: str | None = None) -> None:
    parser.add_argument("--store", type=store_path, default=Path("redline.db"), metavar="PATH",
                        help=help or "SQLite result store (default ./redline.db)")


def add_measurement_arguments(parser: argparse.ArgumentParser, *, default_runs: int) -> None:
    parser.add_argument("--runs", type=positive_int, default=None,
                        help=f"runs per test (default {default_runs}; {INSTRUCTION_RUNS} with --measure instructions)")
    parser.set_defaults(time_runs=default_runs)
    parser.add_argument("--measure", choices=(metrics.TIME, metrics.INSTRUCTIONS), default=None,
                        help="time (default; a suite may say `redline: measure: instructions`): throughput, latency, "
                             "CPU per op; instructions: the server under valgrind's callgrind, a fixed request count, "
                             "instructions and estimated cycles per op (docs/measure-instructions.md)")
    add_window_argument(parser, "--measure instructions: size the fixed request count for a window of at least N "
                                "instructions (default 150000000)")
    parser.add_argument("--duration", type=whole_seconds, metavar="TIME",
                        help="measured time per run in whole seconds, replacing the suite's --test-time "
                             "(e.g. 10s, 2m)")
    parser.add_argument("--warmup", type=duration, default=2.0, metavar="TIME",
                        help="warm-up before each measured window, excluded from every metric "
                             "(default 2s; e.g. 500ms, 0s)")
    add_scale_argument(parser)
    add_store_argument(parser)
    add_snapshots_argument(parser)
    parser.add_argument("--json", type=Path, metavar="FILE", help="write every run as JSON to FILE")
    parser.add_argument("--jsonl", type=Path, metavar="FILE",
                        help="append every run document to FILE as one line of JSON as soon as it is stored "
                             "(follow a long session with `tail -f`)")
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


def add_fleet_measure_arguments(parser: argparse.ArgumentParser) -> None:
    """--measure and --window-instructions of a work item (submit, api): carried by each of its jobs."""
    parser.add_argument("--measure", choices=(metrics.TIME, metrics.INSTRUCTIONS), default=None,
                        help="time (default; a suite may say `redline: measure: instructions`) or instructions: the "
                             "agents run the servers under valgrind's callgrind (docs/measure-instructions.md)")
    add_window_argument(parser, "--measure instructions: size the fixed request count for a window of at least N "
                                "instructions (default 150000000)")


def add_window_argument(parser: argparse.ArgumentParser, help: str) -> None:
    """--window-instructions: the counted window; `help` says its default for this command."""
    parser.add_argument("--window-instructions", type=positive_int, metavar="N", help=help)


def add_scale_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scale", type=positive_float, metavar="S",
                        help="scale of generated datasets (default: the suite's dataset-scale, else 1)")


def add_snapshots_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-snapshots", dest="snapshots", action="store_false",
                        help="always prepare datasets from scratch instead of restoring cached RDB snapshots")


def measurement_defaults(args) -> None:
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


REDIS_VARIABLE = "REDLINE_REDIS"
PASSWORD_FILE_VARIABLE = "REDLINE_REDIS_PASSWORD_FILE"


def add_redis_argument(parser: argparse.ArgumentParser) -> None:
    """--redis URL and --redis-password-file FILE: a password never needs to be on a command line
    (it is in the file, or in the URL of $REDLINE_REDIS)."""
    parser.add_argument("--redis", default=os.environ.get(REDIS_VARIABLE, DEFAULT_REDIS), metavar="URL",
                        help="the fleet's Redis: redis://[user@]host:port/db, rediss:// for TLS "
                             f"(default ${REDIS_VARIABLE}, which may hold the password: redis://:PASSWORD@…; "
                             f"else {DEFAULT_REDIS})")
    password_file = os.environ.get(PASSWORD_FILE_VARIABLE)
    parser.add_argument("--redis-password-file", type=Path, default=Path(password_file) if password_file else None,
                        metavar="FILE", help="the Redis password, the first line of FILE (`fleet local` writes one, "
                                             f"readable by its user only; default ${PASSWORD_FILE_VARIABLE})")


def platform_name(text: str) -> str:
    from redline.fleet.work import PLATFORM_NAME
    if not PLATFORM_NAME.match(text):
        raise argparse.ArgumentTypeError(f"platform name {text!r}: letters, digits, '_', '.', '-' (at most 64)")
    return text


def add_allow_arguments(parser: argparse.ArgumentParser) -> None:
    """What the jobs an agent takes may name (redline.fleet.policy): the fleet owner's allow-list."""
    from redline.fleet.policy import allowance
    parser.add_argument("--allow-target", action="append", type=allowance, metavar="PATTERN",
                        help="what jobs may name (repeatable): bin:PATH, git:DIR (repositories under DIR), src:DIR, "
                             "suite:DIR (suite files under DIR; built-in suites always), tcp://HOST:PORT; default: "
                             "the redis-server on PATH. A job naming anything else is dead-lettered unrun")
    parser.add_argument("--allow-targets-file", action="append", type=Path, metavar="FILE",
                        help="more --allow-target patterns, one a line ('#' comments)")
