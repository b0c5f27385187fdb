"""The fleet's commands: `redline submit`, `api`, `agent`, `collector`, `fleet status`, `fleet local`.
Each is one process talking to one Redis (`--redis URL`); see docs/fleet.md."""

from __future__ import annotations

import argparse
import json
import os
import platform as host_platform
import sys
import time
from pathlib import Path

from redline.commands.argtypes import duration, positive_float, positive_int, regex, store_path, whole_seconds
from redline.export.options import add_export_arguments

DEFAULT_REDIS = "redis://127.0.0.1:6379/0"


def _call(module: str, function: str):
    def call(args) -> int:
        import importlib
        return getattr(importlib.import_module(module), function)(args)
    return call


def _redis_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--redis", default=os.environ.get("REDLINE_REDIS", DEFAULT_REDIS), metavar="URL",
                        help="the fleet's Redis: redis://[:password@]host:port/db, rediss:// for TLS "
                             f"(default $REDLINE_REDIS, else {DEFAULT_REDIS})")


def _platform(text: str) -> str:
    from redline.fleet.work import PLATFORM_NAME
    if not PLATFORM_NAME.match(text):
        raise argparse.ArgumentTypeError(f"platform name {text!r}: letters, digits, '_', '.', '-' (at most 64)")
    return text


