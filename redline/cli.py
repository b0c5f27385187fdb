"""redline's command line: the entry point. Each command is a module of redline.commands that owns
its parser (`add_parser`) and its function; this module only assembles them and turns errors into
one line and an exit code."""

from __future__ import annotations

import importlib
import signal
import sys

from redline import __version__
from redline.commands.arguments import Parser, measurement_defaults
from redline.core.errors import RunError, UsageError
from redline.core.redaction import redact
from redline.core.terminal import printable

# The commands in the order `redline --help` lists them: modules of redline.commands.
COMMANDS = ("run", "compare", "gate", "calibrate", "show", "hotspots", "history", "export", "report", "bisect",
            "accuracy", "build", "suites", "submit", "api", "agent", "collector", "fleet")


def build_parser() -> Parser:
    parser = Parser(prog="redline", description="A performance lab for Redis-protocol servers.")
    parser.add_argument("--version", action="version", version=f"redline {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for name in COMMANDS:
        importlib.import_module(f"redline.commands.{name}").add_parser(commands)
    return parser


def _terminate(signum, frame):
    """SIGTERM ends a run like Ctrl-C: the current run is marked interrupted, servers are stopped."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    signal.signal(signal.SIGTERM, _terminate)
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        measurement_defaults(args)
        if not getattr(args, "func", None):
            parser.print_help()
            return 2
        return args.func(args)
    except UsageError as exc:      # one line, whatever the input held (a path with a newline)
        print(printable(redact(f"redline: error: {exc}")).replace("\n", "\\n"), file=sys.stderr)
        return exc.exit_code
    except RunError as exc:        # may carry a log's tail (a failed build): lines kept, controls shown
        print(printable(redact(f"redline: error: {exc}")), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("redline: interrupted; finished runs are stored, the current one is marked interrupted",
              file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
