"""`redline fleet status` (queues, agents, dead letters, work items) and `redline fleet local` (a whole
fleet on this machine: redline/fleet/local.py)."""

from __future__ import annotations

import json
import platform as host_platform
import tempfile
import time
from pathlib import Path

from redline.commands.argtypes import duration, positive_int
from redline.commands.arguments import add_redis_argument, add_store_argument, platform_name
from redline.export.options import add_export_arguments


def add_parser(commands) -> None:
    parser = commands.add_parser("fleet", help="the fleet's status; a whole fleet on this machine")
    sub = parser.add_subparsers(dest="fleet_command", metavar="COMMAND", parser_class=type(parser))
    status = sub.add_parser("status", help="queues, agents, dead letters, work items")
    add_redis_argument(status)
    status.add_argument("work_id", nargs="?", metavar="WORK_ID")
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=status_command)
    local = sub.add_parser("local", help="a private Redis, a collector and N agents on this machine")
    local.add_argument("--agents", type=positive_int, default=2)
    local.add_argument("--port", type=positive_int, help="the Redis port (default: a free one)")
    add_store_argument(local)
    local.add_argument("--platform", type=platform_name, default=host_platform.node() or "local", metavar="NAME")
    local.add_argument("--claim-idle", type=duration, default=60.0, metavar="TIME")
    local.add_argument("--max-attempts", type=positive_int, default=3)
    local.add_argument("--dir", type=Path, metavar="DIR", help="Redis's AOF directory (default: a new temp directory)")
    add_export_arguments(local, platform_default=None, what="from the collector (running_platform: --platform)")
    local.set_defaults(func=local_command)
    parser.set_defaults(func=lambda args: (parser.print_help(), 2)[1])


def status_command(args) -> int:
    from redline.core import terminal
    from redline.core.errors import UsageError
    from redline.fleet import status
    from redline.fleet.process import connect
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


def local_command(args) -> int:
    from redline.fleet.local import Supervisor, start_redis, stop
    from redline.fleet.process import Stopping, log
    from redline.server.process import LOOPBACK, free_port
    stopping = Stopping(wake_on_child_exit=True)
    if args.export:                      # checked once here, not by a collector started again and again
        from redline.export.redistimeseries import connect
        connect(args.export).close()
    port = args.port or free_port()
    directory = args.dir or Path(tempfile.mkdtemp(prefix="redline-fleet-"))
    directory.mkdir(parents=True, exist_ok=True)
    redis_process = start_redis(port, directory)
    url = f"redis://{LOOPBACK}:{port}/0"
    print(url, flush=True)
    supervisor = Supervisor(url, args, stopping)
    try:
        for label in ["collector", *(f"local-{number}" for number in range(1, args.agents + 1))]:
            supervisor.start(label)
        log("fleet local", "running", redis=url, platform=args.platform, agents=args.agents, store=args.store,
            aof=directory, pids=",".join(f"{label}:{p.pid}" for label, p in supervisor.children.items()))
        supervisor.watch()
    finally:
        supervisor.stop_all()
        stop(redis_process, "redis-server")
        log("fleet local", "stopped")
    return 0
