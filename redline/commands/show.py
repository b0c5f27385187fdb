"""`redline show`: a stored session again, as its command showed it when it ended or in another
format — the same renderers as every other output (redline.output.FORMATS)."""

from __future__ import annotations

import sys
from pathlib import Path

from redline.commands.argtypes import session_id
from redline.commands.arguments import add_store_argument
from redline.commands.session import check_outputs, said_written
from redline.core.errors import UsageError
from redline.output import FORMATS, files, renderer
from redline.store.results import Store


def add_parser(commands) -> None:
    parser = commands.add_parser("show", help="a stored session as it was shown when it ended, or as JSON, markdown "
                                              "or HTML")
    parser.add_argument("session", nargs="?", default=None, type=session_id, metavar="SESSION",
                        help="session id or 'latest' (default)")
    parser.add_argument("--format", choices=tuple(FORMATS), default="terminal",
                        help="terminal (default): the tables its command printed; json, markdown, html: as --json, "
                             "--markdown and --html write them")
    parser.add_argument("-o", "--output", type=Path, metavar="FILE", help="write to FILE instead of standard output")
    add_store_argument(parser)
    parser.set_defaults(func=show_command)


def show_command(args) -> int:
    check_outputs(args, {"-o": args.output})
    if not args.store.exists():
        raise UsageError(f"no result store at {args.store}")
    store = Store(args.store)
    chosen = store.latest_session() if args.session in (None, "latest") else args.session
    if chosen is None:
        raise UsageError(f"no stored runs in {store.path}")
    text = renderer(args.format)(store.load_session(chosen))
    if args.output is None:
        sys.stdout.write(text)
    else:
        files.write_output(args.output, text)
        said_written(args.output, f"session {chosen}, {args.format}")
    return 0
