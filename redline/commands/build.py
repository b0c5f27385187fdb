"""`redline build TARGET [--variant NAME] [--list-variants] [--json]`."""

from __future__ import annotations

import json
import sys

from redline.builder.variants import DEFAULT_VARIANT, list_variants, load_variant
from redline.core.errors import UsageError
from redline.output.progress import progress_display


def add_parser(subparsers) -> None:
    build = subparsers.add_parser(
        "build", help="build redis-server from a git ref or a source tree (cached by commit and variant)",
        description="Build a server from git:PATH@REF (any commit-ish of a local clone of redis or valkey) "
                    "or src:DIR (an unpacked source tree). Artifacts are cached by (commit or source hash, "
                    "variant, compiler) under $REDLINE_CACHE/builds (default ~/.cache/redline/builds).")
    build.add_argument("target", nargs="?", metavar="TARGET", help="git:PATH@REF or src:DIR")
    build.add_argument("--variant", default=DEFAULT_VARIANT, metavar="NAME",
                       help=f"build variant: a shipped name or a YAML file path (default {DEFAULT_VARIANT}; "
                            f"see --list-variants)")
    build.add_argument("--list-variants", action="store_true", help="list the shipped build variants and exit")
    build.add_argument("--json", action="store_true", help="print the build's facts as JSON")
    build.set_defaults(func=build_command)


def build_command(args) -> int:
    if args.list_variants:
        for name in list_variants():
            variant = load_variant(name)
            print(f"{name:14} {variant.description}")
        return 0
    if not args.target:
        raise UsageError("redline build needs a TARGET (git:PATH@REF or src:DIR), or --list-variants")
    from redline.builder.targets import parse_build_target

    target = parse_build_target(args.target)
    variant = load_variant(args.variant)
    with progress_display(f"building {args.target} ({variant.name})") as progress:
        result = target.build(variant, progress=progress)
    if args.json:
        print(json.dumps({**result.facts(), "seconds": round(result.seconds, 3)}, indent=2))
        return 0
    how = "cache hit" if result.cache_hit else f"built in {result.build_seconds:.0f}s"
    print(f"{result.binary}")
    print(f"  {how} ({result.seconds:.2f}s); source {result.source}; variant {variant.name}; "
          f"{result.compiler_version}", file=sys.stderr)
    print(f"  log: {result.build_log}", file=sys.stderr)
    return 0
