"""`redline collector`: the fleet's results stored once; verdicts and comments (redline/fleet/collector.py)."""

from __future__ import annotations

import os
from pathlib import Path

from redline.commands.arguments import add_redis_argument, add_store_argument
from redline.export.options import EXPORT_VARIABLE, add_export_arguments


def add_parser(commands) -> None:
    parser = commands.add_parser("collector", help="store the fleet's results once; verdicts and comments")
    add_redis_argument(parser)
    add_store_argument(parser)
    parser.add_argument("--collector-name", default="collector", metavar="NAME",
                        help="consumer name; keep it across restarts (default collector)")
    parser.add_argument("--github-token-file", type=Path, metavar="FILE",
                        help="post each pull request's comment with this token")
    parser.add_argument("--github-api", default="https://api.github.com", metavar="URL")
    add_bisect_arguments(parser)
    add_export_arguments(parser, platform_default="the fleet platform that ran the job",
                         what=f"as results are stored; --export defaults to ${EXPORT_VARIABLE}")
    parser.set_defaults(func=collector_command)


def add_bisect_arguments(parser) -> None:
    """The closed loop's caps, triggers and how it measures (docs/fleet.md "The closed loop"); `fleet local`
    passes them to its collector."""
    from redline.commands.argtypes import (bisect_agent_time, bisect_max_concurrent, bisect_max_queued,
                                           bisect_max_steps, bisect_stall_after)
    from redline.fleet.admission import DEFAULT_MAX_QUEUED, DEFAULT_STALL_AFTER_S
    from redline.fleet.bisection import DEFAULT_MAX_CONCURRENT, DEFAULT_MAX_STEPS, DEFAULT_MEASURE, MEASURES
    parser.add_argument("--bisect-max-concurrent", type=bisect_max_concurrent, default=DEFAULT_MAX_CONCURRENT,
                        metavar="N", help="open fleet bisections per repository at most (0: the loop is off; "
                                          f"default {DEFAULT_MAX_CONCURRENT})")
    parser.add_argument("--bisect-max-steps", type=bisect_max_steps, default=DEFAULT_MAX_STEPS, metavar="N",
                        help=f"pairs of commits one bisection measures at most, its confirmation included "
                             f"(default {DEFAULT_MAX_STEPS})")
    parser.add_argument("--bisect-max-queued", type=bisect_max_queued, default=DEFAULT_MAX_QUEUED, metavar="N",
                        help="changes per repository waiting for a bisection at most; beyond, refused "
                             f"(default {DEFAULT_MAX_QUEUED})")
    parser.add_argument("--bisect-agent-time", type=bisect_agent_time, default=None, metavar="TIME",
                        help="agent time per repository in any 24 hours (e.g. 8h); spent, bisections queue "
                             "and wait (default: no cap)")
    parser.add_argument("--bisect-stall-after", type=bisect_stall_after, default=DEFAULT_STALL_AFTER_S,
                        metavar="TIME", help="a bisection whose platform has no live agent this long is stalled "
                                             f"and frees its slot (default {DEFAULT_STALL_AFTER_S / 60:g}m)")
    parser.add_argument("--bisect-history", choices=("on", "off"), default="on",
                        help="after each push's work item, bisect the new change points of its branch's history "
                             "(redline history's detector over the fleet's store; default on)")
    parser.add_argument("--bisect-measure", choices=MEASURES, default=DEFAULT_MEASURE,
                        help="how a bisection measures: auto (default) counts instructions under callgrind when "
                             "every followed test can be counted, and goes on by time when the counted "
                             "confirmation does not see the change; instructions: counted where it can be, a "
                             "change counts do not see is not bisected; time: always timed")


def collector_command(args) -> int:
    from redline.fleet import github
    from redline.fleet.collector import Collector
    from redline.fleet.export import fleet_export
    from redline.fleet.process import Stopping, connect, log
    from redline.store.results import Store, inspect_store_file
    stopping = Stopping()
    args.export = args.export or os.environ.get(EXPORT_VARIABLE) or None
    poster = github.Poster(args.github_token_file, args.github_api) if args.github_token_file else None
    inspect_store_file(args.store)        # a path that is no store is a usage error before anything is written
    export = fleet_export(args, store_path=args.store,
                          say=lambda event, **fields: log(f"collector {args.collector_name}", event, **fields))
    store = Store(args.store)
    Collector(connect(args.redis, args.redis_password_file), store=store, name=args.collector_name, stopping=stopping,
              github_poster=poster, export=export, bisect_max_concurrent=args.bisect_max_concurrent,
              bisect_max_steps=args.bisect_max_steps, bisect_max_queued=args.bisect_max_queued,
              bisect_agent_time=args.bisect_agent_time, bisect_stall_after=args.bisect_stall_after,
              bisect_history=args.bisect_history == "on", bisect_measure=args.bisect_measure).serve()
    return 0
