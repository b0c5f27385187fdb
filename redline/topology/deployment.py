"""A deployed topology: its server processes, where the client connects, and what was done."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Callable

import redis
import redis.cluster

from redline.core.errors import RunError, UsageError
from redline.server.process import ManagedServer, Server, ServerSettings
from redline.system.workdirs import make_workdir
from redline.topology import cluster as cluster_ops
from redline.topology import replication
from redline.topology.cpus import CpuPlan
from redline.topology.info import SummedInfo
from redline.topology.spec import TopologySpec

Progress = Callable[[str], None]

# Defaults under the suite's own settings: start a replica's full sync at once instead of after
# the 5 s diskless-sync delay (the delay only postpones the sync; it does not change it).
TOPOLOGY_DEFAULTS = {"repl-diskless-sync-delay": "0"}
NODE_START_ATTEMPTS = 3
SYNC_TIMEOUT_S = 120.0
CLUSTER_TIMEOUT_S = 30.0


class Deployment(Server):
    """Every server process of one topology. Acts as a Server itself (host, port, client(), info()
    of the entry node), so code written for one server can take a deployment."""

    managed = True

    def __init__(self, *, spec: TopologySpec, servers: list[ManagedServer], roles: list[str],
                 cpu_plan: CpuPlan, workdir: Path):
        self.spec = spec
        self.servers = servers
        self.roles = roles
        self.cpu_plan = cpu_plan
        self.workdir = workdir
        self.entry = servers[0]
        self.cluster_mode = spec.cluster
        self.facts: dict = {
            "topology": spec.name,
            "primaries": spec.primaries,
            "replicas": spec.replicas,
            "cluster": spec.cluster,
            "io_threads": spec.io_threads,
            "topology_config": spec.config(),
            "topology_defaults": dict(TOPOLOGY_DEFAULTS),
            "servers": [{"role": role, "port": server.port, "cpus": list(cpus)}
                        for role, server, cpus in zip(roles, servers, cpu_plan.servers)],
            "cpu_plan": cpu_plan.as_dict(),
        }
        self._stopped = False

    # -- the entry node, for code that talks to one server ---------------------------------------
    @property
    def host(self) -> str:
        return self.entry.host

    @property
    def port(self) -> int:
        return self.entry.port

    def client(self, **kwargs) -> redis.Redis:
        return self.entry.client(**kwargs)

    def load_arguments(self, arguments: list[str]) -> list[str]:
        """A suite's redline-load arguments for this deployment: --cluster-mode added on a cluster."""
        if self.cluster_mode and "--cluster-mode" not in arguments:
            return [*arguments, "--cluster-mode"]
        return list(arguments)

    def command_client(self):
        """For init commands: a cluster-aware client on a cluster (keys go to their slot's node)."""
        if self.cluster_mode:
            return redis.cluster.RedisCluster(host=self.host, port=self.port)
        return self.client()

    def info_client(self) -> SummedInfo:
        """INFO summed over the primaries (one for standalone, all shards of a cluster): give it
        to a run probe instead of client() so hits, misses and memory count every shard."""
        return SummedInfo([server.client() for server in self.primaries])

    @property
    def primaries(self) -> list[ManagedServer]:
        return self.servers[:self.spec.primaries]

    @property
    def replicas(self) -> list[ManagedServer]:
        return self.servers[self.spec.primaries:]

    # -- watching -------------------------------------------------------------------------------
    def pids(self) -> list[int]:
        return [pid for server in self.servers for pid in server.pids()]

    def alive(self) -> bool:
        return all(server.alive() for server in self.servers)

    def _dead(self) -> list[tuple[str, ManagedServer]]:
        return [(role, server) for role, server in zip(self.roles, self.servers) if not server.alive()]

    def exit_description(self) -> str:
        dead = self._dead()
        if not dead:
            return "running"
        return ", ".join(f"{role} (port {server.port}) {server.exit_description()}" for role, server in dead)

    def crash_reason(self) -> str | None:
        """Why the first server that died went down: its crash line, or how it exited."""
        for role, server in self._dead():
            reason = server.crash_reason()
            return f"{role} (port {server.port}): {reason or server.exit_description()}"
        for role, server in zip(self.roles, self.servers):
            reason = server.crash_reason()
            if reason:
                return f"{role} (port {server.port}): {reason}"
        return None

    def log_tail(self, lines: int = 20) -> str:
        """The log of the servers that died (all of them if none did), each under its role."""
        chosen = self._dead() or list(zip(self.roles, self.servers))
        if len(self.servers) == 1:
            return self.entry.log_tail(lines)
        return "\n".join(f"--- {role} (port {server.port}) ---\n{server.log_tail(lines)}" for role, server in chosen)

    def stop(self) -> None:
        """Replicas first, each until it has exited: a primary told to shut down while a replica
        is still connected but no longer acknowledging waits shutdown-timeout (10 s) for it.
        Then the primaries, all signalled at once."""
        for server in self.replicas:
            server.stop()
        for server in self.primaries:
            if server.alive():
                server.process.terminate()
        for server in self.primaries:
            server.stop()
        if not self._stopped:
            shutil.rmtree(self.workdir, ignore_errors=True)
        self._stopped = True


