"""One process layout for every timed server: two servers of one binary should differ in nothing.

A server draws its dictionaries' hash seed from /dev/urandom and seeds random() from the time and
its pid as it starts, and the kernel places its stack, heap and libraries at random addresses.
So two servers of the same code differ by chance: about one instance in eight finds another
command ahead of GET in its bucket of the command table and pays a string compare more per call
(docs/measure-instructions.md), a sorted set restored from one RDB file gets another skiplist,
and cache sets collide differently. Interleaved timed runs hid such offsets in the machine's
noise; duets, 10 times narrower, showed them: an A/A of HGET on 1M hashes came out −2.6%
[−3.5%, −1.7%] (docs/statistics.md, "Duets").

So every timed server starts with the counted servers' fixed seeds preloaded
(redline/server/fixed_seed.c) and with address-space randomisation off (`setarch -R`,
personality ADDR_NO_RANDOMIZE). Where either cannot be had (no C compiler to build the library,
a sandbox that refuses the personality) the server starts as before, and the run's facts say so
(`layout`)."""

from __future__ import annotations

import functools
import platform
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

from redline.core.errors import RunError
from redline.server.seed import fixed_seed_library, preloaded


def same_layout(settings):
    """`settings` (a redline.server.process.ServerSettings) for a server started with the fixed
    seeds and without address-space randomisation, as far as this machine allows. A cluster node
    keeps its own seed: it draws its node ID from it, and nodes of one ID cannot form a cluster."""
    prefix = layout_prefix(cluster=settings.config.get("cluster-enabled") == "yes")
    return replace(settings, launcher=lambda workdir: list(prefix)) if prefix else settings


def layout_facts(*, cluster: bool = False) -> dict:
    """What the timed servers of this machine start with (stored with each timed run)."""
    return {"fixed_seeds": not cluster and _seed_library() is not None, "aslr_off": bool(_no_aslr_prefix())}


@functools.cache
def layout_prefix(*, cluster: bool = False) -> tuple[str, ...]:
    seeded = not cluster and _seed_library() is not None
    return (*_no_aslr_prefix(), *(preloaded([]) if seeded else ()))


@functools.cache
def _seed_library() -> Path | None:
    try:
        return fixed_seed_library()
    except (RunError, OSError, subprocess.SubprocessError):
        return None


@functools.cache
def _no_aslr_prefix() -> tuple[str, ...]:
    """setarch's prefix that turns address-space randomisation off; () where it is refused."""
    setarch = shutil.which("setarch")
    if setarch is None:
        return ()
    prefix = (setarch, platform.machine(), "-R")
    try:
        works = subprocess.run([*prefix, "true"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        works = False
    return prefix if works else ()
