"""`redline hotspots`: where the server's CPU went in a session's profiled runs."""

from __future__ import annotations

from pathlib import Path

from redline.commands.argtypes import positive_int, session_id
from redline.commands.arguments import add_store_argument
from redline.core import terminal
from redline.core.errors import UsageError
from redline.store.results import Store


def add_parser(commands) -> None:
    parser = commands.add_parser("hotspots", help="the hottest symbols and stacks across every profiled test of a session")
    parser.add_argument("session", nargs="?", default="latest", type=session_id, metavar="SESSION",
                        help="session id (see `redline run` output) or 'latest' (default)")
    add_store_argument(parser)
    parser.add_argument("--top", type=positive_int, default=20, help="rows per table (default 20)")
    parser.set_defaults(func=hotspots_command)


def hotspots_command(args) -> int:
    from redline.profile import format_hot_stacks_table, format_hotspots_table, hotspots
    if not args.store.exists():
        raise UsageError(f"no result store at {args.store}")
    store = Store(args.store)
    session_id = store.latest_profiled_session() if args.session == "latest" else args.session
    rows = store.profiles(session_id) if session_id is not None else []
    if not rows:
        where = "any session" if session_id is None else f"session {session_id}"
        raise UsageError(f"no profiled runs in {where} of {args.store}: run with --profile first")
    names = [f"{r['test']}" + (f" [{r['side']}]" if r["side"] else "") for r in rows]
    result = hotspots([Path(r["folded_path"]) for r in rows], top=args.top, names=names)
    out = terminal.console()
    out.print(f"session {session_id}: {len(rows)} profiled tests")
    out.print(format_hotspots_table(result))
    out.print(format_hot_stacks_table(result))
    return 0