def add_fleet_parsers(commands) -> None:
    submit = commands.add_parser("submit", help="enqueue a work item for the fleet: every test × topology × platform")
    submit.add_argument("suites", nargs="*", metavar="SUITE",
                        help="suite YAML files, directories or built-in suite names (default: quick); a path must "
                             "exist on the agents too")
    submit.add_argument("--name", type=regex, metavar="REGEX", help="keep the tests whose name matches REGEX")
    _redis_argument(submit)
    submit.add_argument("--comparison", required=True, metavar="TARGET", help="the server to judge (git:, src:, bin:)")
    submit.add_argument("--baseline", metavar="TARGET", help="the server to judge it against (default: redis-server on PATH)")
    submit.add_argument("--baseline-config", action="append", default=[], metavar="NAME=VALUE")
    submit.add_argument("--comparison-config", action="append", default=[], metavar="NAME=VALUE")
    submit.add_argument("--variant", metavar="NAME", help="build variant for git:/src: targets")
    submit.add_argument("--platform", action="append", type=_platform, metavar="NAME",
                        help="platforms to run on (repeatable; default: every platform an agent has registered)")
    submit.add_argument("--topology", action="append", metavar="NAME", help="topologies (default oss-standalone)")
    submit.add_argument("--runs", type=positive_int, default=7, help="runs per side (default 7)")
    submit.add_argument("--max-runs", type=positive_int, default=15, help="inconclusive tests get more, up to this (default 15)")
    submit.add_argument("--duration", type=whole_seconds, metavar="TIME", help="measured time per run (e.g. 10s)")
    submit.add_argument("--warmup", type=duration, default=2.0, metavar="TIME", help="warm-up per run (default 2s)")
    submit.add_argument("--scale", type=positive_float, metavar="S", help="dataset scale")
    submit.add_argument("--profile", action="store_true", help="one profiled run per test and side")
    submit.add_argument("--no-snapshots", dest="snapshots", action="store_false")
    submit.add_argument("--json", action="store_true", help="print {\"work_id\": …, \"jobs\": N} instead of the id")
    submit.set_defaults(func=_call("redline.commands.fleet", "submit_command"))

    api = commands.add_parser("api", help="receive GitHub webhooks (push, labelled pull requests) and enqueue work")
    _redis_argument(api)
    api.add_argument("--port", type=positive_int, default=8080, help="port (default 8080)")
    api.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    api.add_argument("--secret-file", type=Path, required=True, metavar="FILE", help="the webhook secret")
    api.add_argument("--repository", required=True, metavar="PATH",
                     help="the git repository the agents build from (their path; git:PATH@COMMIT targets)")
    api.add_argument("--branch", action="append", metavar="NAME",
                     help="branches whose pushes are benchmarked (repeatable; default: the repository's default branch)")
    api.add_argument("--label", default="action run:benchmarks",
                     help="the pull-request label that asks for a benchmark (default 'action run:benchmarks')")
    api.add_argument("--platform", action="append", type=_platform, metavar="NAME")
    api.add_argument("--suite", action="append", dest="suites", metavar="SUITE", help="suites (default: quick)")
    api.add_argument("--name", type=regex, metavar="REGEX")
    api.add_argument("--runs", type=positive_int, default=7)
    api.add_argument("--max-runs", type=positive_int, default=15)
    api.add_argument("--duration", type=whole_seconds, metavar="TIME")
    api.add_argument("--variant", metavar="NAME")
    api.set_defaults(func=_call("redline.fleet.api", "api_command"))

    agent = commands.add_parser("agent", help="run the jobs of one platform")
    _redis_argument(agent)
    agent.add_argument("--platform", type=_platform, required=True, metavar="NAME")
    agent.add_argument("--agent-name", metavar="NAME", help="consumer name (default HOST-PID)")
    agent.add_argument("--store", type=store_path, metavar="PATH",
                       help="this agent's own store (default: in the redline cache directory)")
    agent.add_argument("--claim-idle", type=duration, default=60.0, metavar="TIME",
                       help="a job pending this long without a heartbeat belongs to a dead agent and is taken "
                            "over (default 60s)")
    agent.add_argument("--heartbeat", type=duration, metavar="TIME",
                       help="how often the agent says it is alive and keeps its job (default: a quarter of "
                            "--claim-idle, at most 5s)")
    agent.add_argument("--max-attempts", type=positive_int, default=3,
                       help="a job that failed this many times goes to the dead-letter stream (default 3)")
    agent.set_defaults(func=_call("redline.commands.fleet", "agent_command"))

    collector = commands.add_parser("collector", help="store the fleet's results once; verdicts and comments")
    _redis_argument(collector)
    collector.add_argument("--store", type=store_path, default=Path("redline.db"), metavar="PATH")
    collector.add_argument("--collector-name", default="collector", metavar="NAME",
                           help="consumer name; keep it across restarts (default collector)")
    collector.add_argument("--github-token-file", type=Path, metavar="FILE",
                           help="post each pull request's comment with this token")
    collector.add_argument("--github-api", default="https://api.github.com", metavar="URL")
    add_export_arguments(collector, platform_default="the fleet platform that ran the job",
                         what="as results are stored")
    collector.set_defaults(func=_call("redline.commands.fleet", "collector_command"))

    fleet = commands.add_parser("fleet", help="the fleet's status; a whole fleet on this machine")
    sub = fleet.add_subparsers(dest="fleet_command", metavar="COMMAND", parser_class=type(fleet))
    status = sub.add_parser("status", help="queues, agents, dead letters, work items")
    _redis_argument(status)
    status.add_argument("work_id", nargs="?", metavar="WORK_ID")
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=_call("redline.commands.fleet", "status_command"))
    local = sub.add_parser("local", help="a private Redis, a collector and N agents on this machine")
    local.add_argument("--agents", type=positive_int, default=2)
    local.add_argument("--port", type=positive_int, help="the Redis port (default: a free one)")
    local.add_argument("--store", type=store_path, default=Path("redline.db"), metavar="PATH")
    local.add_argument("--platform", type=_platform, default=host_platform.node() or "local", metavar="NAME")
    local.add_argument("--claim-idle", type=duration, default=60.0, metavar="TIME")
    local.add_argument("--max-attempts", type=positive_int, default=3)
    local.add_argument("--dir", type=Path, metavar="DIR", help="Redis's AOF directory (default: a new temp directory)")
    add_export_arguments(local, platform_default=None, what="from the collector (running_platform: --platform)")
    local.set_defaults(func=_call("redline.fleet.local", "local_command"))
    fleet.set_defaults(func=lambda args: (fleet.print_help(), 2)[1])


