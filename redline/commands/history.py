"""`redline history`: one series per test × topology × target, its change points and the builds
on each side of them."""

from __future__ import annotations

import re

from redline.analysis import history
from redline.commands.session import check_outputs
from redline.core.errors import UsageError
from redline.output import files
from redline.core import terminal
from redline.output.tables import history_lines, history_table
from redline.store.results import Store


def history_command(args) -> int:
    check_outputs(args, {"--json": args.json})
    if not 0 < args.p_value < 1:
        raise UsageError(f"--p-value {args.p_value:g}: a significance level is between 0 and 1")
    if not args.store.exists():
        raise UsageError(f"no result store at {args.store}")
    pattern = re.compile(args.name) if args.name else None     # checked by the argument parser
    store = Store(args.store)
    all_series = history.analysed_series(store, metric=args.metric, pattern=pattern, p_threshold=args.p_value)
    if not all_series:
        raise UsageError(f"no stored runs with {args.metric}" + (f" for --name {args.name!r}" if args.name else ""))
    out = terminal.console()             # no emoji either: a target like bin:x:y is not one
    out.print(history_table(all_series, metric=args.metric, p_value=args.p_value))
    for line in history_lines(all_series):
        out.print(line)
    if args.json:
        files.write_json(args.json, history.as_json(all_series, metric=args.metric, p_threshold=args.p_value))
    return 0