SEEDED_START_TIMEOUT_S = 1800.0      # loading a large snapshot takes a while


def _note(progress: Progress | None, text: str) -> None:
    if progress is not None:
        progress(text)


def _started(settings: ServerSettings, role: str) -> ManagedServer:
    server = ManagedServer(settings)
    try:
        return server.start()
    except RunError as exc:
        # the console has the lines before the last one too: which directive, which file line
        console = [line for line in server.log_tail(8).splitlines() if line.strip()]
        context = " | ".join(console[-4:])
        raise RunError(f"{role} did not start: {exc}" + (f" (server output: {context})" if context else "")) from exc


def _start_node(settings: ServerSettings, *, role: str, cluster: bool) -> ManagedServer:
    """Start one server; a cluster node gets a port whose bus port is free, retried a few times
    (another process may take a port between the check and the start)."""
    if not cluster:
        return _started(settings, role)
    last: RunError | None = None
    for _ in range(NODE_START_ATTEMPTS):
        settings.preferred_port = cluster_ops.node_port()
        try:
            return _started(settings, role)
        except RunError as exc:
            last = exc
    raise RunError(f"cluster node {last} (tried {NODE_START_ATTEMPTS} ports)")


def _node_config(spec: TopologySpec, config: dict[str, str], workdir: Path) -> dict[str, str]:
    merged = {**TOPOLOGY_DEFAULTS, **{str(k): str(v) for k, v in config.items()}, **spec.config()}
    if spec.cluster:
        merged.update({"cluster-enabled": "yes", "cluster-config-file": str(workdir / "nodes.conf")})
    return merged


