"""The real test runner: one test on one topology, its sides' servers in the test's planned state,
each run measured with redline-load and the probes.

The engine (redline/engine/engine.py) decides *which* run comes next; this module decides what a run
is: a server in the test's state, the load with the window probe around its measured window, a
watch for hung or exited servers, profiles; then the run document's status, error, metrics and
flags. It stores nothing. Two collaborators do the work on the machine, injected by the
composition root (redline.lab.local): a `ServerFactory` brings servers into the test's state,
watches and probes them (real: redline.bench.servers.RealServers — datasets, snapshots, /proc,
INFO), and a `LoadRunner` runs the test's load (real: redline.load.groups.run_test_load). With
fakes of both and canned reports (tests/test_runner_seam.py) the failure and flag logic runs in
milliseconds.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Protocol

from redline.bench import admission
from redline.bench.state import Prepared, memory_figures
from redline.bench.window_fit import ROUND_FACT, WindowFit, pace_flag
from redline.core.errors import RunError, SkipTest
from redline.core.run import Run
from redline.engine.run_plan import Observer, RunSettings, Side
from redline.load.redline_load import LoadListener, LoadRequest, LoadResult, NotAResult, ServerGone
from redline.load.report import LoadReport
from redline.server.probes import WindowProbe
from redline.server.layout import layout_facts, same_layout
from redline.server.process import Server
from redline.server.watch import ServerHung
from redline.system import machine
from redline.system.steadiness import Steadiness
from redline.topology import CpuPlan, TopologySpec

if TYPE_CHECKING:
    from redline.suites import TestSpec

CLIENT_SATURATION = 0.90       # client_cpu_util above this: the load generator may have been the bottleneck
MISS_PATH_RATIO = 0.50         # a read workload with more misses than this measures the miss path
ERROR_TYPES_SHOWN = 3
DUET_OVERLAP = 0.90           # a duet whose measured windows overlapped less than this (of the shorter) is flagged

ArtifactPlace = Callable[[Run], Path]      # where a run's files (profiles) are kept
ServerAlive = Callable[[], bool]


class LoadRunner(Protocol):
    """What runs a test's load (real: redline.load.groups.run_test_load, over run_load): redline-load's
    result, with the listener told its phases and `server_alive` polled meanwhile. Raises ServerGone
    once `server_alive` returned False, lets its ServerHung through, raises NotAResult when
    redline-load refused its own numbers (nothing completed, connections lost) and RunError for any
    other failure."""

    def __call__(self, test: TestSpec, request: LoadRequest, arguments_for: Callable[[list[str]], list[str]], *,
                 listener: LoadListener | None = None, server_alive: ServerAlive | None = None,
                 timeout_s: float | None = None) -> LoadResult: ...


class ServerFactory(Protocol):
    """What starts a side's servers in the test's state, restarts them, and reads them while a run
    goes on (real: redline.bench.servers.RealServers)."""

    def plan(self) -> str: ...                            # decide, once per test, how runs reach their state (RunError)
    def start(self, side: Side) -> Prepared: ...          # a server in that state (SkipTest, RunError)
    def before_slot(self, slot: list[tuple[Side, Prepared]],     # per side: its server, a restart into
                    every: Iterable[Prepared]) -> list: ...       # the state, or the RunError/SkipTest why not
    def watch(self, server: Server) -> ServerAlive: ...   # polled during the load: False once exited, ServerHung once hung
    def probe(self, server: Server) -> WindowProbe: ...   # CPU and INFO at the measured window's edges
    def at_run_start(self, server: Server) -> dict | None: ...   # keys and memory as the run starts
    def steadiness(self, cores: list[int]) -> Steadiness | None: ...   # how steady those cores are now (a probe)


class _LoadProgress:
    """Forwards redline-load's events to the observer, the window probe and the profiler."""

    def __init__(self, observer: Observer, probe: WindowProbe | None, settings: LoadRequest, recorder=None):
        self.observer, self.probe, self.request, self.recorder = observer, probe, settings, recorder

    def on_phase(self, phase: str, at: float) -> None:
        if phase == "warmup":
            self.observer.phase("warm-up", total=self.request.warmup_s)
        elif phase == "measure":
            if self.probe:
                self.probe.mark_start()
            if self.recorder:
                self.recorder.start()
            self.observer.phase("measurement", total=self.request.duration_s)
        elif phase == "done" and self.probe:
            self.probe.mark_end()

    def on_progress(self, event: dict) -> None:
        if event.get("requests_total"):
            self.observer.progress(event.get("requests_done", 0), event["requests_total"])
        else:
            self.observer.progress(event.get("elapsed_s", 0.0))


