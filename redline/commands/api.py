"""`redline api`: GitHub webhooks in, work items out (the endpoint itself: redline/fleet/api.py)."""

from __future__ import annotations

from pathlib import Path

from redline.commands.argtypes import duration, github_repository, port_number, positive_int, regex, whole_seconds
from redline.commands.arguments import (add_fleet_measure_arguments, add_redis_argument, add_scale_argument,
                                        platform_name)


def add_parser(commands) -> None:
    parser = commands.add_parser("api", help="receive GitHub webhooks (push, labelled pull requests) and enqueue work")
    add_redis_argument(parser)
    parser.add_argument("--port", type=port_number, default=8080, help="port (default 8080)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--secret-file", type=Path, required=True, metavar="FILE", help="the webhook secret")
    parser.add_argument("--repository", required=True, metavar="PATH",
                        help="the git repository the agents build from (their path; git:PATH@COMMIT targets)")
    parser.add_argument("--github-repository", type=github_repository, metavar="OWNER/NAME",
                        help="take only this repository's events; another's are refused (422) in one line "
                             "(default: any repository whose commits --repository holds)")
    parser.add_argument("--branch", action="append", metavar="NAME",
                        help="branches whose pushes are benchmarked (repeatable; default: the repository's default branch)")
    parser.add_argument("--label", default="action run:benchmarks",
                        help="the pull-request label that asks for a benchmark (default 'action run:benchmarks')")
    parser.add_argument("--platform", action="append", type=platform_name, metavar="NAME")
    parser.add_argument("--suite", action="append", dest="suites", metavar="SUITE", help="suites (default: quick)")
    parser.add_argument("--name", type=regex, metavar="REGEX")
    parser.add_argument("--runs", type=positive_int, default=7)
    parser.add_argument("--max-runs", type=positive_int, default=15)
    parser.add_argument("--duration", type=whole_seconds, metavar="TIME", help="measured time per run (e.g. 10s)")
    parser.add_argument("--warmup", type=duration, default=2.0, metavar="TIME", help="warm-up per run (default 2s)")
    add_scale_argument(parser)
    add_fleet_measure_arguments(parser)
    parser.add_argument("--variant", metavar="NAME")
    parser.set_defaults(func=api_command)


def api_command(args) -> int:
    import uvicorn

    from redline.core.errors import UsageError
    from redline.fleet import work
    from redline.fleet.api import Settings, make_app, say
    from redline.fleet.process import Stopping, connect
    from redline.lab.session import select_tests
    try:
        secret = args.secret_file.read_bytes().strip()
    except OSError as exc:
        raise UsageError(f"--secret-file {args.secret_file}: {exc.strerror}") from exc
    if not secret:
        raise UsageError(f"--secret-file {args.secret_file} is empty")
    if args.max_runs < args.runs:
        raise UsageError(f"--max-runs ({args.max_runs}) is smaller than --runs ({args.runs})")
    tests = select_tests(args.suites, args.name)
    client = connect(args.redis, args.redis_password_file)
    settings = Settings(secret=secret, repository=str(Path(args.repository).expanduser()), branches=args.branch,
                        label=args.label, platforms=args.platform, tests=tests, variant=args.variant,
                        github_repository=args.github_repository,
                        run_settings=work.Settings(runs=args.runs, max_runs=args.max_runs, duration_s=args.duration,
                                                   warmup_s=args.warmup, scale=args.scale, measure=args.measure,
                                                   window_instructions=args.window_instructions))
    listening = listen(args.host, args.port)      # a busy port is refused here, before "listening"
    Stopping()      # uvicorn handles SIGTERM/Ctrl-C, then re-raises it: to a flag, not an interruption
    say("listening", host=args.host, port=args.port, tests=len(tests), label=repr(args.label))
    uvicorn.Server(uvicorn.Config(make_app(client, settings), log_level="warning", access_log=False,
                                  lifespan="off")).run(sockets=[listening])
    say("stopped")
    return 0


def listen(host: str, port: int):
    """The server's socket, bound and listening; a port in use or an address that is not this
    machine's is one line (exit 2)."""
    import socket

    from redline.core.errors import UsageError
    try:
        info = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(info[0], socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise UsageError(f"--host {host}: {getattr(exc, 'strerror', None) or exc}") from None
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(info[4])
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise UsageError(f"--port {port} on {host}: {exc.strerror or exc} (another process listens there?)") from None
    return sock
