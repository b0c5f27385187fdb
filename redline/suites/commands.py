"""The commands a test's measured client sends, as the suite writes them (memtier's default
SET/GET mix when it names none)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import roles

if TYPE_CHECKING:
    from redline.suites import TestSpec


def _workloads(test: TestSpec):
    """The parsed memtier workloads of every client and of the preload, where there are."""
    for invocation in (*test.clients, test.db.preload):
        workload = getattr(invocation, "workload", None) if invocation else None
        if workload is not None:
            yield workload


def literal_commands(test: TestSpec):
    """Each command line the clients, the preload and the init commands send as written
    (memtier's default SET/GET mix has none; a role's are its protocol's)."""
    for workload in _workloads(test):
        if workload.arbitrary_commands:
            yield from (command for command in workload.commands if command)
    for client in test.clients:
        yield from roles.role_commands(client.tool)
    yield from (command for command in test.db.init_commands if command)


def _uses_default_mix(test: TestSpec) -> bool:
    return any(not workload.arbitrary_commands for workload in _workloads(test))


def measured_commands(test: TestSpec) -> list[list[str]]:
    """The command lines every client of the test sends (memtier's default mix: SET and GET by
    its --ratio set:get; a role: its protocol's commands)."""
    commands: list[list[str]] = []
    for client in test.clients:
        workload = client.workload
        if workload is None:
            commands += roles.role_commands(client.tool)
        elif not workload.arbitrary_commands:
            sets, gets = workload.ratio
            commands += [name for name, share in ((["SET"], sets), (["GET"], gets)) if share]
        else:
            commands += [command for command in workload.commands if command]
    return commands


def used_commands(test: TestSpec) -> list[str]:
    """The command names the clients and the preload send (memtier's default mix: SET, GET)."""
    names = {command[0].upper() for command in literal_commands(test)}
    if _uses_default_mix(test):
        names |= {"SET", "GET"}
    return sorted(names)
