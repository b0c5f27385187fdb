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


# commands whose argument 2 is a time to live (seconds, or milliseconds for the P- forms)
_TTL_ARGUMENT = {"SETEX": 1.0, "PSETEX": 0.001, "EXPIRE": 1.0, "PEXPIRE": 0.001, "HEXPIRE": 1.0, "HPEXPIRE": 0.001}
_TTL_OPTION = {"EX": 1.0, "PX": 0.001}      # SET, GETEX, HSETEX, HGETEX: … EX seconds / PX milliseconds


def shortest_ttl(test: TestSpec) -> tuple[float, str] | None:
    """The shortest relative time to live (seconds) the clients, the preload or the init commands
    write, with the command that writes it ("SET __key__ __data__ EX 10"); None when none does
    (absolute expiry times, EXAT/PXAT/EXPIREAT, are left out)."""
    shortest: tuple[float, str] | None = None
    for command in literal_commands(test):
        name = command[0].upper()
        found = []
        if name in _TTL_ARGUMENT and len(command) > 2:
            found.append((command[2], _TTL_ARGUMENT[name]))
        found += [(command[i + 1], _TTL_OPTION[word.upper()]) for i, word in enumerate(command[:-1])
                  if i > 0 and word.upper() in _TTL_OPTION]
        for text, unit in found:
            try:
                seconds = float(text) * unit
            except ValueError:
                continue                      # a placeholder (__data__), not a number
            if seconds > 0 and (shortest is None or seconds < shortest[0]):
                shortest = (seconds, " ".join(command))
    return shortest
