"""The one execution engine: suite → server → dataset → load → probes → store.

Every entry point (`redline run`, `redline compare`, a fleet agent) goes through `Engine.execute`.
A plan has one side (run) or two (compare); runs of the sides are interleaved A B B A ….
"""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING, Callable

from redline import machine
from redline.errors import RunError
from redline.load import LoadRequest, LoadResult, NotAResult, ServerGone, run_load
from redline.pinning import available_cpus
from redline.probes import WindowProbe
from redline.server import Server
from redline.store import RunOutcome, Store
from redline.run_plan import Observer, RunSettings, Side
from redline.run_record import RunRecord
from redline.watch import ServerHung, ServerWatch
from redline.workdirs import make_workdir
from redline import preparation, state
from redline.state import Prepared

from redline.topology import CpuPlan, TopologySpec

if TYPE_CHECKING:
    from redline.suites import TestSpec

CLIENT_SATURATION = 0.90       # client_cpu_util above this: the load generator may have been the bottleneck
MISS_PATH_RATIO = 0.50         # a read workload with more misses than this measures the miss path



MoreRuns = Callable[["TestSpec", list[RunRecord], int], int]


def interleaved(sides: list[Side], runs: int, start: int = 0) -> list[tuple[Side, int]]:
    """Runs start..runs-1 as A B B A A B … for two sides (each pair reverses the order of the
    previous one); one side: in order."""
    order: list[tuple[Side, int]] = []
    for index in range(start, runs):
        pair = sides if index % 2 == 0 else list(reversed(sides))
        order += [(side, index) for side in pair]
    return order


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


def _measures_miss_path(test: TestSpec, hits: int | None, misses: int | None) -> bool:
    """Most key lookups of the measured window missed (INFO counts only reads), unless the suite
    says it means to measure misses (`redline: expect-misses: true`)."""
    if hits is None or misses is None or hits + misses == 0 or test.extensions.get("expect-misses"):
        return False
    return misses / (hits + misses) > MISS_PATH_RATIO


ERROR_TYPES_SHOWN = 3


def _error_replies(load_output: dict) -> str:
    """'N error replies: n1 × <first message of that type>; …' — the server's own words, most
    frequent types first, so a reader sees the cause (a syntax the server lacks, BUSYKEY …)."""
    counts: dict[str, int] = load_output.get("errors") or {}
    examples: dict[str, str] = load_output.get("error_examples") or {}
    ranked = sorted(counts.items(), key=lambda item: -item[1])
    parts = [f"{count} × {examples.get(kind, kind)}" for kind, count in ranked[:ERROR_TYPES_SHOWN]]
    if len(ranked) > ERROR_TYPES_SHOWN:
        parts.append(f"{len(ranked) - ERROR_TYPES_SHOWN} more types")
    return f"{sum(counts.values())} error replies: {'; '.join(parts)}"


def _nothing_completed(result: LoadResult, probe: WindowProbe) -> str:
    """Why a window measured no operation: usually every connection's first requests queue behind
    each other's slow calls for longer than the window (upstream runs such suites for minutes)."""
    sent = result.extra.get("send_pattern") or {}
    connections = (result.extra.get("connections") or {}).get("opened") or 0
    in_flight = connections * (sent.get("pipeline") or 1)
    reason = (f"no reply completed in the measured {result.measured_s:g} s with {in_flight} requests "
              f"in flight ({connections} connections × pipeline {sent.get('pipeline') or 1})")
    commands = [c.get("type", "") for c in sent.get("commands") or []]
    executed = probe.server_time_per_call(commands)
    if executed:
        calls, per_call_ms = executed
        round_s = in_flight * per_call_ms / 1000
        reason += f"; the server spent {per_call_ms:.2f} ms per call over {calls} calls (INFO commandstats)"
        if round_s > (result.measured_s or 0):
            reason += f", so one round of those requests takes about {round_s:.1f} s — a longer --duration measures it"
        else:
            reason += ", so the replies were held back rather than slow (a blocking command waiting for data?)"
    return reason