class ServerRunner:
    """The engine's TestRunner on servers from `servers`, loaded by `load` (see the module docstring
    and redline.engine.engine.TestRunner)."""

    # what this runner's servers run under (redline.topology.deploy's `under`): timed servers of one
    # binary laid out alike (fixed seeds, no address-space randomisation: redline.server.layout)
    servers_under = staticmethod(same_layout)
    probes_steadiness = True   # timed runs depend on how steady the machine is; counted ones do not
    fits_window = True         # a timed window too short for the test's calls is lengthened (window_fit)

    def __init__(self, test: TestSpec, topology: TopologySpec, sides: list[Side], settings: RunSettings, *,
                 observer: Observer, servers: ServerFactory, load: LoadRunner, workdir: Path,
                 artifacts: ArtifactPlace):
        self.test, self.topology, self.sides, self.settings = test, topology, sides, settings
        self.observer, self.servers, self.load = observer, servers, load
        self.workdir, self.artifacts = workdir, artifacts
        self.ready_sides: dict[Side, Prepared] = {}
        self.replace: set[Side] = set()          # sides whose server hung: a fresh one is due
        self.probed = False                      # how steady the cores are: probed once, as the first run starts
        self.steadiness: Steadiness | None = None    # what that probe found (None: it could not run)
        workload = getattr(test.client, "workload", None)
        rate_limited = bool(workload and workload.rate_limiting)    # its pace is its rate (window_fit)
        self.timed_window = WindowFit.for_test(settings.duration_s, workload.test_time if workload else None,
                                               fixed=not self.fits_window or rate_limited)

    def skip_reason(self) -> str | None:
        managed = all(side.target.managed for side in self.sides)
        return admission.unsupported_reason(self.test, self.topology, managed=managed)

    def plan(self) -> str:
        return self.servers.plan()

    def prepare(self, side: Side) -> None:
        self.ready_sides[side] = self.servers.start(side)

    def ready(self, side: Side) -> bool:
        return side in self.ready_sides

    def needs_fresh_server(self, side: Side) -> bool:
        if side in self.replace:
            self.replace.discard(side)
            return True
        return False

    def release(self, side: Side) -> None:
        prepared = self.ready_sides.pop(side, None)
        if prepared is not None:
            prepared.server.stop()

    def close(self) -> None:
        for side in list(self.ready_sides):
            self.release(side)

    def measure(self, side: Side, run: Run) -> None:
        """One run of one side on a server in the test's planned state. A side whose server could
        not be brought back into that state, or exited, runs no more; one that hung is replaced. A
        window too short for the test's calls is lengthened and the run measured again with it."""
        while True:
            prepared = self._before_slot([(side, run)])[side]
            if prepared is None:
                return
            self._measure(side, run, prepared)
            self._after_run(side, run, prepared)
            if not self._window_lengthened([(side, run)]):
                return

    def measure_together(self, runs: list[tuple[Side, Run]]) -> None:
        """A duet (redline.engine.engine): every side's server brought into the test's state, here
        (a server dies with the thread that started it), then every side's load at once, one thread
        each, the servers sharing the plan's server cores and the loads its client cores. A run
        whose partner could not start is not measured alone: alone it would measure something else.
        A window too short for the test's calls is lengthened and the pair measured again with it."""
        while self._duet(runs) and self._window_lengthened(runs):
            pass

    def _duet(self, runs: list[tuple[Side, Run]]) -> bool:
        """One duet of `runs`; False when a side could not start its run."""
        prepared = self._before_slot(runs)
        partners = ", ".join(side.target.label for side, _ in runs)
        if any(ready is None for ready in prepared.values()):
            for side, run in runs:
                if prepared[side] is not None:
                    run.facts = {**prepared[side].facts, "machine": machine.facts()}
                    run.finish("failed", error=f"not measured: a duet of {partners} needs every side, "
                                               "and another could not start this run")
            return False
        self._probe_once(next(iter(prepared.values())).plan)      # before any load: the servers are idle
        interrupted = threading.Event()
        duet = _Duet([(side, run, prepared[side]) for side, run in runs], self._measure, stop=interrupted.is_set)
        try:
            duet.wait()
        except BaseException:
            interrupted.set()             # each load ends at its next poll; the engine marks the runs interrupted
            duet.wait(reraise=False)
            raise
        overlap = _overlap([run.facts.get("window") for _, run in runs])
        for side, run in runs:
            run.facts["duet"] = {"with": [other.target.label for other, _ in runs if other is not side],
                                 "load_order": [s.target.label for s, _ in runs], "overlap": overlap}
            if overlap is not None and overlap < DUET_OVERLAP:
                run.flags.append(f"duet: the sides' measured windows overlapped for {overlap:.0%} of the shorter; "
                                 "the rest of it did not share the machine with the other side")
            self._after_run(side, run, prepared[side])
        return True

    def _before_slot(self, runs: list[tuple[Side, Run]]) -> dict[Side, Prepared | None]:
        """The servers of one slot (one run, or a duet's pair), each in the test's state
        (redline.bench.state: used servers stop first, restarts run at once). A side whose server
        could not be brought back into that state gets None: the run failed, the side runs no more."""
        ready = self.servers.before_slot([(side, self.ready_sides[side]) for side, _ in runs],
                                         list(self.ready_sides.values()))
        slot: dict[Side, Prepared | None] = {}
        for (side, run), prepared in zip(runs, ready):
            if isinstance(prepared, Prepared):
                self.ready_sides[side] = slot[side] = prepared
                continue
            self.ready_sides.pop(side)
            self.observer.note(f"{side.target.label}: the server could not be restarted into the test's state; "
                               f"the remaining runs of {self.test.name} are skipped")
            run.finish("failed", error=str(prepared))
            slot[side] = None
        return slot

    def _window_lengthened(self, slot: list[tuple[Side, Run]]) -> bool:
        """Whether the window was too short for the test's calls (redline.bench.window_fit): then
        it is lengthened for this test and the slot's runs are cleared, to be measured again with
        it. Only while every side of the slot can run again."""
        runs = [run for _, run in slot]
        if runs[0].purpose != "measure" or not all(side in self.ready_sides for side, _ in slot):
            return False
        reason = self.timed_window.after_slot(runs)
        if reason is None:
            return False
        self.observer.note(f"window lengthened: {reason}; run {runs[0].run_index} is measured again")
        for run in runs:
            run.measure_again()
        return True

    def _after_run(self, side: Side, run: Run, prepared: Prepared) -> None:
        """A server that hung is replaced for the next run; one that exited runs no more."""
        if prepared.hung:
            self.release(side)
            self.replace.add(side)
            self.observer.note(f"{side.target.label}: the server hung and was killed; "
                               "a fresh one is started for the next run")
        elif run.status != "ok" and not prepared.server.alive():
            self.release(side)
            self.observer.note(f"{side.target.label}: the server exited; "
                               f"the remaining runs of {self.test.name} are skipped")

    # -- one run ------------------------------------------------------------------------------
    def _measure(self, side: Side, run: Run, prepared: Prepared, stop: Callable[[], bool] | None = None) -> None:
        """The run's load and what it measured. `stop()` true ends the load at its next poll (a
        duet's other thread saw redline interrupted)."""
        server, settings = prepared.server, self.settings
        request = LoadRequest(arguments=server.load_arguments(self.test.client.arguments), host=server.host,
                              port=server.port, json_path=self.workdir / f"run-{run.uid}.json",
                              duration_s=self.timed_window.duration_s, warmup_s=settings.warmup_s,
                              cpus=prepared.plan.client_cpus)
        probe, server_watch = self.servers.probe(server), self.servers.watch(server)
        watch = server_watch if stop is None else (lambda: not stop() and server_watch())
        run.facts = {**prepared.facts, "machine": self._machine_facts(prepared), "loadgen_argv": request.argv(),
                     "warmup_s": settings.warmup_s,
                     "duration_s": self.timed_window.duration_s if self.fits_window else None,
                     **({"window_fitted": self.timed_window.fitted} if self.timed_window.fitted else {}),
                     "state": dict(prepared.facts["state"])}
        try:
            try:
                if not watch():      # stopped or gone since its last run: said now, not after INFO's timeouts
                    raise ServerGone()
                run.facts["state"]["at_run_start"] = self.servers.at_run_start(server)
                result = self._drive(side, run, request, probe, watch)
            except ServerHung as hung:
                prepared.hung = True
                raise RunError(f"the server stopped answering during the run: {hung.reason}; "
                               "it was killed") from None
            except ServerGone:
                reason = server.crash_reason()
                raise RunError(f"the server exited during the run ({server.exit_description()})"
                               + (f": {reason}" if reason else ""))
            except NotAResult as exc:
                round_s = _slow_round_s(exc.result.report, probe)
                if round_s:
                    run.facts[ROUND_FACT] = round_s
                raise RunError(_why_not_a_result(exc, probe)) from exc
            run.metrics, run.series, run.flags = self._results(result, probe, prepared.plan)
            run.facts["state"]["memory_at_window_start"] = memory_figures(probe.info_start)
            run.facts["window"] = _window_times(probe)
            run.facts["server_run_id"] = (probe.info_start or {}).get("run_id")   # equal where the seeds are fixed
            run.facts["loadgen"] = result.report.facts
            if result.groups:       # several clients at once (redline.load.groups): the headline is the last
                run.facts.update(groups=result.groups, headline_group=result.headline, loadgen_argv=result.argv)
                self.observer.note(f"headline metrics: {result.headline}, the last client (as upstream exports it)")
            run.finish("ok")
        except RunError as exc:
            run.server_log_tail = server.log_tail()
            run.finish("failed", error=str(exc))
        finally:
            probe.close()

    def _machine_facts(self, prepared: Prepared) -> dict:
        """The machine's facts for a run, with how steady the test's cores were as its first run
        started (redline.system.steadiness: the servers are idle then); every run of the test
        carries that one probe."""
        if not self.probes_steadiness:
            return machine.facts()
        self._probe_once(prepared.plan)
        return {**machine.facts(), "layout": layout_facts(cluster=self.topology.cluster),
                **({"steadiness": self.steadiness.as_json()} if self.steadiness else {})}

    def _probe_once(self, plan: CpuPlan) -> None:
        """The steadiness probe of the test's cores, taken once, as its first timed run starts."""
        if not self.probes_steadiness or self.probed:
            return
        self.probed = True
        self.steadiness = self.servers.steadiness(sorted({c for cores in (*plan.servers, plan.client_cpus)
                                                          for c in cores}))
        if self.steadiness is not None and not self.steadiness.steady:
            self.observer.note(f"the machine is {self.steadiness.describe()}: this test's timed intervals "
                               "will be wider than on a quiet machine")

    def _drive(self, side: Side, run: Run, request: LoadRequest, probe: WindowProbe,
               watch: ServerAlive) -> LoadResult:
        """The load of one run (and, for a profile run, perf around its window)."""
        recorder = self._recorder(side, self.ready_sides[side].server, run) if run.purpose == "profile" else None
        try:
            if recorder is not None:
                recorder.prepare()           # perf attached before the load: the window is all recorded
            result = self.load(self.test, request, self.ready_sides[side].server.load_arguments,
                               listener=_LoadProgress(self.observer, probe, request, recorder),
                               server_alive=watch, timeout_s=self._run_timeout())
            if recorder is not None:
                self.observer.phase("profile: perf script, flame graph")
                run.profile = recorder.stop().as_json()
                recorder = None
            return result
        finally:
            if recorder is not None:         # the run failed or was interrupted: perf's output is not used
                recorder.abort()

    def _results(self, result: LoadResult, probe: WindowProbe, plan: CpuPlan):
        """The run's metrics, per-second series and flags."""
        return _metrics(self.test, result.report, probe, plan, window_is_time=self.fits_window)

    def _run_timeout(self) -> float:
        """Generous: the run's own length plus two minutes (a run that hangs must not hang redline)."""
        workload = getattr(self.test.client, "workload", None)
        own = self.timed_window.duration_s or (workload.test_time if workload and workload.test_time else 600)
        return self.settings.warmup_s + own + 120.0

    def _recorder(self, side: Side, server: Server, run: Run):
        """perf for the profiled run; raises RunError when this server cannot be profiled."""
        if not server.managed:
            raise RunError("cannot profile a tcp:// target: redline does not run that server")
        from redline.profile import Recorder  # perf tooling is only needed with --profile
        return Recorder(pids=server.pids(), binary=side.target.binary, workdir=self.artifacts(run),
                        title=f"{self.test.name} — {side.target.label}")


