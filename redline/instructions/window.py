"""One measured run of a server under callgrind: a probe, a warm-up, then exactly the measured
requests between a zero and a dump of callgrind's counters.

    probe      1 request per connection, counters dumped
    warm-up    4 requests per connection (2 when the probe's requests cost over a million
               instructions each; buffers, the simulated caches), counters dumped: the
               difference of the two dumps over the difference of their requests is the cost of
               one request without the connections' accept and close, from which the test's
               request count is chosen (once per test, for every run and side)
    (edges)    the caller's INFO reading, then counters dumped and dropped: it is not counted
    window     the fixed request count, counters dumped; then the caller's closing INFO reading

Every run does all three, so every run of every side reaches its window the same way (the
warm-up's size follows the test's plan once there is one). The
window holds the measured requests plus the connections' accept and close (the same in every
run) and whatever the event loop and `serverCron` did meanwhile: cron runs `hz` times per
wall-clock second, and under callgrind a second holds fewer requests when the machine is busy,
so its share per operation moves with the machine's load. `instructions_per_op_command` (inside
`call()`) does not contain it.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Protocol

from redline.core.errors import RunError
from redline.instructions.callgrind import CallgrindControl
from redline.instructions.callgrind_file import CallgrindDump, parse_callgrind
from redline.instructions.costs import request_driven, window_metrics
from redline.load.redline_load import LoadListener, LoadRequest, LoadResult, run_load

# The window holds at least this many instructions: ~3-8 s under callgrind with cache simulation,
# 30+ serverCron calls at hz 10, so a cron run more or less moves the total by well under 1%.
WINDOW_INSTRUCTIONS = 150_000_000
MIN_PER_CONNECTION = 2
# A pipelined test's window sends at least this many full pipelines on each connection, so that its
# reads and writes per request are the pipeline's steady batching (one read, one write per
# pipeline), not one burst: with 75 requests a connection at pipeline 100 (the upstream
# 1Mkeys-load-string-with-10B-values-pipeline-100 at the gate's window) every connection sent its
# whole window at once and read its replies in one write
PIPELINES_PER_WINDOW = 5
BURST_PIPELINES = 2          # fewer than this many pipelines a connection: one burst (the gate's screen says so)
# ... as long as the window stays within this many times the instructions asked for: a request
# costly enough to break it (GEOSEARCH of a 60M-member set, 58M instructions: 5 pipelines of 10 on
# 8 connections were 470 times the gate's window, 12 minutes a run) spends so much per request that
# the system calls pipelining saves do not show (redline.analysis.gate judges such a screen)
PIPELINE_WINDOW_FACTOR = 20.0
MAX_REQUESTS = 500_000
PROBE_PER_CONNECTION, WARMUP_PER_CONNECTION = 1, 4
COSTLY_REQUEST = 1_000_000          # instructions: above this the warm-up sends 2 per connection, not 4
# How long a load phase may run (PhaseBound): LOAD_GRACE_S + BOUND_FACTOR × the time the phase
# before it took per request × this phase's requests (a run's probe: by the window of the test's
# run before it); the test's very first phase (its first probe, 1 request per connection)
# FIRST_PHASE_S: under callgrind the probe of 200 connections' SRANDMEMBER of 5,000 members (21.5M
# instructions each) took 4 minutes at load average 16; a test a few times costlier crosses 1,200 s.
FIRST_PHASE_S = 3600.0
LOAD_GRACE_S = 300.0
BOUND_FACTOR = 5.0
# A test is not counted when its smallest window (MIN_PER_CONNECTION requests on each connection at
# the probe's cost per request) is over this many times the window asked for; it says so
# (TooCostlyToCount) and time measures it. In the catalogue gate's first session (50M windows) two
# tests were far over: the upstream CLIENT LIST suites (1,000 connections, each request walking all
# of them, 11.4M instructions: 456x) and XPENDING IDLE (200 connections, 125M each: 1,000x) held a
# lane for 40-45 minutes per job where timing one takes under two. The costliest below the line
# (ZSCAN COUNT 1000, 41x) took 6 minutes for 4 runs.
MAX_WINDOW_FACTOR = 50.0


# An earlier session's count is kept while this run's estimate puts its window within this range
# of the target: per-op counts of windows of different lengths are not the same measurement (a
# growing hash table, the accept/close share), so sessions of one store count alike.
EARLIER_WINDOW_RANGE = (0.5, 4.0)

CHOSEN, GIVEN, EARLIER = "window", "given", "earlier"
RULES = {
    CHOSEN: (f"at least {{plan.window_instructions:,}} instructions and {MIN_PER_CONNECTION} requests per connection "
             f"({PIPELINES_PER_WINDOW} pipelines of a pipelined test, while that stays within "
             f"{PIPELINE_WINDOW_FACTOR:g}x the instructions), "
             f"at most {MAX_REQUESTS:,} requests; per-connection count rounded up to 1, 1.5, 2, 3, 5 or 7.5 × 10^k"),
    GIVEN: "{plan.per_connection} requests per connection, given by the caller (the count of the runs it is compared with)",
    EARLIER: ("{plan.per_connection} requests per connection, as this store's earlier counted runs of the test "
              "(sessions count the same requests while that gives a window of "
              f"{EARLIER_WINDOW_RANGE[0]:g}-{EARLIER_WINDOW_RANGE[1]:g}x the target)"),
}


@dataclass(frozen=True)
class RequestPlan:
    """How many requests a test's runs send, decided once per test and recorded with each run."""

    per_connection: int          # redline-load -n (requests per connection)
    connections: int
    estimate_per_op: float       # instructions per request (probe and warm-up) when it was decided
    window_instructions: int     # the target the count was chosen for
    origin: str = CHOSEN         # CHOSEN for the window, GIVEN (RunSettings.window_requests), EARLIER (the store's)

    @property
    def requests(self) -> int:
        return self.per_connection * self.connections

    def as_dict(self) -> dict:
        return {"requests": self.requests, "requests_per_connection": self.per_connection,
                "connections": self.connections,
                "estimated_instructions_per_op": round(self.estimate_per_op, 1),
                "window_instructions_target": self.window_instructions, "origin": self.origin,
                "rule": RULES[self.origin].format(plan=self)}


