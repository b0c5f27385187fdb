"""What memtier_benchmark's parallel key pattern (P) builds, worked out before anything runs.

memtier (client.cpp) gives each of the `clients × threads` connections a slice of
`(key_maximum - key_minimum) / connections + 1` keys starting at `key_minimum + index × size`,
the last connection ending at `key_maximum` instead, and each connection walks its slice in
order, wrapping inside it. Every `__key__` of a command is its own draw. So the slices do not
split the range exactly: with more connections than keys they run past `--key-maximum`, and a
command with two `__key__` (score and member of `ZADD lb __key__ __key__`) makes members of
every key of a slice only when the slice has an odd length. redline-load follows the same
rules (loadgen/src/keys.rs); this module lets the suite check say what a preload really builds.
"""
from __future__ import annotations

import math
import re

from .memtier import Workload

# Commands whose arguments after the key are members of one collection, and which of them.
# (name, first member argument index, step): ZADD key score member [score member ...].
MEMBER_ARGUMENTS = {"ZADD": (3, 2), "SADD": (2, 1)}
CLAIMED_ELEMENTS = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)([KM]?)-elements", re.IGNORECASE)
KEY = "__key__"


def is_parallel(wl: Workload) -> bool:
    """memtier decides by the first command (or the SET side of the built-in mix)."""
    return bool(wl.command_key_patterns) and wl.command_key_patterns[0] == "P"


def parallel_slices(wl: Workload) -> list[tuple[int, int]]:
    """(first, last) key of each connection's slice, as memtier computes them; the last
    connection may start above `key_maximum` and then repeats its first key."""
    total = wl.connections
    size = (wl.key_maximum - wl.key_minimum) // total + 1
    slices = []
    for index in range(total):
        lo = wl.key_minimum + size * index
        hi = max(lo, wl.key_maximum) if index == total - 1 else lo + size - 1
        slices.append((lo, hi))
    return slices


def highest_key(wl: Workload) -> int | None:
    """The highest key index a parallel workload writes, when it is above --key-maximum."""
    if not is_parallel(wl) or not any(KEY in arg for argv in wl.commands for arg in argv):
        return None
    top = parallel_slices(wl)[-1][1]      # slices ascend: the last one ends highest
    return top if top > wl.key_maximum else None


def keys_above_maximum_warning(wl: Workload) -> str | None:
    top = highest_key(wl)
    if top is None:
        return None
    size = (wl.key_maximum - wl.key_minimum) // wl.connections + 1
    return (f"with {wl.connections} connections memtier_benchmark's parallel pattern (P) gives each "
            f"a slice of {size:,} key{'s' if size != 1 else ''} from --key-minimum on, so keys up to "
            f"{top:,} are written, above --key-maximum {wl.key_maximum:,} (redline-load does the same)")


def one_key_members(wl: Workload) -> tuple[str, int] | None:
    """(key, members) of the one collection a parallel `ZADD key … __key__` / `SADD key __key__`
    preload fills, when its members are drawn keys; None when that cannot be told exactly."""
    if not is_parallel(wl) or len(wl.commands) != 1 or not wl.requests:
        return None
    argv = wl.commands[0]
    rule = MEMBER_ARGUMENTS.get(argv[0].upper()) if len(argv) > 2 else None
    if rule is None or KEY in argv[1]:
        return None
    drawn = [index for index, arg in enumerate(argv) if KEY in arg]
    first, step = rule
    members = range(first, len(argv), step)
    if any(argv[index] != KEY for index in members):
        return None            # a member that is not a bare drawn key (__data__, constant text)
    offsets = [drawn.index(index) for index in members]
    total = sum(_distinct_offsets(hi - lo + 1, len(drawn), offsets, wl.requests)
                for lo, hi in parallel_slices(wl))
    return argv[1], total


def _distinct_offsets(slice_len: int, draws: int, offsets: list[int], requests: int) -> int:
    """How many keys of a slice of `slice_len` keys come up at the draw positions `offsets` of
    `requests` requests with `draws` draws each: request r draws slice key (r × draws + offset)
    mod slice_len, an orbit of slice_len / gcd(draws, slice_len) keys per offset."""
    orbit = slice_len // math.gcd(draws, slice_len)
    if len(offsets) == 1 or requests >= orbit:
        residues = {offset % math.gcd(draws, slice_len) for offset in offsets}
        return len(residues) * min(requests, orbit)
    return len({(r * draws + offset) % slice_len for r in range(requests) for offset in offsets})


def claimed_elements(*texts: str | None) -> tuple[str, int] | None:
    """("1M", 1000000) from a suite name such as `1key-zset-1M-elements-zcard`."""
    for text in texts:
        found = CLAIMED_ELEMENTS.search(text or "")
        if found:
            number, unit = found.groups()
            scale = {"": 1, "K": 1_000, "M": 1_000_000}[unit.upper()]
            return f"{number}{unit}", round(float(number) * scale)
    return None


def members_warning(wl: Workload, *names: str | None) -> str | None:
    """One line when the members a parallel preload builds differ from what the suite's name
    says it builds."""
    built = one_key_members(wl)
    claim = claimed_elements(*names)
    if built is None or claim is None or built[1] == claim[1]:
        return None
    key, members = built
    size = (wl.key_maximum - wl.key_minimum) // wl.connections + 1
    draws = sum(KEY in arg for arg in wl.commands[0])
    return (f"memtier_benchmark's preload builds {members:,} members in {key!r}, not the {claim[0]} "
            f"elements the suite's name says: its parallel pattern (P) gives each of "
            f"{wl.connections} connections a slice of {size:,} keys and {wl.requests:,} requests of "
            f"{draws} key draw{'s' if draws != 1 else ''} each (redline-load builds the same)")


def parallel_warnings(wl: Workload, *names: str | None) -> list[str]:
    """What a parallel workload builds that its suite does not say (empty for other patterns)."""
    return [w for w in (keys_above_maximum_warning(wl), members_warning(wl, *names)) if w]
