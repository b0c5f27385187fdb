"""`redline report`: one self-contained HTML file — a stored session's report, or (`--history`)
every series over its sessions with change points. `--html FILE` on run, compare and calibrate
writes the session's report when the session ends."""

from __future__ import annotations

import re
import sys

from redline.analysis import history
from redline.commands.session import check_outputs
from redline.core.errors import UsageError
from redline.core import terminal
from redline.output.html import write_history_report, write_session_report
from redline.output.html.source import latest_session
from redline.store.results import Store

DEFAULT_HISTORY_METRIC = "ops_per_sec"


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
        session_id = latest_session(store) if args.session in (None, "latest") else args.session
        write_session_report(store, session_id, args.output)
        what = f"session {session_id}"
    _say_written(args.output, what)
    return 0


def html_if_asked(args, session) -> None:
    """run/compare/calibrate --html FILE: the report of the session that just ended."""
    if getattr(args, "html", None):
        write_session_report(session.store, session.session_id, args.html)
        _say_written(args.html, f"session {session.session_id}")


def _say_written(path, what: str) -> None:
    size = path.stat().st_size / 1e6
    terminal.console(stderr=True).print(f"wrote {path} ({what}, {size:.1f} MB)")