NICE_STEPS = (1, 1.5, 2, 3, 5, 7.5, 10)


def _nice_up(value: float) -> int:
    """The smallest of 1, 1.5, 2, 3, 5, 7.5 × 10^k at or above `value`: sessions whose estimates
    differ by a few percent send the same count."""
    value = max(1.0, value)
    power = 10 ** math.floor(math.log10(value))
    for step in NICE_STEPS:
        if step * power >= value - 1e-9:
            return math.ceil(step * power)
    return int(10 * power)


def least_per_connection(pipeline: int = 1) -> int:
    """The requests a window should send on each connection: PIPELINES_PER_WINDOW pipelines of a
    pipelined test, else MIN_PER_CONNECTION."""
    return max(MIN_PER_CONNECTION, PIPELINES_PER_WINDOW * pipeline if pipeline > 1 else 0)


def affordable_least(pipeline: int, estimate_per_op: float, connections: int, window_instructions: int) -> int:
    """least_per_connection(pipeline), lowered (not below MIN_PER_CONNECTION) to what keeps the
    window within PIPELINE_WINDOW_FACTOR × `window_instructions` at `estimate_per_op`."""
    affordable = PIPELINE_WINDOW_FACTOR * window_instructions / (max(estimate_per_op, 1.0) * max(1, connections))
    return max(MIN_PER_CONNECTION, min(least_per_connection(pipeline), math.floor(affordable)))


