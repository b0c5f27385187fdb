"""How a run's server state is reached: one rule for every side and every run of a test.

A server filled by a preparation and one that loaded the same data from an RDB file hold equal
data in different memory layouts (10M GEOADDs in generation order scatter a skiplist's nodes
over the heap; an RDB load allocates them one after another) and can differ several times on
range scans (DESIGN.md §3, Measurement discipline, "Same state"). So, decided once per test for all its sides:

* restored — the preparation is snapshotted, and every run of every side measures a server that
  started from that snapshot, the side that prepared it included: it prepares, saves the
  snapshot, and restarts from it before measuring;
* prepared — the preparation cannot be snapshotted (--no-snapshots, a tcp:// target, a
  cluster, an append-only file, keys with a time to live, a failed SAVE): every side prepares
  it the same way;
* empty — the test prepares nothing.

When the measured commands write (the server's COMMAND flags), the server is restarted into that
state before every run but the first, so run 5 starts where run 1 did; the restart's cost is
recorded with the run. So is a duet's, read-only or not, when its state comes back without a
preparation (restored or empty): two servers of one binary still differ by where their pages lie,
and a duet is precise enough to read that as a change (docs/statistics.md, "Duets"). Fresh servers
for every pair make it an instance's noise, which the interval sees; fresh servers every few pairs
would not (pairs on the same servers are not independent, and the interval would take them as if
they were: measured, the same section).

Pages: a server started right after another stopped gets the pages that one freed. Restarting only
the side about to run would hand each side its own pages back, pair after pair, and the sides
would keep whatever offset their first pages gave them (measured under load, a duet A/A read
−2.3% with 15 pairs, and +3.0% with the sides' places in the plan swapped: docs/statistics.md,
"Duets"). So a restart first stops every side's server that has served a run (each restarts
before its own next run anyway): the sides draw their pages from one pool.

Restores at once: restarted one after the other, a duet's side restored second read cheaper, by
load order (docs/statistics.md, "Duets"). So a duet's restarts run at the same time, each in a
thread that outlives its server (redline.system.children.at_once), each server started on every
core of the test and moved to the plan's server cores once it is up (CpuPlan.starting): on two
cores the two restores load side by side instead of one after the other.

Every run records how its state was reached, the key count and memory when it started, and the
INFO memory figures at the start of its measured window; `compare` refuses a verdict on sides that
reached their state differently.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Iterator

import redis

from redline.bench import admission, preparation, snapshot_plan
from redline.core.errors import RunError, SkipTest
from redline.core.run import EMPTY, PREPARED, RESTORED
from redline.server import traits as server_traits
from redline.server.identity import server_identity
from redline.server.process import RemoteServer, Server
from redline.system.children import at_once
from redline.topology import CpuPlan, deploy, plan_cpus, wait_replicas_in_sync

if TYPE_CHECKING:
    from redline.engine.run_plan import Observer, RunSettings, Side
    from redline.suites import TestSpec
    from redline.topology import TopologySpec

REPLICA_SYNC_TIMEOUT_S = 300.0
READ_ONLY = "the measured commands only read (COMMAND flags)"
FRESH_FOR_DUET = ("a duet: fresh servers for every pair, so that where a server's pages lie is noise the "
                  "interval sees, not an offset between the sides")
MEMORY_FIGURES = ("used_memory", "used_memory_rss", "mem_fragmentation_ratio", "mem_allocator")


@dataclass
class StatePlan:
    """How every run of one test reaches its server state, the same for every side."""

    origin: str                  # RESTORED, PREPARED or EMPTY
    why: str                     # why this origin
    restart_per_run: bool        # restart into the state before every run but the first
    restart_why: str
    snapshots: dict = field(default_factory=dict)    # Side -> snapshot_plan.Snapshot, when RESTORED

    def fall_back(self, reason: str) -> None:
        """The snapshot could not be saved after all: from now on every side prepares the data (and a
        read-only duet keeps its servers: a preparation per pair is not what fresh pairs are for)."""
        self.origin, self.why, self.snapshots = PREPARED, f"not snapshotted: {reason}", {}
        if self.restart_why == FRESH_FOR_DUET:
            self.restart_per_run, self.restart_why = False, f"{READ_ONLY}; {reason}, so a duet keeps its servers"

    def facts(self) -> dict:
        return {"origin": self.origin, "why": self.why, "restart_per_run": self.restart_per_run,
                "restart_why": self.restart_why}

    def describe(self) -> str:
        restarts = "restarted before every run" if self.restart_per_run else "not restarted between runs"
        return f"server state: {self.origin} ({self.why}); {restarts}: {self.restart_why}"


def plan_state(test: TestSpec, topology: TopologySpec, sides: list[Side], settings: RunSettings) -> StatePlan:
    """The one decision per test; RunError when a server binary cannot be asked (it cannot start)."""
    origin, why, snapshots = _origin(test, topology, sides, settings)
    restart, restart_why = _restarts(test, sides, fresh_pairs=settings.duet_for(test, sides) and origin != PREPARED)
    return StatePlan(origin, why, restart, restart_why, snapshots)


def _origin(test: TestSpec, topology: TopologySpec, sides: list[Side], settings: RunSettings):
    if not snapshot_plan.prepares_anything(test):
        return EMPTY, "the test prepares no data", {}
    obstacle = _snapshot_obstacle(test, topology, sides, settings)
    if obstacle:
        return PREPARED, f"not snapshotted: {obstacle}", {}
    snapshots = {side: snapshot_plan.snapshot_for(test, binary=side.target.binary, scale=settings.scale)
                 for side in sides}
    return RESTORED, "every run starts from the prepared data's RDB snapshot", snapshots


def _snapshot_obstacle(test: TestSpec, topology: TopologySpec, sides: list[Side],
                       settings: RunSettings) -> str | None:
    if not settings.snapshots:
        return "--no-snapshots"
    obstacle = snapshot_plan.preparation_obstacle(test)
    if obstacle:
        return obstacle
    for side in sides:
        if not side.target.managed:
            return f"{side.target.label} is a tcp:// target (redline neither saves nor loads its data)"
        obstacle = snapshot_plan.snapshot_obstacle(topology, {**test.db.configuration_parameters,
                                                            **side.target.config})
        if obstacle:
            return obstacle
    return None


def _restarts(test: TestSpec, sides: list[Side], *, fresh_pairs: bool) -> tuple[bool, str]:
    """Whether every run but the first starts on a fresh server, and why. `fresh_pairs`: a duet
    whose state comes back without a preparation."""
    if not all(side.target.managed for side in sides):
        return False, "redline cannot restart a tcp:// target; each run continues on what the previous one left"
    writing = sorted({name for side in sides for name in server_traits.writing_commands(test, side.target.binary)})
    if writing:
        return True, f"the measured commands write ({', '.join(writing)})"
    if fresh_pairs:
        return True, FRESH_FOR_DUET
    return False, READ_ONLY


@dataclass
class Prepared:
    """One side of one test, ready to measure: its server(s), their CPU plan, the facts to record."""

    server: Server
    plan: CpuPlan
    facts: dict
    runs: int = 0                # runs this server has served
    hung: bool = False           # the server stopped answering during a run and was killed




class ServerStates:
    """Brings each side's server into the test's planned state — when the test starts, and again
    before a run when the plan restarts per run."""

    def __init__(self, test: TestSpec, topology: TopologySpec, settings: RunSettings, plan: StatePlan, *,
                 observer: Observer, cpus: list[int], workdir: Path, under=None):
        self.test, self.topology, self.settings, self.plan = test, topology, settings, plan
        self.observer, self.cpus, self.workdir = observer, cpus, workdir
        self.under = under       # servers run under a tool (redline.topology.deploy's `under`)

    def start(self, side: Side, *, starting: list[int] | None = None) -> Prepared:
        """SkipTest when this server cannot run the test; RunError when it fails to get there.
        `starting`: the cores its servers may use until they are up (CpuPlan.starting)."""
        self.observer.phase(f"server start ({self.topology.name})")
        if side.target.managed:
            unknown = admission.unknown_parameters(self.test, side.target.binary, side.target.config)
            if unknown:
                raise SkipTest(f"the server does not know configuration parameter "
                                           f"{', '.join(unknown)} (CONFIG GET)")
        cpu_plan = plan_cpus(self.topology, self.cpus)
        if starting:
            cpu_plan = cpu_plan.starting_on(starting)
        snapshot = self.plan.snapshots.get(side)
        server, dataset = self._reach_state(side, cpu_plan, snapshot)
        with _stopped_on_failure(server):
            if self.topology.replicas:
                self.observer.phase("replicas catching up")
                dataset["replica_sync_s"] = wait_replicas_in_sync(server, REPLICA_SYNC_TIMEOUT_S)
            info = server.info("server")
        return Prepared(server, cpu_plan, {
            "server_version": info.get("redis_version"),
            "server_binary": str(side.target.binary) if side.target.binary else None,
            "build": side.target.build_facts,
            "identity": server_identity(info, side.target.binary, side.target.build_facts),
            "server_config": {**self.test.db.configuration_parameters, **side.target.config},
            "server_port": server.port,
            "topology": getattr(server, "facts", {"topology": self.topology.name}),
            "pinning": cpu_plan.as_dict(),
            "dataset": dataset,
            "state": self._state_facts(snapshot),
        })

    def before_slot(self, slot: list[tuple[Side, Prepared]],
                    every: Iterable[Prepared]) -> list[Prepared | RunError | SkipTest]:
        """The servers for a slot's runs (one run, or a duet's pair), in the slot's order: each the
        same one, or — when the plan restarts per run and it has served a run — a new one in the
        planned state, its cost in the facts; or why it could not be brought there. Before any
        restart, every server that has served a run stops, whichever side it belongs to (each
        restarts before its own next run anyway; the module docstring, "Pages"). Several restarts
        run at once, each server loading on every core of the test ("Restores at once")."""
        restarting = [side for side, prepared in slot if self._restarts(prepared)]
        if restarting:
            for used in every:
                if used.runs:
                    used.server.stop()
        if len(restarting) > 1:
            restarts = [partial(self._restart, side, starting=self.cpus) for side in restarting]
            restarted = dict(zip(restarting, at_once(restarts, expected=(RunError, SkipTest),
                                                     discard=lambda prepared: prepared.server.stop())))
        else:
            restarted = {side: _outcome(partial(self._restart, side)) for side in restarting}
        ready = [restarted.get(side, prepared) for side, prepared in slot]
        for prepared in ready:
            if isinstance(prepared, Prepared):
                prepared.runs += 1
        return ready

    def _restart(self, side: Side, *, starting: list[int] | None = None) -> Prepared:
        started = time.monotonic()
        prepared = self.start(side, starting=starting)
        prepared.facts["state"]["reset_s"] = round(time.monotonic() - started, 3)
        return prepared

    def _restarts(self, prepared: Prepared) -> bool:
        """Whether this server is replaced before its next run: the plan restarts, and it served one."""
        return self.plan.restart_per_run and prepared.runs > 0

    def _state_facts(self, snapshot: snapshot_plan.Snapshot | None) -> dict:
        facts = {**self.plan.facts(), "prepared_how": snapshot_plan.preparation_summary(self.test, self.settings.scale),
                 "reset_s": None}
        if snapshot is not None and self.plan.origin == RESTORED:
            facts["snapshot_key"] = snapshot.plan.fingerprint()
            facts["snapshot"] = snapshot.cache.path_for(snapshot.plan, snapshot.rdb_version).name
        return facts

    # -- reaching the state ---------------------------------------------------------------------
    def _reach_state(self, side: Side, cpu_plan: CpuPlan,
                     snapshot: snapshot_plan.Snapshot | None) -> tuple[Server, dict]:
        if snapshot is None:
            return self._prepared(side, cpu_plan)
        if snapshot.cached is None:
            # one preparation for every side and every lane (redline.lab.scheduler): whoever needs the
            # entry meanwhile waits, then restores what this one saved
            with snapshot.cache.preparing(snapshot.plan, snapshot.rdb_version, waiting=lambda: self.observer.phase(
                    "waiting: the same dataset is being prepared elsewhere (another side or lane)")):
                if snapshot.cached is None:
                    return self._prepare_and_save(side, cpu_plan, snapshot)
        return self._restored(side, cpu_plan, snapshot)

    def _prepare_and_save(self, side: Side, cpu_plan: CpuPlan, snapshot: snapshot_plan.Snapshot) -> tuple[Server, dict]:
        """Prepare, save the snapshot, and restart from it. The preparing server is never measured,
        so it runs natively even when the measured ones run under a tool (callgrind: a preload runs
        many times slower under valgrind, instrumentation off or not)."""
        server, dataset = self._prepared(side, cpu_plan, native=True)
        dataset["prepared_without_tool"] = self.under is not None
        with _stopped_on_failure(server):
            obstacle = self._save(snapshot, server, dataset)
        if obstacle:
            self.plan.fall_back(obstacle)
            self.observer.note(f"dataset snapshot not saved: {obstacle}; every side prepares the data itself")
            if self.under is None:
                return server, dataset
            server.stop()                 # measured as prepared: then prepared under the tool, as every side
            return self._prepared(side, cpu_plan)
        server.stop()         # measure what every later run and side measures: the restored server
        server, restored = self._restored(side, cpu_plan, snapshot)
        return server, {**restored, **dataset}

    def _deployed(self, side: Side, cpu_plan: CpuPlan, seed_rdb: Path | None = None, *, native: bool = False) -> Server:
        target = side.target
        if not target.managed:
            server: Server = RemoteServer(*target.address).start()
        else:
            server = deploy(self.topology, binary=target.binary, cpu_plan=cpu_plan,
                            config={**self.test.db.configuration_parameters, **target.config},
                            progress=self.observer.detail, seed_rdb=seed_rdb,
                            under=None if native else self.under)
        with _stopped_on_failure(server):
            admission.check_server_can_run(self.test, server)
        return server

    def _prepared(self, side: Side, cpu_plan: CpuPlan, *, native: bool = False) -> tuple[Server, dict]:
        server = self._deployed(side, cpu_plan, native=native)
        with _stopped_on_failure(server):
            started = time.monotonic()
            dataset = preparation.prepare(self.test, server, scale=self.settings.scale, observer=self.observer,
                                          client_cpus=cpu_plan.client_cpus, workdir=self.workdir)
            dataset["prepared_s"] = round(time.monotonic() - started, 3)
        return server, dataset

    def _restored(self, side: Side, cpu_plan: CpuPlan, snapshot: snapshot_plan.Snapshot) -> tuple[Server, dict]:
        """A server started from the snapshot; the start, which loads it, is the restore's cost."""
        self.observer.phase("restoring the dataset snapshot")
        started, rdb = time.monotonic(), snapshot.cached
        server = self._deployed(side, cpu_plan, seed_rdb=rdb)
        with _stopped_on_failure(server):
            dataset = {"restored_from": str(rdb), **preparation.check_keyspace(self.test, server),
                       "snapshot_key": snapshot.plan.fingerprint()}
        dataset["restore_s"] = dataset["prepared_s"] = round(time.monotonic() - started, 3)
        return server, dataset

    def _save(self, snapshot: snapshot_plan.Snapshot, server: Server, dataset: dict) -> str | None:
        """Save the prepared keyspace in the cache; why not, when it cannot be."""
        from redline.datasets import DatasetError
        if dataset["keys_with_ttl"]:
            # an RDB stores deadlines, not durations: restored later, these keys would be gone
            return f"{dataset['keys_with_ttl']} keys have a time to live and would be expired when restored"
        if dataset.get("keys_expired_while_preparing"):
            # how many outlive the preparation depends on its pace: there is no one state to restore
            return (f"{dataset['keys_expired_while_preparing']} keys expired while preparing, "
                    "so what remains depends on the preparation's pace")
        self.observer.phase("saving a dataset snapshot")
        saving = time.monotonic()
        try:
            dataset["snapshot"] = str(snapshot.cache.store_from_server(snapshot.plan, host=server.host,
                                                                       port=server.port))
        except (DatasetError, OSError, redis.RedisError) as exc:
            return str(exc)
        dataset["snapshot_save_s"] = round(time.monotonic() - saving, 3)
        return None


def _outcome(restart: Callable[[], Prepared]) -> Prepared | RunError | SkipTest:
    try:
        return restart()
    except (RunError, SkipTest) as exc:
        return exc


@contextmanager
def _stopped_on_failure(server: Server) -> Iterator[None]:
    try:
        yield
    except BaseException as exc:
        if isinstance(exc, RunError):
            exc.server_log_tail = server.log_tail()
        server.stop()
        raise


# -- what a run records about its state ---------------------------------------------------------
def at_run_start(server: Server) -> dict | None:
    """Keys and memory just before the run's load starts (None when INFO cannot be read)."""
    try:
        client = server.info_client()
        keys, with_ttl = preparation.keyspace_counts(client)
        memory = client.info("memory")
    except redis.RedisError:
        return None
    return {"keys": keys, "keys_with_ttl": with_ttl, "used_memory": memory.get("used_memory")}


def memory_figures(info: dict | None) -> dict | None:
    """used_memory, fragmentation and the allocator's own figures from an INFO reply."""
    if not info:
        return None
    return {name: value for name, value in info.items()
            if name in MEMORY_FIGURES or name.startswith("allocator_")}
