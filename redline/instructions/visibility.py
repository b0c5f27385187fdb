"""What callgrind cannot see, said before a test is measured in instructions: it counts the
server's user-space instructions, one thread at a time. System calls, the kernel's network stack,
waiting and contention are not counted, so a test whose effect lives there (pipelining saves
round trips and system calls; large values are copied by the kernel; io-threads run concurrently)
shows little or nothing of it here. Nor does a count hold a state that follows the clock: keys that
expire within a counted run."""

from __future__ import annotations

from typing import TYPE_CHECKING

from redline.suites.commands import shortest_ttl

if TYPE_CHECKING:
    from redline.suites import TestSpec
    from redline.topology import TopologySpec

LARGE_VALUE_BYTES = 16 * 1024
# A state that expires within this many seconds is not held through a counted run: under callgrind
# the server runs 20-50x slower (a counted job of the catalogue took up to 17 minutes for 4 runs),
# and keys written with EX 10 expire mid-run (seen: a counted run of the upstream
# 1Mkeys-string-mixed-50-50-set-get-100B-expire measured 100% misses, and a side's preparation
# lost 7 of 1M keys before its keyspace check)
CLOCK_BOUND_TTL_S = 600


def _workload(test: TestSpec):
    return getattr(test.client, "workload", None)


def pipeline_of(test: TestSpec) -> int:
    """Requests each connection keeps in flight (1: none pipelined)."""
    return max(1, getattr(_workload(test), "pipeline", 1) or 1)


def visibility_warnings(test: TestSpec, topology: TopologySpec, *, system_calls_compared: bool = False) -> list[str]:
    """One sentence per reason this test's effect may be invisible to instruction counts.
    `system_calls_compared`: the caller also compares the server's reads and writes per request
    (the gate's screen), which is what pipelining saves, so pipelining is no such reason."""
    warnings = []
    workload = _workload(test)
    pipeline = pipeline_of(test)
    if pipeline > 1 and not system_calls_compared:
        warnings.append(f"pipeline {pipeline}: what pipelining saves is mostly system calls and network round "
                        "trips, which callgrind does not count; compare it by time")
    size = getattr(workload, "data_size", None) or 0
    if size >= LARGE_VALUE_BYTES:
        warnings.append(f"{size:,}-byte values: the kernel's copies of them are not counted; compare it by time")
    ttl = shortest_ttl(test)
    if ttl is not None and ttl[0] < CLOCK_BOUND_TTL_S:
        warnings.append(f"keys written with a time to live of {ttl[0]:g} s ({ttl[1]}): what they hold follows "
                        "the wall clock, which callgrind stretches 20-50x, and each side's own speed; compare "
                        "it by time")
    if topology.io_threads:
        warnings.append(f"{topology.name}: valgrind runs one thread at a time, so io-threads' concurrency is "
                        "invisible and their counts meaningless; compare it by time")
    return warnings
