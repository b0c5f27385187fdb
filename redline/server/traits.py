"""What a server binary supports — its RDB format, its configuration parameters, which commands
write — read once from a throwaway server of it and remembered per binary."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import redis

from redline.server.process import ManagedServer, ServerSettings
from redline.suites.commands import measured_commands

if TYPE_CHECKING:
    from redline.suites import TestSpec


@dataclass(frozen=True)
class BinaryTraits:
    """What a server binary supports, read once from a throwaway server of it."""


    rdb_version: int
    config_parameters: frozenset[str]
    writing_commands: frozenset[str]     # lower-case names, "xgroup|create" for subcommands


# scripts and functions carry no `write` flag in COMMAND INFO, yet may write
SCRIPT_COMMANDS = frozenset({"eval", "evalsha", "fcall"})


def writing_command_names(client: redis.Redis) -> frozenset[str]:
    """Every command (and subcommand) the server flags `write` in COMMAND, plus the scripts."""
    client.set_response_callback("COMMAND", lambda response, **options: response)
    names = set(SCRIPT_COMMANDS)
    entries = list(client.execute_command("COMMAND"))
    while entries:
        entry = entries.pop()
        if b"write" in entry[2]:
            names.add(entry[0].decode().lower())
        if len(entry) > 9 and entry[9]:
            entries.extend(entry[9])
    return frozenset(names)


@lru_cache(maxsize=None)
def _traits(binary: str, mtime: float) -> BinaryTraits:
    from redline.datasets.snapshot import server_rdb_version
    server = ManagedServer(ServerSettings(binary=Path(binary))).start()
    try:
        client = server.client()
        return BinaryTraits(server_rdb_version(host=server.host, port=server.port),
                            frozenset(client.config_get("*")), writing_command_names(client))
    finally:
        server.stop()


def binary_traits(binary: Path) -> BinaryTraits:
    return _traits(str(binary), binary.stat().st_mtime)


def rdb_version_of(binary: Path) -> int:
    """The RDB format a server binary writes (one SAVE on an empty throwaway server, remembered)."""
    return binary_traits(binary).rdb_version


def writing_commands(test: TestSpec, binary: Path) -> list[str]:
    """The measured client's commands that this server binary flags as writing, e.g. ["lpush"]
    (a subcommand counts as "xgroup|create")."""
    writing = binary_traits(binary).writing_commands
    found = set()
    for command in measured_commands(test):
        name = command[0].lower()
        full = f"{name}|{command[1].lower()}" if len(command) > 1 else name
        found |= {n for n in (name, full) if n in writing}
    return sorted(found)