def choose_requests(estimate_per_op: float, connections: int,
                    window_instructions: int = WINDOW_INSTRUCTIONS, *, pipeline: int = 1) -> RequestPlan:
    """The request count for a window of at least `window_instructions` at `estimate_per_op`, and
    at least affordable_least(pipeline, …) on each connection (at most MAX_REQUESTS in all)."""
    connections = max(1, connections)
    wanted = window_instructions / max(estimate_per_op, 1.0) / connections
    least = affordable_least(pipeline, estimate_per_op, connections, window_instructions)
    cap = max(MIN_PER_CONNECTION, MAX_REQUESTS // connections)
    per_connection = min(max(least, _nice_up(wanted)), cap)
    return RequestPlan(per_connection, connections, estimate_per_op, window_instructions)


@dataclass
class WindowResult:
    load: LoadResult             # the measured requests as redline-load reported them
    dump: CallgrindDump          # callgrind's costs of exactly that window
    plan: RequestPlan
    metrics: dict[str, float | None]
    marginal_per_op: float       # this run's probe/warm-up estimate (the plan may be an earlier run's)
    warmup_per_connection: int
    pace: tuple[str, int, float] = ("window", 0, 0.0)   # the window's requests and seconds (the next probe's bound)


@dataclass(frozen=True)
class PhaseBound:
    """How long one load phase may run before redline-load is stopped, and what was expected of
    it (said when the bound is exceeded). Made only of request counts and wall-clock seconds this
    run measured, never of an instruction estimate (a difference of two dumps, which can be
    negative): at least LOAD_GRACE_S (FIRST_PHASE_S for a first phase) and finite."""

    requests: int
    limit_s: float
    expected: str


def phase_bound(requests: int, earlier: tuple[str, int, float] | None = None) -> PhaseBound:
    """The bound of a phase of `requests` requests after `earlier` = (its name, the requests it
    completed, the seconds it took) in the same run; the first phase has none to be timed by."""
    if earlier is None or earlier[1] <= 0:
        return PhaseBound(requests, FIRST_PHASE_S,
                          f"{requests:,} requests, the run's first phase (nothing earlier to time it by)")
    name, done, seconds = earlier
    expected_s = max(0.0, seconds) * requests / done
    return PhaseBound(requests, LOAD_GRACE_S + BOUND_FACTOR * expected_s,
                      f"expected about {expected_s:,.1f}s for {requests:,} requests at the pace of the {name} "
                      f"({done:,} requests in {seconds:,.1f}s)")


def _first_plan(estimate_per_op: float, connections: int, window_instructions: int, *, given: int | None,
                earlier: int | None, pipeline: int = 1) -> RequestPlan:
    """The test's plan at its first run: a given count, else the store's earlier one while it still
    fits (EARLIER_WINDOW_RANGE, and holds the pipelines PIPELINES_PER_WINDOW asks for), else one
    chosen for the window."""
    if given is not None:
        return RequestPlan(given, connections, estimate_per_op, window_instructions, origin=GIVEN)
    if earlier is not None and earlier >= affordable_least(pipeline, estimate_per_op, connections, window_instructions):
        low, high = EARLIER_WINDOW_RANGE
        if low * window_instructions <= earlier * connections * estimate_per_op <= high * window_instructions:
            return RequestPlan(earlier, connections, estimate_per_op, window_instructions, origin=EARLIER)
    return choose_requests(estimate_per_op, connections, window_instructions, pipeline=pipeline)


class TooCostlyToCount(RunError):
    """The test's smallest window is over MAX_WINDOW_FACTOR times the window asked for."""


def check_countable(per_op: float, connections: int, window_instructions: int,
                    probe_pace: tuple[str, int, float]) -> None:
    """Raise TooCostlyToCount when MIN_PER_CONNECTION requests on every connection at `per_op`
    instructions each exceed MAX_WINDOW_FACTOR × `window_instructions`; the message says what the
    window would cost and how long its requests would take at the probe's pace (`probe_pace`:
    its name, requests, seconds)."""
    smallest = MIN_PER_CONNECTION * connections * per_op
    if smallest <= MAX_WINDOW_FACTOR * window_instructions:
        return
    _, probe_requests, probe_s = probe_pace
    # the warm-up of a costly request sends as many requests as the smallest window
    minutes = 2 * MIN_PER_CONNECTION * connections * probe_s / max(probe_requests, 1) / 60
    raise TooCostlyToCount(
        f"too costly to count: its smallest window, {MIN_PER_CONNECTION} requests on each of {connections:,} "
        f"connections at about {per_op:,.0f} instructions each, is {_count(smallest)} instructions, "
        f"{smallest / window_instructions:,.0f}x the {_count(window_instructions)} asked for (its warm-up "
        f"and window would take about {minutes:,.0f} min under callgrind at the probe's pace, per run); "
        "measure it by time, or allow a larger window (--window-instructions)")


def _count(instructions: float) -> str:
    return f"{instructions / 1e6:,.0f}M" if instructions >= 1e6 else f"{instructions:,.0f}"


def _connections(result: LoadResult) -> int:
    opened = result.report.connections_opened
    if not opened:
        raise RunError("redline-load reported no opened connection in the probe")
    return int(opened)


class WindowEdges(Protocol):
    """What the caller reads from the server just before and just after the window (INFO): said
    outside the counted requests, so the window holds none of it."""

    def before(self) -> None: ...
    def after(self) -> None: ...


def measure_window(control: CallgrindControl, request: LoadRequest, *, plan: RequestPlan | None = None,
                   window_instructions: int = WINDOW_INSTRUCTIONS, fixed_per_connection: int | None = None,
                   earlier_per_connection: int | None = None, listener: LoadListener | None = None,
                   server_alive: Callable[[], bool] | None = None, edges: WindowEdges | None = None,
                   command_function: str = "call", earlier_pace: tuple[str, int, float] | None = None,
                   pipeline: int = 1) -> WindowResult:
    """Probe, warm-up and the measured window on the server `control` commands. `request` is the
    test's load (its duration and request count are replaced); `plan` the test's request count
    when an earlier run decided it; `fixed_per_connection` a count given from outside (the first
    run's plan is then that count, not one chosen from `window_instructions`);
    `earlier_per_connection` the count earlier sessions used, kept when it gives a window within
    EARLIER_WINDOW_RANGE of the target at this run's estimate; `edges` the
    caller's readings around the window, made between dumps so that none is counted;
    `earlier_pace` the test's previous window (its WindowResult.pace), which bounds this probe's
    time; `pipeline` the test's (its window holds PIPELINES_PER_WINDOW of them on each connection).
    Every load phase is a separate redline-load, so each zero and dump happens while no request is
    in flight."""
    control.instrumentation_restart()
    once = replace(request, duration_s=None, warmup_s=0.0)

    # each phase's name, completed requests and seconds; the first is the previous run's window
    paces: list[tuple[str, int, float]] = [earlier_pace] if earlier_pace else []

    def send(per_connection: int, connections: int | None, name: str,
             events: LoadListener | None = None) -> LoadResult:
        """One load phase, bounded by the pace of the phase before it (PhaseBound)."""
        requests = per_connection * connections if connections else per_connection
        bound = phase_bound(requests, paces[-1] if paces else None)
        phase_request = replace(once, requests=per_connection,
                                json_path=Path(str(request.json_path) + f".{name}.json"))
        started = time.monotonic()
        result = run_load(phase_request, listener=events, server_alive=server_alive, timeout_s=bound.limit_s,
                          expected=f"the {name}: {bound.expected}")
        paces.append((name, result.report.ops or 0, time.monotonic() - started))
        return result

    # the probe opens every connection of the test: a later run (`plan` known) bounds all of them
    probe = send(PROBE_PER_CONNECTION, plan.connections if plan else None, "probe")
    probe_dump = _dumped(control)
    probe_cost = request_driven(probe_dump)
    probe_per_op = probe_cost / max(probe.report.ops or 1, 1)
    if plan is None and fixed_per_connection is None:     # the test's first window: is it worth counting?
        check_countable(probe_per_op, _connections(probe), window_instructions, paces[-1])
    # every run of a test warms up alike: by the test's plan once there is one (a later run's probe
    # also holds what the server did between runs)
    warmup_size = WARMUP_PER_CONNECTION if (plan.estimate_per_op if plan else probe_per_op) < COSTLY_REQUEST else 2
    warmup = send(warmup_size, _connections(probe), "warm-up")
    warmup_dump = _dumped(control)          # also zeroes the counters: the window starts here
    # the marginal cost of a request (serverCron left out, as in the metrics): probe and warm-up
    # open and close the same connections
    extra_ops = (warmup.report.ops or 0) - (probe.report.ops or 0)
    marginal = (request_driven(warmup_dump) - probe_cost) / extra_ops if extra_ops > 0 else 0.0
    if marginal <= 0:
        marginal = request_driven(warmup_dump) / max(warmup.report.ops or 1, 1)
    if plan is None:
        plan = _first_plan(marginal, _connections(warmup), window_instructions, given=fixed_per_connection,
                           earlier=earlier_per_connection, pipeline=pipeline)
    if edges is not None:
        edges.before()
        _dumped(control)                    # the reading's own cost goes, the window starts here
    measured = send(plan.per_connection, plan.connections, "window", listener)
    dump = parse_callgrind(control.dump())
    if edges is not None:
        edges.after()
    ops = measured.report.ops or 0
    if ops != plan.requests:
        raise RunError(f"the measured window completed {ops} of {plan.requests} requests")
    return WindowResult(load=measured, dump=dump, plan=plan,
                        metrics=window_metrics(dump, ops, command_function), marginal_per_op=marginal,
                        warmup_per_connection=warmup_size, pace=("previous run's window", *paces[-1][1:]))


def _dumped(control: CallgrindControl) -> CallgrindDump:
    """The counters since the last dump (then zeroed); the file itself is not kept."""
    path = control.dump()
    try:
        return parse_callgrind(path)
    finally:
        path.unlink(missing_ok=True)
