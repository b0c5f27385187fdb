"""`redline fleet status` (queues, agents, dead letters, work items) and `redline fleet local` (a whole
fleet on this machine: redline/fleet/local.py)."""

from __future__ import annotations

import json
import platform as host_platform
import tempfile
import time
from pathlib import Path

from redline.commands.argtypes import claim_idle, port_number, positive_int
from redline.commands.arguments import add_allow_arguments, add_redis_argument, add_store_argument, platform_name
from redline.commands.collector import add_bisect_arguments
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
    local.add_argument("--port", type=port_number, help="the Redis port (default: a free one)")
    add_store_argument(local)
    local.add_argument("--platform", type=platform_name, default=host_platform.node() or "local", metavar="NAME")
    local.add_argument("--claim-idle", type=claim_idle, default=60.0, metavar="TIME")
    local.add_argument("--max-attempts", type=positive_int, default=3)
    local.add_argument("--dir", type=Path, metavar="DIR",
                       help="Redis's AOF directory and the password file (default: a new temp directory)")
    add_allow_arguments(local)
    add_bisect_arguments(local)
    add_export_arguments(local, platform_default=None, what="from the collector (running_platform: --platform)")
    local.set_defaults(func=local_command)
    parser.set_defaults(func=lambda args: (parser.print_help(), 2)[1])


def status_command(args) -> int:
    from redline.core import terminal
    from redline.core.errors import UsageError
    from redline.fleet import status
    from redline.fleet.process import connect
    client = connect(args.redis, args.redis_password_file)
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
    from redline.core.errors import UsageError
    from redline.fleet.local import PASSWORD_FILE, Supervisor, new_password, port_in_use, private_file, start_redis, stop
    from redline.fleet.policy import TargetPolicy
    from redline.fleet.process import Stopping, connect, log
    from redline.fleet.work import register_platform
    from redline.server.process import LOOPBACK, free_port
    from redline.store.results import inspect_store_file
    stopping = Stopping(wake_on_child_exit=True)
    inspect_store_file(args.store)       # checked once here, not by a collector started again and again
    TargetPolicy.from_arguments(args.allow_target, args.allow_targets_file)      # … nor by its agents
    if args.export:
        from redline.export.redistimeseries import connect as connect_export
        connect_export(args.export, "--export").close()
    if args.port and port_in_use(args.port):
        raise UsageError(f"--port {args.port}: {LOOPBACK}:{args.port} is in use (another server listens there); "
                         "choose another port or leave --port out")
    port = args.port or free_port()
    directory = args.dir or Path(tempfile.mkdtemp(prefix="redline-fleet-"))
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    password_file = private_file(directory / PASSWORD_FILE, new_password() + "\n")
    redis_process = start_redis(port, directory, password_file.read_text().strip())
    url = f"redis://{LOOPBACK}:{port}/0"
    supervisor = Supervisor(url, password_file, args, stopping)
    code = 0
    try:
        register_platform(connect(url, password_file), args.platform)   # `submit` right after this finds it
        print(url, flush=True)
        print(password_file, flush=True)
        for label in ["collector", *(f"local-{number}" for number in range(1, args.agents + 1))]:
            supervisor.start(label)
        log("fleet local", "running", redis=url, password_file=password_file, platform=args.platform,
            agents=args.agents, store=args.store, aof=directory,
            pids=",".join(f"{label}:{p.pid}" for label, p in supervisor.children.items()),
            submit=f"redline submit --redis {url} --redis-password-file {password_file} …")
        code = supervisor.watch()
    finally:
        supervisor.stop_all()
        stop(redis_process, "redis-server")
        log("fleet local", "stopped")
    return code
