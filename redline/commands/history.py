"""`redline history`: one series per test × topology × target, its change points and the builds
on each side of them."""

from __future__ import annotations

import re
from pathlib import Path

from redline.analysis import history
from redline.commands.argtypes import positive_float, regex
from redline.commands.arguments import add_store_argument
from redline.commands.session import check_outputs
from redline.core import metrics, terminal
from redline.core.errors import UsageError
from redline.output import files
from redline.output.tables import history_lines, history_table
from redline.store.results import Store


def add_parser(commands) -> None:
    parser = commands.add_parser("history", help="stored results over time, with change points")
    parser.add_argument("--name", type=regex, metavar="REGEX", help="only tests whose name matches REGEX")
    parser.add_argument("--metric", default="ops_per_sec",
                        help=f"{', '.join(m.name for m in metrics.COMPARED)} or any other stored metric "
                             f"({', '.join(m.name for m in metrics.REGISTRY if not m.compared)}); "
                             "default ops_per_sec")
    parser.add_argument("--p-value", type=positive_float, default=history.DEFAULT_P_VALUE,
                        help=f"change-point significance (default {history.DEFAULT_P_VALUE:g}); a change also "
                             "needs 2 sessions on each side and at least max(2%%, 2 × the calibrated noise floor), else 3%%")
    add_store_argument(parser)
    parser.add_argument("--json", type=Path, metavar="FILE",
                        help="write the series (every session's runs and build) and change points as JSON to FILE")
    parser.set_defaults(func=history_command)


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
