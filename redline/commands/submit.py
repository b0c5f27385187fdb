"""`redline submit`: enqueue a work item for the fleet, every test × topology × platform (docs/fleet.md)."""

from __future__ import annotations

import json
import sys

from redline.commands.argtypes import duration, positive_float, positive_int, regex, whole_seconds
from redline.commands.arguments import add_fleet_measure_arguments, add_redis_argument, platform_name


def add_parser(commands) -> None:
    parser = commands.add_parser("submit", help="enqueue a work item for the fleet: every test × topology × platform")
    parser.add_argument("suites", nargs="*", metavar="SUITE",
                        help="suite YAML files, directories or built-in suite names (default: quick); a path must "
                             "exist on the agents too")
    parser.add_argument("--name", type=regex, metavar="REGEX", help="keep the tests whose name matches REGEX")
    add_redis_argument(parser)
    parser.add_argument("--comparison", required=True, metavar="TARGET", help="the server to judge (git:, src:, bin:)")
    parser.add_argument("--baseline", metavar="TARGET", help="the server to judge it against (default: redis-server on PATH)")
    parser.add_argument("--baseline-config", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--comparison-config", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--variant", metavar="NAME", help="build variant for git:/src: targets")
    parser.add_argument("--platform", action="append", type=platform_name, metavar="NAME",
                        help="platforms to run on (repeatable; default: every platform an agent has registered)")
    parser.add_argument("--topology", action="append", metavar="NAME", help="topologies (default oss-standalone)")
    parser.add_argument("--runs", type=positive_int, default=7, help="runs per side (default 7)")
    parser.add_argument("--max-runs", type=positive_int, default=15, help="inconclusive tests get more, up to this (default 15)")
    parser.add_argument("--duration", type=whole_seconds, metavar="TIME", help="measured time per run (e.g. 10s)")
    parser.add_argument("--warmup", type=duration, default=2.0, metavar="TIME", help="warm-up per run (default 2s)")
    parser.add_argument("--scale", type=positive_float, metavar="S", help="dataset scale")
    parser.add_argument("--profile", action="store_true", help="one profiled run per test and side")
    add_fleet_measure_arguments(parser)
    parser.add_argument("--no-snapshots", dest="snapshots", action="store_false")
    parser.add_argument("--json", action="store_true", help="print {\"work_id\": …, \"jobs\": N} instead of the id")
    parser.set_defaults(func=submit_command)


def submit_command(args) -> int:
    from redline.core.errors import UsageError
    from redline.fleet import work
    from redline.fleet.process import connect
    from redline.lab.session import select_tests
    sides = [_side("baseline", args.baseline, args.baseline_config, args.variant),
             _side("comparison", args.comparison, args.comparison_config, args.variant)]
    if args.max_runs < args.runs:
        raise UsageError(f"--max-runs ({args.max_runs}) is smaller than --runs ({args.runs})")
    tests = select_tests(args.suites, args.name)
    client = connect(args.redis, args.redis_password_file)
    item = work.new_work(client, source="cli", sides=sides, platforms=args.platform, tests=tests,
                         topologies=args.topology,
                         settings=work.Settings(runs=args.runs, max_runs=args.max_runs, duration_s=args.duration,
                                                warmup_s=args.warmup, scale=args.scale, profile=args.profile,
                                                snapshots=args.snapshots, measure=args.measure,
                                                window_instructions=args.window_instructions))
    jobs = work.enqueue(client, item)
    if args.json:
        print(json.dumps({"work_id": item.work_id, "jobs": jobs, "platforms": item.platforms}))
    else:
        print(item.work_id)
        print(f"{jobs} jobs on {', '.join(item.platforms)}", file=sys.stderr)
    return 0


def _side(name: str, text: str | None, pairs: list[str], variant: str | None):
    """A side as the job carries it, checked here (target scheme, binary, NAME=VALUE pairs)."""
    from redline.engine.job import SideSpec
    from redline.lab.session import target_from
    target = target_from(text, pairs, f"--{name}-config", variant)
    return SideSpec(name, target.spec, tuple(sorted(target.config.items())), variant)
