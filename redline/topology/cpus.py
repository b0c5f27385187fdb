"""Which cores each server process and the load generator run on, for any topology.

Each server process wants one core (io-threads N: N + 1 cores, the budget the upstream
topologies request), the client at least one. With enough cores every process gets its own; with
fewer, the client keeps one core of its own (so server CPU and client CPU stay apart) and the
servers share the rest; every compromise is written down as a warning.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from redline.core.errors import UsageError
from redline.topology.spec import TopologySpec


def _list(cpus: tuple[int, ...]) -> str:
    return ",".join(str(c) for c in cpus)


@dataclass(frozen=True)
class CpuPlan:
    roles: tuple[str, ...]                      # one per server process, deployment order
    servers: tuple[tuple[int, ...], ...]        # the cores of each server process
    client_cpus: tuple[int, ...]
    wanted: tuple[int, ...] = ()                # cores each server process would have had
    warnings: tuple[str, ...] = ()
    # cores every server process may use until the deployment is up, then each moves to its own
    # (a duet's two restores at once, each on a core of its own: redline.bench.state); () = its own from the start
    starting: tuple[int, ...] = ()

    @property
    def shared(self) -> bool:
        """True when any core runs more than one process (server with server or with client)."""
        seen: set[int] = set()
        for cores in (*self.servers, self.client_cpus):
            if seen & set(cores):
                return True
            seen |= set(cores)
        return False

    @property
    def server_cpus(self) -> tuple[int, ...]:
        """Every core some server process runs on (what a single-server caller pins to)."""
        return tuple(sorted({c for cores in self.servers for c in cores}))

    def cpus_of(self, role: str) -> tuple[int, ...]:
        try:
            return self.servers[self.roles.index(role)]
        except ValueError:
            raise KeyError(f"no server role {role!r} in this plan (roles: {', '.join(self.roles)})") from None

    def starting_on(self, cpus: list[int]) -> CpuPlan:
        """The same plan, its servers started on `cpus` and moved to their own cores once up."""
        return replace(self, starting=tuple(sorted(set(cpus))))

    def describe(self) -> str:
        parts = [f"{role} on cpu {_list(cores)}" for role, cores in zip(self.roles, self.servers)]
        text = ", ".join(parts) + f"; client on cpu {_list(self.client_cpus)}"
        if self.warnings:
            text += "".join(f"\nwarning: {w}" for w in self.warnings)
        return text

    def as_dict(self) -> dict:
        return {
            "servers": [{"role": role, "cpus": list(cores)} for role, cores in zip(self.roles, self.servers)],
            "server_cpus": list(self.server_cpus),
            "client_cpus": list(self.client_cpus),
            "shared": self.shared,
            "warnings": list(self.warnings),
            **({"starting_cpus": list(self.starting)} if self.starting else {}),
        }


def _wanted_cores(spec: TopologySpec) -> list[int]:
    per_process = spec.io_threads + 1 if spec.io_threads else 1
    return [per_process] * spec.processes


def _checked(cpus: list[int]) -> list[int]:
    if not cpus:
        raise UsageError("no cpus to plan on: the cpu list is empty")
    bad = [c for c in cpus if not isinstance(c, int) or isinstance(c, bool) or c < 0]
    if bad:
        raise UsageError(f"cpu numbers must be non-negative integers, got {bad!r}")
    return sorted(set(cpus))


def _split(pool: list[int], wanted: list[int]) -> list[list[int]]:
    """One core each (round robin when there are fewer cores than processes), then the spare
    cores to the processes that want more, in order."""
    cores = [[pool[i % len(pool)]] for i in range(len(wanted))]
    spare = pool[len(wanted):]
    for index, want in enumerate(wanted):
        while spare and len(cores[index]) < want:
            cores[index].append(spare.pop(0))
    return cores


def _warnings(spec: TopologySpec, roles: list[str], servers: list[list[int]], client: list[int],
              wanted: list[int]) -> list[str]:
    notes = []
    total = len({c for cores in servers for c in cores} | set(client))
    if set(client) & {c for cores in servers for c in cores}:
        notes.append(f"the client shares cpu {_list(tuple(client))} with the server: only {total} core(s); "
                     "server CPU and client CPU compete, throughput and CPU-per-op are not comparable "
                     "with runs on disjoint cores")
    owners: dict[int, list[str]] = {}
    for role, cores in zip(roles, servers):
        for core in cores:
            owners.setdefault(core, []).append(role)
    crowded = {core: names for core, names in owners.items() if len(names) > 1}
    if crowded:
        procs = len(servers)
        cores_used = len(owners)
        detail = "; ".join(f"cpu {core}: {', '.join(names)}" for core, names in sorted(crowded.items()))
        notes.append(f"{procs} server processes share {cores_used} core(s) ({detail}); "
                     f"{spec.name} needs {sum(wanted) + 1} cores for disjoint pinning")
    short = [(role, len(cores), want) for role, cores, want in zip(roles, servers, wanted) if len(cores) < want]
    if short and spec.io_threads:
        role, have, want = short[0]
        notes.append(f"io-threads {spec.io_threads} run on {have} core(s) per server "
                     f"(the upstream budget is {want}); the threads compete for them")
    return notes


def plan_cpus(spec: TopologySpec, cpus: list[int]) -> CpuPlan:
    """Cores for every server process of `spec` and for the client, out of `cpus`."""
    cpus = _checked(list(cpus))
    roles = spec.roles()
    wanted = _wanted_cores(spec)
    if len(cpus) == 1:
        servers, client = [[cpus[0]] for _ in roles], [cpus[0]]
    elif sum(wanted) + 1 <= len(cpus):
        servers, start = [], 0
        for want in wanted:
            servers.append(cpus[start:start + want])
            start += want
        client = cpus[start:]
    else:
        client = [cpus[-1]]
        servers = _split(cpus[:-1], wanted)
    return CpuPlan(roles=tuple(roles), servers=tuple(tuple(c) for c in servers), client_cpus=tuple(client),
                   wanted=tuple(wanted), warnings=tuple(_warnings(spec, roles, servers, client, wanted)))