def deploy(spec: TopologySpec, *, binary: Path, config: dict[str, str], cpu_plan: CpuPlan,
           progress: Progress | None = None, attach_replicas: bool = True,
           seed_rdb: Path | None = None,
           under: Callable[[ServerSettings], ServerSettings] | None = None) -> Deployment:
    """Start every server of `spec` pinned as `cpu_plan` says, form the cluster or attach the
    replicas, and return the running deployment. Nothing is left running when this raises. When
    the plan has `starting` cores, the servers start on those and move to their own once the
    deployment is up (loaded, formed, replicas in sync).

    `attach_replicas=False` starts the replicas empty and unattached; call
    `attach_replicas_now(deployment)` after preloading the primary to time a full sync of the data.
    `seed_rdb` (standalone and replicated topologies): the primary starts from this RDB file.
    `under`: how each server's settings change to run it under a tool (--measure instructions:
    redline.instructions.callgrind.under_callgrind)."""
    if seed_rdb is not None and spec.cluster:
        raise UsageError(f"{spec.name}: a cluster cannot start from one RDB snapshot")
    if spec.unsupported:
        raise RunError(f"topology {spec.name} is not supported: {spec.unsupported}")
    roles = spec.roles()
    if list(cpu_plan.roles) != roles:
        raise UsageError(f"cpu plan is for servers {list(cpu_plan.roles)}, topology {spec.name} has {roles}")
    usable = os.sched_getaffinity(0)
    missing = sorted((set(cpu_plan.server_cpus) | set(cpu_plan.client_cpus)) - usable)
    if missing:
        raise UsageError(f"cpu plan uses cpu {','.join(map(str, missing))}, which this machine "
                         f"does not have or redline may not use (usable: {','.join(map(str, sorted(usable)))})")
    binary = Path(binary)
    if not binary.exists():
        raise UsageError(f"server binary does not exist: {binary}")
    _note(progress, f"{spec.name}: cpu plan: {cpu_plan.describe()}")
    root = make_workdir(f"redline-{spec.name}-")
    servers: list[ManagedServer] = []
    deployment: Deployment | None = None
    try:
        for role, cpus in zip(roles, cpu_plan.servers):
            workdir = root / role
            workdir.mkdir()
            starting = cpu_plan.starting or cpus
            _note(progress, f"{spec.name}: starting {role} on cpu {','.join(map(str, starting))}"
                            + (f" (cpu {','.join(map(str, cpus))} once up)" if cpu_plan.starting else ""))
            settings = ServerSettings(binary=binary, config=_node_config(spec, config, workdir),
                                      cpus=tuple(starting), workdir=workdir)
            if seed_rdb is not None and role == roles[0]:
                settings.seed_rdb, settings.start_timeout_s = seed_rdb, SEEDED_START_TIMEOUT_S
            if under is not None:
                settings = under(settings)
            servers.append(_start_node(settings, role=role, cluster=spec.cluster))
        deployment = Deployment(spec=spec, servers=servers, roles=roles, cpu_plan=cpu_plan, workdir=root)
        if spec.cluster:
            _note(progress, f"{spec.name}: forming the cluster (CLUSTER ADDSLOTSRANGE, MEET)")
            formed = cluster_ops.form_cluster(servers, timeout_s=CLUSTER_TIMEOUT_S)
            deployment.facts["cluster_formation"] = formed.as_dict()
            _note(progress, f"{spec.name}: cluster_state:ok on all {len(servers)} nodes "
                            f"after {formed.formed_s:.2f}s")
        if spec.replicas and attach_replicas:
            attach_replicas_now(deployment, progress=progress)
        if cpu_plan.starting:
            for server, cpus in zip(servers, cpu_plan.servers):
                server.move_to(tuple(cpus))
        return deployment
    except BaseException:
        if deployment is not None:
            deployment.stop()
        else:
            for server in servers:
                server.stop()
            shutil.rmtree(root, ignore_errors=True)
        raise


def attach_replicas_now(deployment: Deployment, *, timeout_s: float = SYNC_TIMEOUT_S,
                        progress: Progress | None = None) -> float:
    """REPLICAOF on every replica and wait for the full sync; returns (and records as
    facts['replication']['full_sync_s']) its duration in seconds."""
    if not deployment.replicas:
        raise UsageError(f"topology {deployment.spec.name} has no replicas to attach")
    started = time.monotonic()
    _note(progress, f"{deployment.spec.name}: REPLICAOF on {len(deployment.replicas)} replica(s), full sync")
    replication.attach(deployment.entry, deployment.replicas)
    replication.wait_in_sync(deployment.entry, deployment.replicas, timeout_s=timeout_s)
    seconds = time.monotonic() - started
    deployment.facts.setdefault("replication", {})["full_sync_s"] = round(seconds, 3)
    _note(progress, f"{deployment.spec.name}: replicas in sync after {seconds:.2f}s")
    return seconds


def wait_replicas_in_sync(deployment: Deployment, timeout_s: float = SYNC_TIMEOUT_S) -> float:
    """After the engine preloaded the primary: seconds until every replica has caught up
    (recorded as facts['replication']['catch_up_s']). Zero-replica topologies return 0."""
    if not deployment.replicas:
        return 0.0
    seconds = replication.wait_in_sync(deployment.entry, deployment.replicas, timeout_s=timeout_s)
    deployment.facts.setdefault("replication", {})["catch_up_s"] = round(seconds, 3)
    return seconds
