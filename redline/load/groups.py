"""A test's clients, all at once: the groups of a suite's `clientconfigs` (or one role client).

Each group is its own redline-load process (memtier mode or a role) against the same server,
with its own connections, rate and length; all start together. Upstream exports the last
group's results, so the last group is the headline: its result is what the engine measures
(its phases drive the window probe, its Totals give ops/s and latency), and every group's own
numbers are kept beside it (`LoadResult.groups`, stored in the run's facts as `groups`).

Roles start first: subscribers, tracking listeners and job workers connect (thousands of
connections can take seconds on a busy machine) and announce their first phase before the
memtier groups that feed them start, so a short run does not spend its window on their setup.

Lengths keep the suite's proportions: a producer written to outlive its consumers (125 s beside
120 s) still does under `--duration 2s` (3 s beside 2 s: memtier-mode lengths are whole seconds,
rounded up). A group without a length of its
own (a tracking listener) runs as long as the headline.
"""
from __future__ import annotations

import math
import resource
import threading
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable

from redline.core.errors import RunError
from redline.load.redline_load import LoadListener, LoadRequest, LoadResult, NotAResult, run_load
from redline.suites import roles

if TYPE_CHECKING:
    from redline.suites import TestSpec
    from redline.suites.model import ToolInvocation


def is_grouped(test: "TestSpec") -> bool:
    """Whether the test needs more than one memtier-mode process (several groups, or a role)."""
    return len(test.clients) > 1 or not test.client.is_memtier


def describe(index: int, client: "ToolInvocation") -> str:
    """'group 2 (pubsub-sub-bench)', 'group 1 (memtier_benchmark: LPUSH blpop:key:1 __data__)'."""
    workload = client.workload
    what = client.tool
    if workload is not None and workload.arbitrary_commands:
        what += ": " + " | ".join(" ".join(command) for command in workload.commands if command)
    return f"group {index + 1} ({what})"


def own_length(client: "ToolInvocation") -> float | None:
    """The group's length as the suite writes it (memtier --test-time, a role's -test-time)."""
    if client.workload is not None:
        return float(client.workload.test_time) if client.workload.test_time else None
    return roles.own_test_time(client.tool, client.arguments)


def group_durations(clients: list["ToolInvocation"], duration_s: float | None) -> list[float | None]:
    """Each group's length: the suite's, scaled so the headline (last) group runs `duration_s`."""
    lengths = [own_length(client) for client in clients]
    reference = lengths[-1] or max((length for length in lengths if length), default=None)
    if reference is None:
        return [duration_s] * len(clients)
    scale = duration_s / reference if duration_s is not None else 1.0
    return [(length or reference) * scale for length in lengths]


@dataclass
class GroupRequest:
    label: str
    request: LoadRequest
    connections: int = 0        # memtier-mode connections (a role checks its own limit)


def group_requests(test: "TestSpec", base: LoadRequest, arguments_for: Callable[[list[str]], list[str]]) -> list[GroupRequest]:
    """One redline-load request per client of the test, derived from the engine's `base`
    (server, warm-up, CPUs); `arguments_for` adapts a suite line to the server (cluster flags)."""
    durations = group_durations(test.clients, base.duration_s)
    out = []
    for index, (client, duration) in enumerate(zip(test.clients, durations)):
        json_path = base.json_path.with_name(f"{base.json_path.stem}-group{index + 1}.json")
        role = None if client.is_memtier else client.tool
        if role is None and duration is not None:
            duration = float(math.ceil(duration - 1e-9))     # memtier's --test-time is whole seconds
        arguments = arguments_for(client.arguments) if role is None else list(client.arguments)
        out.append(GroupRequest(describe(index, client),
                                replace(base, arguments=arguments, json_path=json_path, duration_s=duration, role=role),
                                connections=client.workload.connections if client.workload else 0))
    return out