def _window_times(probe: WindowProbe) -> dict | None:
    """When the measured window began and ended (Unix time), from the probe's own marks."""
    if probe.cpu_start is None or probe.cpu_end is None:
        return None
    offset = time.time() - time.monotonic()
    return {"start": round(probe.cpu_start.at + offset, 3), "end": round(probe.cpu_end.at + offset, 3)}


def _overlap(windows: list[dict | None]) -> float | None:
    """The share of the shortest measured window that every side's window covered (a duet's loads
    start together; a share below 1 is time one side ran alone, or nobody: negative)."""
    if not windows or any(w is None for w in windows):
        return None
    shortest = min(w["end"] - w["start"] for w in windows)
    if shortest <= 0:
        return None
    return round((min(w["end"] for w in windows) - max(w["start"] for w in windows)) / shortest, 3)


class _Duet:
    """The loads of a duet, one thread per side, started in the given order. A thread only waits on
    its load generator, which it starts and outlives (redline.system.children); whatever one
    raises that is not a failed run is raised again here."""

    def __init__(self, sides: list[tuple[Side, Run, Prepared]], measure, *, stop: Callable[[], bool]):
        self.raised: list[BaseException] = []
        self.threads = [threading.Thread(target=self._one, args=(measure, side, run, prepared, stop), daemon=True,
                                         name=f"duet {side.target.label}") for side, run, prepared in sides]
        for thread in self.threads:
            thread.start()

    def _one(self, measure, side: Side, run: Run, prepared: Prepared, stop) -> None:
        try:
            measure(side, run, prepared, stop)
        except BaseException as exc:      # noqa: BLE001 — handed to the waiting thread
            self.raised.append(exc)

    def wait(self, *, reraise: bool = True) -> None:
        for thread in self.threads:
            while thread.is_alive():
                thread.join(timeout=0.2)      # short waits: Ctrl-C reaches the waiting thread between them
        if self.raised and reraise:
            raise self.raised[0]


