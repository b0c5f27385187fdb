"""The engine's test runner for `--measure instructions`: the real runner (redline.bench.server_runner)
with every server under callgrind and each run's load replaced by a callgrind window
(redline.instructions.window): a fixed request count, decided once per test and shared by every
run and side, its cost counted by callgrind. A profile run's window also gives the run's
deterministic profile (redline.instructions.profile) instead of a perf recording."""

from __future__ import annotations

from redline.bench.server_runner import ServerAlive, ServerRunner, _LoadProgress
from redline.core.errors import RunError
from redline.core.run import Run
from redline.engine.run_plan import Side
from redline.instructions.callgrind import COUNTED_CONFIG, control_of, under_callgrind
from redline.instructions.profile import callgrind_profile
from redline.instructions.visibility import pipeline_of, visibility_warnings
from redline.instructions.window import (WINDOW_INSTRUCTIONS, RequestPlan, TooCostlyToCount, WindowResult,
                                         measure_window)
from redline.load.groups import is_grouped
from redline.load.redline_load import LoadRequest, LoadResult
from redline.server.probes import WindowProbe
from redline.topology import CpuPlan

KEPT_FROM_THE_LOAD = ("keyspace_hits", "keyspace_misses", "used_memory_bytes", "ops", "measured_s", "errors",
                      "server_reads_per_op", "server_writes_per_op")


class _ProbeEdges:
    """The run's window probe (INFO at both ends) read outside the counted window."""

    def __init__(self, probe: WindowProbe):
        self.probe = probe

    def before(self) -> None:
        self.probe.mark_start(wait=True)

    def after(self) -> None:
        self.probe.mark_end()


class InstructionsRunner(ServerRunner):
    """ServerRunner under callgrind (see the module docstring)."""

    servers_under = staticmethod(under_callgrind)
    probes_steadiness = False       # counts do not move with the machine's speed
    fits_window = False             # a counted window is a request count, not a time

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.request_plan: RequestPlan | None = None      # decided by the test's first window
        self.window: WindowResult | None = None
        self.warnings: list[str] = []
        self.first_run_id: str | None = None       # the fixed hash seed makes every server's run_id this one
        self.seed_flag: str | None = None
        self.too_costly: str | None = None          # why the test's first window was not counted

    def skip_reason(self) -> str | None:
        reason = super().skip_reason()
        if reason:
            return reason
        remote = [side.target.label for side in self.sides if not side.target.managed]
        if remote:
            return (f"--measure instructions runs the server under valgrind; {remote[0]} is a server redline "
                    "does not run")
        if self.topology.cluster or self.topology.replicas:
            return (f"--measure instructions counts one server process; {self.topology.name} runs "
                    f"{len(self.topology.roles())} (measure it by time)")
        if is_grouped(self.test):
            clients = " + ".join(client.tool for client in self.test.clients)
            return (f"--measure instructions counts a fixed number of requests from one memtier-mode client; this "
                    f"test runs {clients} at once, whose work follows time and waiting, not a request count "
                    "(measure it by time)")
        return None

    def plan(self) -> str:
        description = super().plan()
        self.warnings = visibility_warnings(self.test, self.topology,
                                            system_calls_compared=self.settings.system_calls_judged)
        for warning in self.warnings:
            self.observer.note(f"⚠ {warning}")
        return description + "; servers run under valgrind --tool=callgrind (20-50x slower)"

    def measure(self, side: Side, run: Run) -> None:
        """One counted run; a test too costly to count ends at its first run, every side released
        (each run would pay the probe again to learn the same)."""
        super().measure(side, run)
        if self.too_costly:
            for ready in list(self.ready_sides):
                self.release(ready)
            self.observer.note(f"not counted, no more runs: {self.too_costly}")

    def _drive(self, side: Side, run: Run, request: LoadRequest, probe: WindowProbe,
               watch: ServerAlive) -> LoadResult:
        self.observer.phase("callgrind: probe, warm-up, measured requests")
        try:
            window = measure_window(control_of(self.ready_sides[side].server), request, plan=self.request_plan,
                                    window_instructions=self.settings.window_instructions or WINDOW_INSTRUCTIONS,
                                    fixed_per_connection=self.settings.window_requests,
                                    earlier_per_connection=self.settings.earlier_window_requests,
                                    listener=_LoadProgress(self.observer, None, request), server_alive=watch,
                                    edges=_ProbeEdges(probe),
                                    earlier_pace=self.window.pace if self.window else None,
                                    pipeline=pipeline_of(self.test))
        except TooCostlyToCount as exc:
            self.too_costly = str(exc)
            raise
        self.request_plan = self.request_plan or window.plan
        self.window = window
        run_id = (probe.info_start or {}).get("run_id")
        self.seed_flag = self._seed_check(run_id)
        run.facts["loadgen_argv"] = window.load.argv          # the measured requests' own command line
        run.facts["warmup_s"] = None                           # the warm-up is a request count here
        run.facts["instructions"] = {**window.plan.as_dict(), "server_run_id": run_id,
                                     "this_run_estimate_per_op": round(window.marginal_per_op, 1),
                                     "warmup_requests_per_connection": window.warmup_per_connection,
                                     "valgrind": "callgrind --cache-sim=yes", "dump_events": list(window.dump.events),
                                     "config_added": {name: value for name, value in COUNTED_CONFIG.items()
                                                      if name not in run.facts.get("server_config", {})}}
        if run.purpose == "profile":
            self.observer.phase("profile: callgrind call graph, flame graph")
            run.profile = callgrind_profile(window.dump, self.artifacts(run), ops=window.load.report.ops or 0,
                                            title=f"{self.test.name} — {side.target.label} (instructions)")
        return window.load

    def _results(self, result: LoadResult, probe: WindowProbe, plan: CpuPlan):
        """Callgrind's counts, and of the load's own figures only those time does not colour."""
        if self.window is None or self.window.load is not result:
            raise RunError("internal: no callgrind window for this run")
        timed, series, flags = super()._results(result, probe, plan)
        metrics = {name: timed.get(name) for name in KEPT_FROM_THE_LOAD}
        metrics.update(self.window.metrics)
        return metrics, {}, flags + self.warnings + ([self.seed_flag] if self.seed_flag else [])

    def _seed_check(self, run_id: str | None) -> str | None:
        """A flag when this server's run_id differs from the first one's: its hash seed was not the
        fixed one (redline.server.seed), so its dictionaries may be laid out differently."""
        if not run_id:
            return None
        self.first_run_id = self.first_run_id or run_id
        if run_id == self.first_run_id:
            return None
        return (f"hash seed not fixed: this server's run_id {run_id[:12]} differs from the first server's "
                f"{self.first_run_id[:12]}; its dictionaries may be laid out differently (whole-process counts "
                "then differ by a few %, docs/measure-instructions.md)")