def group_summary(label: str, result: LoadResult) -> dict:
    """What the run document keeps of one group."""
    report = result.report
    return {
        "group": label,
        "argv": result.argv,
        "ops": report.ops,
        "ops_per_sec": report.ops_per_sec,
        "p50_ms": report.percentile_ms(50),
        "p99_ms": report.percentile_ms(99),
        "measured_s": report.measured_s,
        "errors": report.errors,
        "role_counts": report.role_counts,
        "io": report.io,
    }


READY_TIMEOUT_S = 120.0     # how long a role may take to connect before the other groups start anyway


class _Started:
    """Passes a group's events on (to the engine's listener for the headline) and notes the
    first phase: the group has connected and set itself up."""

    def __init__(self, inner: LoadListener | None):
        self.inner, self.ready = inner, threading.Event()

    def on_phase(self, phase: str, at: float) -> None:
        self.ready.set()
        if self.inner is not None:
            self.inner.on_phase(phase, at)

    def on_progress(self, event: dict) -> None:
        if self.inner is not None:
            self.inner.on_progress(event)


FD_MARGIN = 64     # descriptors a load generator needs besides its connections


def raise_fd_limit(connections: int) -> None:
    """Let a child process open `connections` sockets: raise redline's soft RLIMIT_NOFILE (its
    children inherit it) up to the hard limit, or refuse with what is needed and what was found.
    The roles do the same for themselves (redline-load --role)."""
    needed = connections + FD_MARGIN
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return
    if hard != resource.RLIM_INFINITY and hard < needed:
        raise RunError(f"{connections} connections need {needed} file descriptors; the limit is {soft} "
                       f"(hard {hard}): raise it with `ulimit -n {needed}`")
    resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))


def run_groups(groups: list[GroupRequest], *, listener: LoadListener | None = None,
               server_alive: Callable[[], bool] | None = None, timeout_s: float | None = None) -> LoadResult:
    """Every group at once; the headline (last) group's result, with `groups` holding every
    group's summary. A group that fails fails the run, named."""
    raise_fd_limit(max(group.connections for group in groups))
    results: list[LoadResult | BaseException | None] = [None] * len(groups)
    started = [_Started(listener if index == len(groups) - 1 else None) for index in range(len(groups))]

    def run(index: int) -> None:
        try:
            results[index] = run_load(groups[index].request, listener=started[index],
                                      server_alive=server_alive, timeout_s=timeout_s)
        except BaseException as exc:      # re-raised below, in the caller's thread
            results[index] = exc
        finally:
            started[index].ready.set()    # a group that failed before its first phase releases the others

    threads = [threading.Thread(target=run, args=(index,), daemon=True) for index in range(len(groups))]
    roles_first = sorted(range(len(groups)), key=lambda index: groups[index].request.role is None)
    for index in roles_first:
        if groups[index].request.role is None:
            for role in (i for i in roles_first if groups[i].request.role is not None):
                started[role].ready.wait(READY_TIMEOUT_S)
        threads[index].start()
    for thread in threads:
        thread.join()
    headline = results[-1]
    for index, outcome in enumerate(results[:-1]):
        if isinstance(outcome, NotAResult):
            raise RunError(f"{groups[index].label}: {outcome}")
        if isinstance(outcome, BaseException):
            raise outcome
    if isinstance(headline, BaseException):
        raise headline
    assert isinstance(headline, LoadResult)
    headline.groups = [group_summary(group.label, result) for group, result in zip(groups, results)]
    headline.headline = groups[-1].label
    return headline


def run_test_load(test: "TestSpec", request: LoadRequest, arguments_for: Callable[[list[str]], list[str]], *,
                  listener: LoadListener | None = None, server_alive: Callable[[], bool] | None = None,
                  timeout_s: float | None = None) -> LoadResult:
    """The engine's one call for a test's load: one memtier-mode process, or every group."""
    if not is_grouped(test):
        return run_load(request, listener=listener, server_alive=server_alive, timeout_s=timeout_s)
    return run_groups(group_requests(test, request, arguments_for), listener=listener,
                      server_alive=server_alive, timeout_s=timeout_s)
