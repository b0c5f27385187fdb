"""`redline run`: measure the selected tests on one target."""

from __future__ import annotations

from redline.commands.arguments import EXIT_STATUS, add_measurement_arguments, add_selection_arguments
from redline.commands.session import check_before_starting, execute, finish, run_settings
from redline.engine.run_plan import Side
from redline.export.options import add_export_arguments
from redline.lab.session import SessionPlan, target_from


def add_parser(commands) -> None:
    parser = commands.add_parser("run", help="measure suites against one server and store every run",
                                 epilog=EXIT_STATUS)
    add_selection_arguments(parser)
    parser.add_argument("--target", default=None, metavar="TARGET",
                        help="bin:/path/to/redis-server or tcp://host:port (default: redis-server on PATH)")
    parser.add_argument("--config", action="append", default=[], metavar="NAME=VALUE",
                        help="server configuration for the target (repeatable)")
    add_measurement_arguments(parser, default_runs=1)
    add_export_arguments(parser)
    parser.set_defaults(func=run_command)


def run_command(args) -> int:
    target = target_from(args.target, args.config, "--config", args.variant)
    sides = [Side(target)]
    tests = check_before_starting(args, sides)
    session = execute(args, SessionPlan("run", sides, tests, run_settings(args)))
    return finish(args, session)
