"""The command-line options of exporting (`redline export redistimeseries`, and `--export` on run
and compare): light to import, so that `redline --help` stays fast."""

from __future__ import annotations

import argparse
from datetime import datetime, timezone

from redline.export.scheme import Project


def since_date(text: str) -> float:
    """--since: YYYY-MM-DD or an ISO 8601 time (UTC unless it names its zone), as epoch seconds."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date: {text!r} (examples: 2026-11-24, 2026-11-24T21:00)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


MEASURING_HOST = "the host name the runs were measured on"
FORWARDED_FLAGS = (("--github-org", "github_org"), ("--github-repo", "github_repo"),
                   ("--triggering-env", "triggering_env"), ("--branch", "branch"))


def add_placement_arguments(parser: argparse.ArgumentParser, *, platform_default: str | None = MEASURING_HOST) -> None:
    """Where the results belong in the upstream scheme. `platform_default` says what running_platform
    is without --platform; None for a command whose own --platform names it (`fleet local`)."""
    parser.add_argument("--github-org", default=Project.github_org, metavar="ORG",
                        help=f"label github_org and part of every key (default {Project.github_org})")
    parser.add_argument("--github-repo", default=Project.github_repo, metavar="REPO",
                        help=f"label github_repo and part of every key (default {Project.github_repo})")
    parser.add_argument("--triggering-env", default=Project.triggering_env, metavar="ENV",
                        help=f"label triggering_env and part of every key (default {Project.triggering_env})")
    if platform_default is not None:
        parser.add_argument("--platform", metavar="NAME", help=f"running_platform (default: {platform_default})")
    parser.add_argument("--branch", metavar="NAME",
                        help="branch of runs whose target names none (a git:REPO@BRANCH target names its own)")


def add_export_arguments(parser: argparse.ArgumentParser, *, platform_default: str | None = MEASURING_HOST,
                         what: str = "as runs finish") -> None:
    """--export URL and the placement flags: each run (and a compare's verdicts) to RedisTimeSeries
    as it is stored."""
    group = parser.add_argument_group(f"export to RedisTimeSeries {what} (docs/export.md)")
    group.add_argument("--export", metavar="URL",
                       help="redis://host:port (rediss:// for TLS) of a server with RedisTimeSeries: every run in "
                            "the Redis Benchmarks Specification's key scheme")
    add_placement_arguments(group, platform_default=platform_default)


EXPORT_VARIABLE = "REDLINE_EXPORT"     # the collector's --export URL from the environment (a password stays off argv)


def export_argv(args) -> tuple[list[str], dict[str, str]]:
    """--export and the placement flags given to `fleet local`, for its collector: the flags as
    arguments, the URL (which may hold a password) in the environment; nothing without --export.
    Not --platform: fleet local's names its agents' platform, which the collector places their
    runs under anyway."""
    if not getattr(args, "export", None):
        return [], {}
    argv = []
    for flag, name in FORWARDED_FLAGS:
        if getattr(args, name, None) is not None:
            argv += [flag, getattr(args, name)]
    return argv, {EXPORT_VARIABLE: args.export}


def project_from(args) -> Project:
    return Project(args.github_org, args.github_repo, args.triggering_env)


def exporter_from(args, url: str, flag: str = "--export"):
    """The RedisTimeSeriesExporter for URL (given as `flag`), connected and checked, placing runs as
    the arguments say."""
    from redline.export.redistimeseries import RedisTimeSeriesExporter, connect
    from redline.export.runs import PlacementRules
    return RedisTimeSeriesExporter(connect(url, flag), project=project_from(args),
                                   rules=PlacementRules(running_platform=args.platform, branch=args.branch))
