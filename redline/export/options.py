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


def add_placement_arguments(parser: argparse.ArgumentParser) -> None:
    """Where the results belong in the upstream scheme."""
    parser.add_argument("--github-org", default=Project.github_org, metavar="ORG",
                        help=f"label github_org and part of every key (default {Project.github_org})")
    parser.add_argument("--github-repo", default=Project.github_repo, metavar="REPO",
                        help=f"label github_repo and part of every key (default {Project.github_repo})")
    parser.add_argument("--triggering-env", default=Project.triggering_env, metavar="ENV",
                        help=f"label triggering_env and part of every key (default {Project.triggering_env})")
    parser.add_argument("--platform", metavar="NAME",
                        help="running_platform (default: the host name the runs were measured on)")
    parser.add_argument("--branch", metavar="NAME",
                        help="branch of runs whose target names none (a git:REPO@BRANCH target names its own)")


def exporter_from(args, url: str):
    """The RedisTimeSeriesExporter for URL, connected and checked, placing runs as the arguments say."""
    from redline.export.redistimeseries import RedisTimeSeriesExporter, connect
    from redline.export.runs import PlacementRules
    return RedisTimeSeriesExporter(connect(url),
                                   project=Project(args.github_org, args.github_repo, args.triggering_env),
                                   rules=PlacementRules(running_platform=args.platform, branch=args.branch))
