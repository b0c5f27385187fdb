"""`redline agent`: a benchmark machine of the fleet, running the jobs of one platform (redline/fleet/agent.py)."""

from __future__ import annotations

import os
import platform as host_platform

from redline.commands.argtypes import claim_idle, heartbeat, positive_int, store_path
from redline.commands.arguments import add_allow_arguments, add_redis_argument, platform_name


def add_parser(commands) -> None:
    parser = commands.add_parser("agent", help="run the jobs of one platform")
    add_redis_argument(parser)
    parser.add_argument("--platform", type=platform_name, required=True, metavar="NAME")
    parser.add_argument("--agent-name", metavar="NAME", help="consumer name (default HOST-PID)")
    parser.add_argument("--store", type=store_path, metavar="PATH",
                        help="this agent's own store (default: in the redline cache directory)")
    parser.add_argument("--claim-idle", type=claim_idle, default=60.0, metavar="TIME",
                        help="a job pending this long without a heartbeat belongs to a dead agent and is taken "
                             "over (default 60s)")
    parser.add_argument("--heartbeat", type=heartbeat, metavar="TIME",
                        help="how often the agent says it is alive and keeps its job (default: a quarter of "
                             "--claim-idle, at most 5s)")
    parser.add_argument("--max-attempts", type=positive_int, default=3,
                        help="a job that failed this many times goes to the dead-letter stream (default 3)")
    add_allow_arguments(parser)
    parser.set_defaults(func=agent_command)


def agent_command(args) -> int:
    from redline.core.errors import UsageError
    from redline.fleet.agent import Agent
    from redline.fleet.policy import TargetPolicy
    from redline.fleet.process import Stopping, connect
    from redline.store.results import Store
    from redline.system.cache_dir import cache_root
    stopping = Stopping()
    name = args.agent_name or f"{host_platform.node()}-{os.getpid()}"
    policy = TargetPolicy.from_arguments(args.allow_target, args.allow_targets_file)
    heartbeat = args.heartbeat or min(5.0, args.claim_idle / 4)
    if heartbeat > args.claim_idle / 2:
        raise UsageError(f"--heartbeat {heartbeat:g}s is more than half of --claim-idle {args.claim_idle:g}s: "
                         "a live agent's job would be taken from it")
    client = connect(args.redis, args.redis_password_file)
    store_file = args.store or cache_root() / "fleet" / f"agent-{args.platform}.db"
    store_file.parent.mkdir(parents=True, exist_ok=True)
    Agent(client, platform=args.platform, name=name, store=Store(store_file), claim_idle_s=args.claim_idle,
          heartbeat_s=heartbeat, max_attempts=args.max_attempts, stopping=stopping, policy=policy).serve()
    return 0
