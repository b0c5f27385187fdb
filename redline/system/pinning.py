"""CPU pinning primitives: which cores exist, and starting a process on given cores.
(The plan of which process gets which core is redline.topology.plan_cpus.)"""

from __future__ import annotations

import os


def available_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def pinned(argv: list[str], cpus: tuple[int, ...]) -> list[str]:
    """The same command, started by taskset on the given cores (an argument list, no shell)."""
    return ["taskset", "--cpu-list", ",".join(str(c) for c in cpus), *argv]