def _why_not_a_result(refused: NotAResult, probe: WindowProbe) -> str:
    """A failed run's reason when redline-load refused its own numbers: its words, or why no
    reply completed, and the server's error replies if it sent any."""
    result = refused.result
    reason = str(refused)
    lost = (result.extra.get("connections") or {}).get("lost")
    if not lost and not result.ops and result.measured_s:
        reason = _nothing_completed(result, probe)
    if (result.extra.get("errors") or {}):
        reason += f"; {_error_replies(result.extra)}"
    return reason


class Engine:
    def __init__(self, *, store: Store, observer: Observer, cpus: list[int] | None = None):
        self.store = store
        self.observer = observer
        self.cpus = cpus if cpus is not None else available_cpus()
        self.workdir = make_workdir()

    def execute(self, *, tests: list[TestSpec], sides: list[Side], settings: RunSettings,
                session_id: int, more_runs: MoreRuns | None = None) -> list[RunRecord]:
        """Every test, every side, interleaved. `more_runs(test, records, runs_so_far)` may ask
        for extra runs per side after the planned ones (adaptive A/B)."""
        records: list[RunRecord] = []
        try:
            managed = all(side.target.managed for side in sides)
            for number, test in enumerate(tests, 1):
                self.observer.test_started(test, number, len(tests))
                for dropped in test.dropped:          # redline-owned settings (redline.suites.owned)
                    self.observer.note(f"{dropped.location}: {dropped.message}")
                for topology in settings.topologies:
                    reason = preparation.unsupported_reason(test, topology, managed=managed)
                    if reason:
                        records += [self._record_skip(test, side, topology, session_id, reason) for side in sides]
                        continue
                    records += self._execute_test(test, topology, sides, settings, session_id, more_runs)
        finally:
            shutil.rmtree(self.workdir, ignore_errors=True)
        return records

    # -- one test -----------------------------------------------------------------------------
    def _execute_test(self, test: TestSpec, topology: TopologySpec, sides: list[Side], settings: RunSettings,
                      session_id: int, more_runs: MoreRuns | None) -> list[RunRecord]:
        ready: dict[Side, Prepared] = {}
        records: list[RunRecord] = []
        try:
            plan = state.plan_state(test, topology, sides, settings)
        except RunError as exc:
            return [self._record_failure(test, side, topology, session_id, exc) for side in sides]
        states = state.ServerStates(test, topology, settings, plan, observer=self.observer, cpus=self.cpus,
                                    workdir=self.workdir)

        def prepare(side: Side) -> None:
            """The side's server(s), in the test's state; or a skipped or failed record saying why not."""
            try:
                ready[side] = states.start(side)
            except preparation.SkipTest as exc:
                records.append(self._record_skip(test, side, topology, session_id, str(exc)))
            except RunError as exc:
                records.append(self._record_failure(test, side, topology, session_id, exc))

        try:
            for side in sides:
                prepare(side)
            skipped = [record for record in records if record.status == "skipped"]
            if skipped and ready:
                # an A/B with one side only is no comparison: the other sides are not measured either
                reason = f"not measured: {skipped[0].target} cannot run this test ({skipped[0].error})"
                for side in list(ready):
                    ready.pop(side).server.stop()
                    records.append(self._record_skip(test, side, topology, session_id, reason))
            if ready:
                self.observer.note(plan.describe())
            planned, batch = settings.runs, interleaved(sides, settings.runs)
            while batch and ready:
                for side, index in batch:
                    if side in ready:
                        records.append(self._run(test, topology, side, index, ready, states, settings, session_id))
                        if side in ready and ready[side].hung:
                            ready.pop(side).server.stop()
                            self.observer.note(f"{side.target.label}: the server hung and was killed; "
                                               "a fresh one is started for the next run")
                            prepare(side)
                extra = more_runs(test, records, planned) if more_runs and len(ready) == len(sides) else 0
                if extra:
                    self.observer.note(f"undecided: {extra} more runs per side")
                planned, batch = planned + extra, interleaved(sides, planned + extra, start=planned)
            if settings.profile:
                for side in sides:
                    if side in ready:
                        records.append(self._run(test, topology, side, planned, ready, states, settings, session_id,
                                                 purpose="profile"))
        finally:
            for prepared in ready.values():
                prepared.server.stop()
        return records

    def _run(self, test: TestSpec, topology: TopologySpec, side: Side, index: int, ready: dict[Side, Prepared],
             states: state.ServerStates, settings: RunSettings, session_id: int,
             purpose: str = "measure") -> RunRecord:
        """One run of one side, on a server in the test's planned state; a side whose server
        exited or could not be brought back into that state runs no more (one that hung is
        replaced by the caller)."""
        try:
            ready[side] = states.before_run(side, ready[side])
        except (RunError, preparation.SkipTest) as exc:
            ready.pop(side)
            self.observer.note(f"{side.target.label}: the server could not be restarted into the test's state; "
                               f"the remaining runs of {test.name} are skipped")
            failure = exc if isinstance(exc, RunError) else RunError(str(exc))
            return self._record_failure(test, side, topology, session_id, failure, run_index=index)
        record = self._measure(test, side, index, ready[side], settings, session_id, purpose=purpose)
        if record.status != "ok" and not ready[side].hung and not ready[side].server.alive():
            ready.pop(side).server.stop()
            self.observer.note(f"{side.target.label}: the server exited; "
                               f"the remaining runs of {test.name} are skipped")
        return record

    def _record_failure(self, test: TestSpec, side: Side, topology: TopologySpec, session_id: int,
                        exc: RunError, run_index: int = 0) -> RunRecord:
        """A side that could not be prepared: one failed run says why."""
        run_id = self.store.begin_run(session_id=session_id, test=test.name, suite_file=str(test.path),
                                      target=side.target.label, side=side.name, run_index=run_index,
                                      topology=topology.name)
        outcome = RunOutcome(status="failed", metrics={}, series={}, facts={"machine": machine.facts()},
                             error=str(exc), server_log_tail=getattr(exc, "server_log_tail", None))
        self.store.finish_run(run_id, outcome)
        record = RunRecord(run_id, test.name, side.target.label, side.name, run_index, "failed", error=str(exc),
                           topology=topology.name)
        self.observer.run_finished(record)
        return record

    def _record_skip(self, test: TestSpec, side: Side, topology: TopologySpec, session_id: int,
                     reason: str) -> RunRecord:
        """A test this machine or server cannot run: stored, so that history says why it is missing."""
        run_id = self.store.begin_run(session_id=session_id, test=test.name, suite_file=str(test.path),
                                      target=side.target.label, side=side.name, run_index=0,
                                      topology=topology.name)
        self.store.finish_run(run_id, RunOutcome(status="skipped", metrics={}, series={},
                                                 facts={"machine": machine.facts()}, error=reason))
        self.observer.test_skipped(test, reason)
        return RunRecord(run_id, test.name, side.target.label, side.name, 0, "skipped", error=reason,
                         topology=topology.name)

    # -- one run ------------------------------------------------------------------------------
    def _measure(self, test: TestSpec, side: Side, index: int, prepared: Prepared, settings: RunSettings,
                 session_id: int, purpose: str = "measure") -> RunRecord:
        server, topology = prepared.server, prepared.facts["topology"]["topology"]
        run_id = self.store.begin_run(session_id=session_id, test=test.name, suite_file=str(test.path),
                                      target=side.target.label, side=side.name, run_index=index, purpose=purpose,
                                      topology=topology)
        request = LoadRequest(arguments=server.load_arguments(test.client.arguments), host=server.host,
                              port=server.port, json_path=self.workdir / f"run-{run_id}.json",
                              duration_s=settings.duration_s, warmup_s=settings.warmup_s,
                              cpus=prepared.plan.client_cpus)
        probe = WindowProbe(pids=server.pids(), client=server.info_client())
        watch = ServerWatch(server)
        facts = {**prepared.facts, "machine": machine.facts(), "loadgen_argv": request.argv(),
                 "warmup_s": settings.warmup_s,
                 "state": {**prepared.facts["state"], "at_run_start": state.at_run_start(server)}}
        recorder = profile = None
        try:
            try:
                recorder = self._recorder(test, side, server, run_id) if purpose == "profile" else None
                result = run_load(request, listener=_LoadProgress(self.observer, probe, request, recorder),
                                  server_alive=watch, timeout_s=self._run_timeout(test, settings))
                if recorder is not None:
                    self.observer.phase("profile: perf script, flame graph")
                    profile = recorder.stop().as_json()
                    recorder = None
            except ServerHung as hung:
                prepared.hung = True
                raise RunError(f"the server stopped answering during the run: {hung.reason}; "
                               "it was killed") from None
            except ServerGone:
                reason = server.crash_reason()
                raise RunError(f"the server exited during the run ({server.exit_description()})"
                               + (f": {reason}" if reason else ""))
            except NotAResult as exc:
                raise RunError(_why_not_a_result(exc, probe)) from exc
            metrics, series, flags = self._metrics(test, result, probe, prepared.plan)
            facts["state"]["memory_at_window_start"] = state.memory_figures(probe.info_start)
            facts["flags"] = flags
            facts["loadgen"] = result.extra
            outcome = RunOutcome(status="ok", metrics=metrics, series=series, facts=facts, profile=profile)
            record = RunRecord(run_id, test.name, side.target.label, side.name, index, "ok", metrics, flags,
                               purpose=purpose, profile=profile, topology=topology, state=facts["state"])
        except RunError as exc:
            outcome = RunOutcome(status="failed", metrics={}, series={}, facts=facts, error=str(exc),
                                 server_log_tail=server.log_tail())
            record = RunRecord(run_id, test.name, side.target.label, side.name, index, "failed", error=str(exc),
                               purpose=purpose, topology=topology, state=facts["state"])
        except BaseException:
            self.store.mark_interrupted(run_id, "redline was interrupted during this run")
            raise
        finally:
            probe.close()
            if recorder is not None:         # the run failed: perf's output is not used
                recorder.abort()
        self.store.finish_run(run_id, outcome)
        self.observer.run_finished(record)
        return record

    @staticmethod
    def _run_timeout(test: TestSpec, settings: RunSettings) -> float:
        """Generous: the run's own length plus two minutes (a run that hangs must not hang redline)."""
        workload = getattr(test.client, "workload", None)
        own = settings.duration_s or (workload.test_time if workload and workload.test_time else 600)
        return settings.warmup_s + own + 120.0

    def _recorder(self, test: TestSpec, side: Side, server: Server, run_id: int):
        """perf for the profiled run; raises RunError when this server cannot be profiled."""
        if not server.managed:
            raise RunError("cannot profile a tcp:// target: redline does not run that server")
        from redline.profile import Recorder   # perf tooling is only needed with --profile
        return Recorder(pids=server.pids(), binary=side.target.binary, workdir=self.store.artifact_dir(run_id),
                        title=f"{test.name} — {side.target.label}")

    def _metrics(self, test: TestSpec, result: LoadResult, probe: WindowProbe, plan: CpuPlan):
        ops = result.ops or 0
        cpu = probe.cpu
        measured_s = result.measured_s or 0.0
        client_cpus = len(plan.client_cpus) or 1
        client_cpu_s = result.client_cpu_s
        hits, misses = probe.info_delta("keyspace_hits"), probe.info_delta("keyspace_misses")
        metrics = {
            "ops_per_sec": result.ops_per_sec,
            "p50_ms": result.percentile_ms("50.00"),
            "p90_ms": result.percentile_ms("90.00"),
            "p99_ms": result.percentile_ms("99.00"),
            "p999_ms": result.percentile_ms("99.90"),
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
            "ops": float(ops),
            "measured_s": measured_s,
            "errors": float(sum((result.extra.get("errors") or {}).values())),
        }
        flags = []
        if metrics["client_cpu_util"] is not None and metrics["client_cpu_util"] > CLIENT_SATURATION:
            flags.append("client saturated its core")
        if _measures_miss_path(test, hits, misses):
            flags.append(f"measures the miss path ({misses / (hits + misses):.0%} misses)")
        if metrics["errors"]:
            flags.append(_error_replies(result.extra))
        for warning in result.extra.get("warnings") or []:
            flags.append(warning)
        series = result.per_second()
        if probe.cpu_per_second:
            series["server_cpu_util"] = probe.cpu_per_second
        return metrics, series, flags
