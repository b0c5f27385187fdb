"""`redline export redistimeseries`: stored sessions into RedisTimeSeries, in the Redis Benchmarks
Specification's scheme (docs/export.md)."""

from __future__ import annotations

from datetime import datetime, timezone

from redline.commands.argtypes import session_id
from redline.commands.arguments import Parser, add_store_argument
from redline.core import terminal
from redline.core.errors import UsageError
from redline.export.options import add_placement_arguments, exporter_from, since_date
from redline.core.redaction import redact
from redline.export.redistimeseries import ExportCounts, RedisTimeSeriesExporter
from redline.store.results import Store

EXIT_CONFLICTS = 1
CONFLICTS_SHOWN = 5


def export_sessions(exporter: RedisTimeSeriesExporter, store: Store, session_ids: list[int], url: str) -> int:
    """Export the sessions, say what was written per session; exit 1 if a sample conflicted."""
    out = terminal.console(stderr=True)
    total = ExportCounts()
    tests = set()
    for session_id in session_ids:
        session = store.load_session(session_id)
        counts = exporter.export_session(session)
        total.add(counts)
        tests |= {run.test for run in session.runs}
        line = (f"session {session_id} ({session.kind}) → {redact(url)}: {counts.runs} runs, "
                f"{counts.written} samples written, {counts.present} already there")
        if counts.verdicts:
            line += f", {counts.verdicts} verdicts"
        if counts.skipped_runs:
            line += f"; {counts.skipped_runs} runs not exported (failed, skipped, profiled, or no branch, version or hash)"
        out.print(line, soft_wrap=True)
    history = exporter.export_history(store, tests)
    total.add(history)
    out.print(f"change points of these tests' history on this machine: {history.written} written, "
              f"{history.present} already there, {history.removed} no longer found and removed", soft_wrap=True)
    for conflict in total.conflicts[:CONFLICTS_SHOWN]:
        out.print(f"conflict, not written: {conflict}", soft_wrap=True)
    if total.conflicts:
        more = len(total.conflicts) - CONFLICTS_SHOWN
        out.print(f"{len(total.conflicts)} samples conflict with other values at the same millisecond"
                  + (f" ({more} more not shown)" if more > 0 else ""), soft_wrap=True)
        return EXIT_CONFLICTS
    return 0


def add_parser(commands) -> None:
    parser = commands.add_parser("export", help="stored results to other tools: RedisTimeSeries in the upstream scheme")
    sinks = parser.add_subparsers(dest="sink", metavar="SINK", parser_class=Parser, required=True)
    rts = sinks.add_parser("redistimeseries", help="a session's runs and verdicts as RedisTimeSeries series in the "
                                                   "Redis Benchmarks Specification's key scheme (docs/export.md)")
    rts.add_argument("session", nargs="?", default=None, type=session_id, metavar="SESSION",
                     help="session id or 'latest' (default)")
    rts.add_argument("--since", type=since_date, metavar="DATE",
                     help="every session started since DATE (YYYY-MM-DD or ISO 8601 time, UTC)")
    rts.add_argument("--redis", required=True, metavar="URL",
                     help="redis://[user:password@]host:port[/db], rediss:// for TLS, unix://path")
    add_store_argument(rts)
    add_placement_arguments(rts)
    rts.set_defaults(func=export_command)


def export_command(args) -> int:
    if args.session is not None and args.since is not None:
        raise UsageError("give a SESSION or --since DATE, not both")
    if not args.store.exists():
        raise UsageError(f"no result store at {args.store}")
    store = Store(args.store)
    if args.since is not None:
        session_ids = store.sessions_since(args.since)
        if not session_ids:
            raise UsageError(f"no session in {args.store} started since {datetime.fromtimestamp(args.since, timezone.utc)}")
    else:
        session = store.latest_session() if args.session in (None, "latest") else args.session
        if session is None:
            raise UsageError(f"no session in {args.store}")
        session_ids = [session]
    exporter = exporter_from(args, args.redis, "--redis")
    return export_sessions(exporter, store, session_ids, args.redis)
