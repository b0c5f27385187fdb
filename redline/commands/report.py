"""`redline report`: one self-contained HTML file — a stored session's report, or (`--history`)
every series over its sessions with change points. `--html FILE` on run, compare and calibrate
writes the session's report when the session ends."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from redline.analysis import history
from redline.commands.argtypes import positive_float, regex, session_id
from redline.commands.arguments import add_store_argument
from redline.commands.session import check_outputs, said_written
from redline.core import metrics
from redline.core.errors import UsageError
from redline.output import files, renderer
from redline.output.html import write_history_report
from redline.store.results import Store

DEFAULT_HISTORY_METRIC = "ops_per_sec"


def add_parser(commands) -> None:
    parser = commands.add_parser("report", help="one self-contained HTML file: a session's report, or --history")
    parser.add_argument("session", nargs="?", default=None, type=session_id, metavar="SESSION",
                        help="session id or 'latest' (default)")
    parser.add_argument("--history", action="store_true",
                        help="every series (test × topology × target) over its sessions, with change points")
    parser.add_argument("--name", type=regex, metavar="REGEX", help="with --history: only tests whose name matches")
    parser.add_argument("--metric", metavar="M", help=f"with --history: the metric (default ops_per_sec; any of "
                                                      f"{', '.join(metrics.NAMES)})")
    parser.add_argument("--p-value", type=positive_float, default=0.001,
                        help="with --history: change-point significance (default 0.001)")
    add_store_argument(parser)
    parser.add_argument("-o", "--output", type=Path, required=True, metavar="FILE", help="the HTML file to write")
    parser.set_defaults(func=report_command)


def report_command(args) -> int:
    check_outputs(args, {"-o": args.output})
    if args.history and args.session is not None:
        raise UsageError(f"SESSION ({args.session}) and --history exclude each other: the history page covers "
                         "every session")
    if not args.history and (args.name or args.metric):
        raise UsageError("--name and --metric choose the series of --history; a session's report shows all of it")
    if not 0 < args.p_value < 1:
        raise UsageError(f"--p-value {args.p_value:g}: a significance level is between 0 and 1")
    if not args.store.exists():
        raise UsageError(f"no result store at {args.store}")
    store = Store(args.store)
    if args.history:
        metric = args.metric or DEFAULT_HISTORY_METRIC
        pattern = re.compile(args.name) if args.name else None     # checked by the argument parser
        all_series = history.analysed_series(store, metric=metric, pattern=pattern, p_threshold=args.p_value)
        if not all_series:
            raise UsageError(f"no stored runs with {metric}" + (f" for --name {args.name!r}" if args.name else ""))
        write_history_report(all_series, args.output, metric=metric, p_value=args.p_value, argv=sys.argv)
        what = f"{len(all_series)} series of {metric}"
    else:
        session_id = store.latest_session() if args.session in (None, "latest") else args.session
        if session_id is None:
            raise UsageError(f"no stored runs in {store.path}")
        files.write_output(args.output, renderer("html")(store.load_session(session_id)))
        what = f"session {session_id}"
    said_written(args.output, what)
    return 0