def _metrics(test: TestSpec, report: LoadReport, probe: WindowProbe, plan: CpuPlan, *, window_is_time: bool = True):
    """`window_is_time`: False for a counted window (a request count, under callgrind), where the
    flags that read the load's own time (a saturated client, too few rounds in the window) mean
    nothing."""
    ops = report.ops or 0
    cpu = probe.cpu
    measured_s = report.measured_s or 0.0
    client_cpus = len(plan.client_cpus) or 1
    client_cpu_s = report.client_cpu_s
    hits, misses = probe.info_delta("keyspace_hits"), probe.info_delta("keyspace_misses")
    metrics = {
        "ops_per_sec": report.ops_per_sec,
        "p50_ms": report.percentile_ms(50),
        "p90_ms": report.percentile_ms(90),
        "p99_ms": report.percentile_ms(99),
        "p999_ms": report.percentile_ms(99.9),
        "server_cpu_us_per_op": cpu.total_s * 1e6 / ops if cpu and ops else None,
        "client_cpu_util": (client_cpu_s / measured_s / client_cpus
                            if client_cpu_s is not None and measured_s else None),
        "used_memory_bytes": float(probe.info_end["used_memory"]) if probe.info_end else None,
        "keyspace_hits": hits,
        "keyspace_misses": misses,
        "server_cpu_s": cpu.total_s if cpu else None,
        "server_user_s": cpu.user_s if cpu else None,
        "server_system_s": cpu.system_s if cpu else None,
        "client_cpu_s": client_cpu_s,
        "client_cpu_us_per_op": client_cpu_s * 1e6 / ops if client_cpu_s is not None and ops else None,
        "server_reads_per_op": _per_op(probe.info_delta("total_reads_processed"), ops),
        "server_writes_per_op": _per_op(probe.info_delta("total_writes_processed"), ops),
        "ops": float(ops),
        "measured_s": measured_s,
        "errors": float(report.error_count),
    }
    flags = []
    if window_is_time and metrics["client_cpu_util"] is not None and metrics["client_cpu_util"] > CLIENT_SATURATION:
        flags.append("client saturated its core")
    if _measures_miss_path(test, hits, misses):
        flags.append(f"measures the miss path ({misses / (hits + misses):.0%} misses)")
    if metrics["errors"]:
        flags.append(_error_replies(report))
    paced = pace_flag(p50_ms=metrics["p50_ms"], measured_s=measured_s, ops_per_sec=metrics["ops_per_sec"],
                      rate_limit_per_sec=report.rate_limit_per_sec) if window_is_time else None
    if paced:
        flags.append(paced)
    flags += report.warnings
    if report.io and report.io.get("note"):          # the I/O path asked for was not the one used
        flags.append(f"load generator I/O on {report.io.get('path')}: {report.io['note']}")
    series = report.per_second()
    if probe.cpu_per_second:
        series["server_cpu_util"] = probe.cpu_per_second
    return metrics, series, flags


