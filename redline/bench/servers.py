"""The server runner's servers on this machine (its ServerFactory, redline.bench.server_runner): each
side's servers brought into the test's planned state and restarted into it (redline.bench.state),
watched while load runs (redline.server.watch) and probed around the measured window
(redline.server.probes)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from redline.bench import state
from redline.bench.state import Prepared
from redline.server.probes import WindowProbe
from redline.server.process import Server
from redline.server.watch import ServerWatch
from redline.system.steadiness import Steadiness, measure_steadiness

if TYPE_CHECKING:
    from redline.engine.run_plan import Observer, RunSettings, Side
    from redline.suites import TestSpec
    from redline.topology import TopologySpec


class RealServers:
    """Servers for one test on one topology. `under`: what every server runs under (callgrind for
    the counted runner), as redline.topology.deploy takes it."""

    def __init__(self, test: TestSpec, topology: TopologySpec, sides: list[Side], settings: RunSettings, *,
                 observer: Observer, cpus: list[int], workdir: Path, under=None):
        self.test, self.topology, self.sides, self.settings = test, topology, sides, settings
        self.observer, self.cpus, self.workdir, self.under = observer, cpus, workdir, under
        self.states: state.ServerStates | None = None

    def plan(self) -> str:
        plan = state.plan_state(self.test, self.topology, self.sides, self.settings)
        self.states = state.ServerStates(self.test, self.topology, self.settings, plan, observer=self.observer,
                                         cpus=self.cpus, workdir=self.workdir, under=self.under)
        return plan.describe()

    def start(self, side: Side) -> Prepared:
        return self.states.start(side)

    def before_slot(self, slot: list[tuple[Side, Prepared]], every: Iterable[Prepared]) -> list:
        return self.states.before_slot(slot, every)

    def watch(self, server: Server) -> ServerWatch:
        return ServerWatch(server)

    def probe(self, server: Server) -> WindowProbe:
        return WindowProbe(pids=server.pids(), client=server.info_client())

    def at_run_start(self, server: Server) -> dict | None:
        return state.at_run_start(server)

    def steadiness(self, cores: list[int]) -> Steadiness | None:
        return measure_steadiness(cores)
