"""Manual use of redline.profile without the engine:

    python -m redline.profile record --pid 1234 --seconds 5 --workdir out/
    python -m redline.profile hotspots a.folded.gz b.folded.gz ...
    python -m redline.profile diff baseline.folded.gz comparison.folded.gz out.svg
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from redline.core import terminal
from redline.core.errors import RunError, UsageError
from redline.profile import (Recorder, describe_move, diff_flamegraph, format_hot_stacks_table, format_hotspots_table,
                             hotspots, moved_symbols)


def _record(args: argparse.Namespace) -> None:
    if not 0 < args.seconds <= 3600:
        raise UsageError(f"--seconds must be in (0, 3600], got {args.seconds}")
    recorder = Recorder(pids=args.pid, binary=args.binary, workdir=args.workdir, frequency_hz=args.frequency,
                        unwinder=args.unwinder)
    recorder.start()
    try:
        time.sleep(args.seconds)
    except BaseException:
        recorder.abort()
        raise
    print(json.dumps(recorder.stop().as_json(), indent=2))


def _hotspots(args: argparse.Namespace) -> None:
    h = hotspots(args.folded, top=args.top)
    console = terminal.console()
    console.print(format_hotspots_table(h))
    console.print(format_hot_stacks_table(h))


def _diff(args: argparse.Namespace) -> None:
    out = diff_flamegraph(args.baseline, args.comparison, args.out_svg)
    print(out)
    for move in moved_symbols(args.baseline, args.comparison, top=args.top):
        print("  " + describe_move(move))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m redline.profile", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    record = commands.add_parser("record", help="profile running processes for a while")
    record.add_argument("--pid", type=int, action="append", required=True, help="process id (repeatable)")
    record.add_argument("--seconds", type=float, default=5.0)
    record.add_argument("--workdir", type=Path, required=True)
    record.add_argument("--binary", type=Path, default=None)
    record.add_argument("--frequency", type=int, default=999)
    record.add_argument("--unwinder", choices=["fp", "dwarf"], default=None, help="default: decided per binary")
    record.set_defaults(run=_record)
    hot = commands.add_parser("hotspots", help="hot symbols and stacks across folded files")
    hot.add_argument("folded", type=Path, nargs="+")
    hot.add_argument("--top", type=int, default=20)
    hot.set_defaults(run=_hotspots)
    diff = commands.add_parser("diff", help="differential flame graph and moved symbols")
    diff.add_argument("baseline", type=Path)
    diff.add_argument("comparison", type=Path)
    diff.add_argument("out_svg", type=Path)
    diff.add_argument("--top", type=int, default=5)
    diff.set_defaults(run=_diff)
    args = parser.parse_args(argv)
    try:
        args.run(args)
    except (UsageError, RunError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
