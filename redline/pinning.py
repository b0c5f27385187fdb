"""Which cores the server(s) and the load generator run on."""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Pinning:
    server_cpus: tuple[int, ...]
    client_cpus: tuple[int, ...]

    @property
    def shared(self) -> bool:
        return bool(set(self.server_cpus) & set(self.client_cpus))

    def describe(self) -> str:
        text = f"server on cpu {_cpus(self.server_cpus)}, client on cpu {_cpus(self.client_cpus)}"
        return text + (" (shared: fewer than 2 cores)" if self.shared else "")

    def as_dict(self) -> dict:
        return {"server_cpus": list(self.server_cpus), "client_cpus": list(self.client_cpus),
                "shared": self.shared}


def _cpus(cpus: tuple[int, ...]) -> str:
    return ",".join(str(c) for c in cpus)


def available_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def plan_pinning(cpus: list[int] | None = None) -> Pinning:
    """Standalone server: the first core for the server, the rest for the client.

    With one core both must share it; the plan says so and the run records it.
    """
    cpus = cpus if cpus is not None else available_cpus()
    if len(cpus) < 2:
        return Pinning(server_cpus=tuple(cpus), client_cpus=tuple(cpus))
    return Pinning(server_cpus=(cpus[0],), client_cpus=tuple(cpus[1:]))


def pinned(argv: list[str], cpus: tuple[int, ...]) -> list[str]:
    """The same command, started by taskset on the given cores (an argument list, no shell)."""
    return ["taskset", "--cpu-list", _cpus(cpus), *argv]
