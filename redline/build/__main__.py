"""`python -m redline.build TARGET …`: the same as `redline build TARGET …`."""

import sys

from redline.build.command import add_build_parser
from redline.cli import Parser
from redline.errors import RunError, UsageError


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="redline")
    add_build_parser(parser.add_subparsers(dest="command", parser_class=Parser))
    try:
        args = parser.parse_args(["build", *(sys.argv[1:] if argv is None else argv)])
        return args.func(args)
    except (UsageError, RunError) as exc:
        print(f"redline: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("redline: build interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