def submit_command(args) -> int:
    from redline.lab.session import select_tests
    from redline.core.errors import UsageError
    from redline.fleet import work
    from redline.fleet.process import connect
    sides = [_side("baseline", args.baseline, args.baseline_config, args.variant),
             _side("comparison", args.comparison, args.comparison_config, args.variant)]
    if args.max_runs < args.runs:
        raise UsageError(f"--max-runs ({args.max_runs}) is smaller than --runs ({args.runs})")
    tests = select_tests(args.suites, args.name)
    client = connect(args.redis)
    item = work.new_work(client, source="cli", sides=sides, platforms=args.platform, tests=tests,
                         topologies=args.topology,
                         settings=work.Settings(runs=args.runs, max_runs=args.max_runs, duration_s=args.duration,
                                                warmup_s=args.warmup, scale=args.scale, profile=args.profile,
                                                snapshots=args.snapshots))
    jobs = work.enqueue(client, item)
    if args.json:
        print(json.dumps({"work_id": item.work_id, "jobs": jobs, "platforms": item.platforms}))
    else:
        print(item.work_id)
        print(f"{jobs} jobs on {', '.join(item.platforms)}", file=sys.stderr)
    return 0


def _side(name: str, text: str | None, pairs: list[str], variant: str | None):
    """A side as the job carries it, checked here (target scheme, binary, NAME=VALUE pairs)."""
    from redline.lab.session import target_from
    from redline.engine.job import SideSpec
    target = target_from(text, pairs, f"--{name}-config", variant)
    return SideSpec(name, target.spec, tuple(sorted(target.config.items())), variant)


def agent_command(args) -> int:
    from redline.system.cache_dir import cache_root
    from redline.fleet.agent import Agent
    from redline.fleet.process import Stopping, connect
    from redline.store.results import Store
    stopping = Stopping()
    store_file = args.store or cache_root() / "fleet" / f"agent-{args.platform}.db"
    store_file.parent.mkdir(parents=True, exist_ok=True)
    store = Store(store_file)
    name = args.agent_name or f"{host_platform.node()}-{os.getpid()}"
    Agent(connect(args.redis), platform=args.platform, name=name, store=store, claim_idle_s=args.claim_idle,
          heartbeat_s=args.heartbeat or min(5.0, args.claim_idle / 4), max_attempts=args.max_attempts, stopping=stopping).serve()
    return 0


def collector_command(args) -> int:
    from redline.fleet import github
    from redline.fleet.collector import Collector
    from redline.fleet.export import fleet_export
    from redline.fleet.process import Stopping, connect, log
    from redline.store.results import Store
    stopping = Stopping()
    poster = github.Poster(args.github_token_file, args.github_api) if args.github_token_file else None
    store = Store(args.store)             # a path that is no store is a usage error before Redis is asked
    export = fleet_export(args, store_path=args.store,
                          say=lambda event, **fields: log(f"collector {args.collector_name}", event, **fields))
    Collector(connect(args.redis), store=store, name=args.collector_name, stopping=stopping,
              github_poster=poster, export=export).serve()
    return 0


def status_command(args) -> int:
    from redline.fleet import status
    from redline.fleet.process import connect
    from redline.core.errors import UsageError
    from redline.core import terminal
    client = connect(args.redis)
    if args.work_id:
        answer = status.work_status(client, args.work_id)
        if answer is None:
            raise UsageError(f"no work item {args.work_id!r} in {args.redis}")
        if args.json:
            print(json.dumps(answer))
        else:
            terminal.console().print(status.work_line(answer))
        return 0
    answer = status.fleet_status(client)
    if args.json:
        print(json.dumps(answer))
    else:
        out = terminal.console()
        for line in status.status_lines(answer, time.time()):
            out.print(line)
    return 0
