"""Types of command-line arguments: a bad value is a one-line usage error from the parser."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from redline.suites.discovery import name_pattern

DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
LONGEST_S = 24 * 3600.0
UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def duration(text: str) -> float:
    """'10s', '500ms', '2m', or plain seconds: 0 to 24h."""
    match = DURATION.match(text)
    if not match:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (examples: 10s, 500ms, 2m)")
    seconds = float(match.group(1)) * UNIT_SECONDS[match.group(2)]
    if seconds > LONGEST_S:
        raise argparse.ArgumentTypeError(f"{text!r} is longer than 24h")
    return seconds


def bounded_duration(shortest_s: float, longest_s: float, why: str):
    """A duration type for a flag with bounds of its own; a value outside says the bound and why."""
    def check(text: str) -> float:
        seconds = duration(text)
        if seconds < shortest_s:
            raise argparse.ArgumentTypeError(f"{text!r} is shorter than {shortest_s:g}s, the shortest allowed ({why})")
        if seconds > longest_s:
            raise argparse.ArgumentTypeError(f"{text!r} is longer than {longest_s:g}s, the longest allowed ({why})")
        return seconds
    return check


# the fleet's timeouts: a job idle this long belongs to a dead agent; a heartbeat keeps it alive
claim_idle = bounded_duration(2.0, LONGEST_S, "a live agent's heartbeat must reach Redis within it, and two agents "
                                              "would measure one job on the same cores")
heartbeat = bounded_duration(0.1, 60.0, "the agent's liveness: often enough to keep its job, not a busy loop")


def whole_seconds(text: str) -> float:
    """A measured time: whole seconds, at least 1 (redline-load's --test-time counts seconds)."""
    seconds = duration(text)
    if seconds < 1 or not seconds.is_integer():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of seconds of at least 1 "
                                         "(the load generator measures whole seconds; examples: 1s, 10s, 2m)")
    return seconds


def regex(text: str) -> str:
    """A name filter: a Python regular expression (checked here, used by re.search)."""
    try:
        name_pattern(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


LARGEST_ID = 2**63 - 1      # SQLite's INTEGER


def session_id(text: str) -> int | str:
    """A stored session: its number, or 'latest'."""
    if text == "latest":
        return text
    if not text.isdigit() or not 0 < int(text) <= LARGEST_ID:
        raise argparse.ArgumentTypeError(f"SESSION must be a session number or 'latest', got {text!r}")
    return int(text)


def _positive(text: str, convert, kind: str):
    try:
        value = convert(text)
    except ValueError:
        value = 0
    if not 0 < value < float("inf"):      # NaN and infinity too
        raise argparse.ArgumentTypeError(f"expected a positive {kind}, got {text!r}")
    return value


def positive_int(text: str) -> int:
    return _positive(text, int, "integer")


def positive_float(text: str) -> float:
    return _positive(text, float, "number")


def port_number(text: str) -> int:
    """A TCP port: 1 to 65535."""
    port = positive_int(text)
    if port > 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (1 to 65535)")
    return port


def store_path(text: str) -> Path:
    """--store: a file path; '' would silently mean the current directory."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path is not a store file (default: ./redline.db)")
    return Path(text)


def bounded_int(lowest: int, highest: int, why: str):
    """A whole-number type for a flag with bounds of its own; a value outside says the bounds and why."""
    def check(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r} ({why})") from None
        if not lowest <= value <= highest:
            raise argparse.ArgumentTypeError(f"{value} is outside {lowest}..{highest} ({why})")
        return value
    return check


bisect_max_concurrent = bounded_int(0, 1000, "0 turns the loop off")     # the closed loop's open bisections per repository
bisect_max_steps = bounded_int(2, 10_000, "the confirmation and at least one step")   # pairs measured per bisection
bisect_max_queued = bounded_int(0, 1000, "0: no queue, a change past the cap is refused")   # changes waiting per repository
# agent time per repository per rolling 24 hours; at most 24h (the duration type's bound: one agent all day)
bisect_agent_time = bounded_duration(60.0, LONGEST_S, "agent time per repository in any 24 hours")
bisect_stall_after = bounded_duration(30.0, LONGEST_S, "an agent's restart or a short outage must not stall a bisection")


def github_repository(text: str) -> str:
    """OWNER/NAME as GitHub spells a repository (the webhook endpoint's form of it)."""
    from redline.fleet.api import REPOSITORY
    if not REPOSITORY.match(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not OWNER/NAME (e.g. redis/redis)")
    return text