def _per_op(count: int | None, ops: int) -> float | None:
    return count / ops if count is not None and ops else None


def _measures_miss_path(test: TestSpec, hits: int | None, misses: int | None) -> bool:
    """Most key lookups of the measured window missed (INFO counts only reads), unless the suite
    says it means to measure misses (`redline: expect-misses: true`)."""
    if hits is None or misses is None or hits + misses == 0 or test.extensions.get("expect-misses"):
        return False
    return misses / (hits + misses) > MISS_PATH_RATIO


def _error_replies(report: LoadReport) -> str:
    """'N error replies: n1 × <first message of that type>; …' — the server's own words, most
    frequent types first, so a reader sees the cause (a syntax the server lacks, BUSYKEY …)."""
    examples = report.error_examples
    ranked = sorted(report.errors.items(), key=lambda item: -item[1])
    parts = [f"{count} × {examples.get(kind, kind)}" for kind, count in ranked[:ERROR_TYPES_SHOWN]]
    if len(ranked) > ERROR_TYPES_SHOWN:
        parts.append(f"{len(ranked) - ERROR_TYPES_SHOWN} more types")
    return f"{report.error_count} error replies: {'; '.join(parts)}"


def _nothing_completed(report: LoadReport, probe: WindowProbe) -> str:
    """Why a window measured no operation: usually every connection's first requests queue behind
    each other's slow calls for longer than the window (upstream runs such suites for minutes)."""
    connections, pipeline = report.connections_opened, report.pipeline
    in_flight = connections * pipeline
    reason = (f"no reply completed in the measured {report.measured_s:g} s with {in_flight} requests "
              f"in flight ({connections} connections × pipeline {pipeline})")
    executed = probe.server_time_per_call(report.command_types)
    if executed:
        calls, per_call_ms = executed
        reason += f"; the server spent {per_call_ms:.2f} ms per call over {calls} calls (INFO commandstats)"
        round_s = _slow_round_s(report, probe)
        if round_s:
            reason += f", so one round of those requests takes about {round_s:.1f} s — a longer --duration measures it"
        else:
            reason += ", so the replies were held back rather than slow (a blocking command waiting for data?)"
    return reason


def _slow_round_s(report: LoadReport, probe: WindowProbe) -> float | None:
    """Seconds one round of the requests in flight took the server, when that is longer than the
    window and so why no reply completed in it (None otherwise, or when nothing was executed)."""
    executed = probe.server_time_per_call(report.command_types)
    if not executed or report.ops:
        return None
    round_s = report.connections_opened * report.pipeline * executed[1] / 1000
    return round_s if round_s > (report.measured_s or 0) else None


def _why_not_a_result(refused: NotAResult, probe: WindowProbe) -> str:
    """A failed run's reason when redline-load refused its own numbers: its words, or why no
    reply completed, and the server's error replies if it sent any."""
    report = refused.result.report
    reason = str(refused)
    if not report.connections_lost and not report.ops and report.measured_s:
        reason = _nothing_completed(report, probe)
    if report.errors:
        reason += f"; {_error_replies(report)}"
    return reason
