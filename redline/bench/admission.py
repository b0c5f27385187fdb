"""Can this machine and this server run a test as written? Checked before anything is prepared:
the client tool and topology, the memory the preparation needs, the commands and configuration
parameters the server knows, the RDB version of RESTORE payloads. A no is a SkipTest with the
reason (stored, so history says why a test is missing), never a failure of the server."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import redis

from redline.core.errors import RunError, SkipTest
from redline.server.process import Server
from redline.server.traits import binary_traits
from redline.suites import roles
from redline.suites.commands import literal_commands, used_commands
from redline.topology import DEFAULT_TOPOLOGY

if TYPE_CHECKING:
    from redline.suites import TestSpec


CLIENT_TOOLS = ("memtier_benchmark", "redline-load")


BYTES_PER_KEY_OVERHEAD = 80          # rough per-key cost in redis beyond its values


ELEMENT_OVERHEAD = 64                # per field/member of a hash table or skiplist encoded collection


COMPACT_ELEMENT_OVERHEAD = 4         # per entry of a listpack (small collections)


MEMORY_SHARE = 0.6                   # a dataset may take at most this share of the available memory


@dataclass(frozen=True)
class CompactEncodingLimit:
    """When redis keeps a collection in its compact (listpack) form: at most `entries` elements
    of at most `value_bytes` each; the configuration parameters that change it, newest name
    first (7.0 renamed ziplist to listpack and kept the old names as aliases)."""
    entries: int
    value_bytes: int
    entries_parameters: tuple[str, ...]
    value_parameters: tuple[str, ...]


    def within(self, elements: int, value_bytes: int, config: dict[str, str]) -> bool:
        entries = _config_int(config, self.entries_parameters, self.entries)
        largest = _config_int(config, self.value_parameters, self.value_bytes)
        return elements <= entries and value_bytes <= largest


def _encoding_limit(kind: str, entries: int, value_bytes: int) -> CompactEncodingLimit:
    return CompactEncodingLimit(entries, value_bytes,
                                (f"{kind}-max-listpack-entries", f"{kind}-max-ziplist-entries"),
                                (f"{kind}-max-listpack-value", f"{kind}-max-ziplist-value"))


# redis' defaults: hash-max-listpack-entries 512 / -value 64, zset-max-listpack-entries 128 / -value 64
COMPACT_ENCODING_LIMITS = {"HSET": _encoding_limit("hash", 512, 64),
                           "HMSET": _encoding_limit("hash", 512, 64),
                           "ZADD": _encoding_limit("zset", 128, 64)}


DEFAULT_COMPACT_ENCODING_LIMIT = CompactEncodingLimit(128, 64, (), ())


def _config_int(config: dict[str, str], names: tuple[str, ...], default: int) -> int:
    for name in names:
        text = str(config.get(name, "")).strip().strip("'\"")
        if text.isdigit():
            return int(text)
    return default


# commands whose value replaces the key's (or field's) previous one: rewriting a key costs nothing more
REPLACING_COMMANDS = frozenset({"SET", "SETEX", "PSETEX", "SETNX", "GETSET", "HSET", "HMSET", "HSETNX"})


def estimated_preload_bytes(test: TestSpec) -> int:
    """A rough size of what the preload leaves: a key overhead per distinct key, plus each
    request's values and literal arguments (with an element overhead per value) — for every
    request when the command adds to a collection (LPUSH 640,000 times over 5,000 keys grows
    lists), once per key when it replaces (SET); the largest command counts. 0 when unknown."""
    workload = getattr(test.db.preload, "workload", None) if test.db.preload else None
    if workload is None:
        return 0
    key_range = workload.key_maximum - workload.key_minimum + 1
    if workload.requests_allkeys:
        writes = key_range  # at most one pass over the range
    else:
        writes = (workload.requests or 0) * workload.clients * workload.threads
    keys = min(writes, key_range)
    config = test.db.configuration_parameters
    largest = 0
    for command in workload.commands:
        kept = keys if command[0].upper() in REPLACING_COMMANDS else writes
        largest = max(largest, kept * _request_bytes(command, workload, config))
    return keys * BYTES_PER_KEY_OVERHEAD + largest


def _request_bytes(command: list[str], workload, config: dict[str, str]) -> int:
    """What one request of `command` may add to memory besides its key: `__data__` values of
    the workload's size (the middle of --data-size-range) each with an element overhead (a hash
    with 300 fields in a hash table costs 300 of them, a listpack a few bytes each; which
    encoding follows the suite's own configuration-parameters), and the literal arguments."""
    if workload.data_size_range:
        value = sum(workload.data_size_range) // 2
        largest_value = max(workload.data_size_range)
    else:
        value = largest_value = workload.data_size or 0
    values = sum(1 for arg in command[1:] if arg == "__data__")
    literals = sum(len(arg) for arg in command[1:] if arg != "__data__" and arg != "__key__")
    limit = COMPACT_ENCODING_LIMITS.get(command[0].upper(), DEFAULT_COMPACT_ENCODING_LIMIT)
    compact = limit.within(values, largest_value, config)
    per_element = COMPACT_ELEMENT_OVERHEAD if compact else ELEMENT_OVERHEAD
    return values * (value + per_element) + literals


def available_memory_bytes() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


def test_topologies(test: TestSpec) -> list[str]:
    return test.topologies or [DEFAULT_TOPOLOGY]


def unsupported_reason(test: TestSpec, topology, *, managed: bool = True) -> str | None:
    """Why this machine cannot run the test as written on `topology` (a TopologySpec), or None."""
    if topology.name not in test_topologies(test):
        return f"runs on {', '.join(test_topologies(test))}, not {topology.name} (choose with --topology)"
    if topology.unsupported:
        return topology.unsupported
    if not managed and topology.name != DEFAULT_TOPOLOGY:
        return f"a tcp:// target is someone else's server: redline cannot deploy {topology.name} there"
    if test.has_errors:
        first = next(d for d in test.diagnostics if d.severity == "error")
        return f"the suite has errors, e.g. {first.path}:{first.line}: {first.message}"
    for client in test.clients:
        if client.tool not in CLIENT_TOOLS and not roles.is_role(client.tool):
            return (f"client tool {client.tool!r} is not supported (redline runs memtier_benchmark command lines "
                    f"and the roles {', '.join(roles.roles())})")
    if test.db.preload and test.db.preload.tool not in CLIENT_TOOLS:
        return f"preload tool {test.db.preload.tool!r} is not supported"
    needed, available = estimated_preload_bytes(test), available_memory_bytes()
    if available and needed > MEMORY_SHARE * available:
        return (f"its preload needs about {needed / 2**30:.1f} GiB, more than a dataset may take here: "
                f"{MEMORY_SHARE:.0%} of the {available / 2**30:.1f} GiB available, "
                f"{MEMORY_SHARE * available / 2**30:.1f} GiB (shrink it with --scale)")
    return None


def restore_payloads(test: TestSpec) -> list[bytes]:
    """The literal DUMP payloads of the test's `RESTORE key ttl payload …` commands."""
    payloads = []
    for command in literal_commands(test):
        if command[0].upper() == "RESTORE" and len(command) >= 4 and "__" not in command[3]:
            try:
                payloads.append(command[3].encode("latin-1"))   # the tokenizer keeps \xHH as one char
            except UnicodeEncodeError:
                continue
    return sorted(set(payloads))


def dump_rdb_version(payload: bytes) -> int | None:
    """A DUMP payload ends with its RDB version (2 bytes, little-endian) and a CRC64 (8 bytes)."""
    return int.from_bytes(payload[-10:-8], "little") if len(payload) >= 10 else None


RESTORE_PROBE_KEY = "redline:restore-probe"


def check_restore_payloads(test: TestSpec, client: redis.Redis) -> None:
    """A server refuses DUMP payloads of a newer RDB version than its own (upstream's RESTORE
    suites carry Redis 7.4 payloads): try each payload once on a scratch key before preparing,
    so such a suite is skipped with the reason instead of measuring a stream of error replies."""
    for payload in restore_payloads(test):
        try:
            client.restore(RESTORE_PROBE_KEY, 0, payload, replace=True)
        except redis.ResponseError as exc:
            theirs, own = dump_rdb_version(payload), _server_dump_version(client)
            if theirs is not None and own is not None and theirs > own:
                raise SkipTest(f"its RESTORE payload is RDB version {theirs}; this server writes version {own} "
                               f"and refuses newer payloads ({exc})") from exc
            raise RunError(f"the server refuses the suite's RESTORE payload: {exc}") from exc
        finally:
            client.delete(RESTORE_PROBE_KEY)


def _server_dump_version(client: redis.Redis) -> int | None:
    """The RDB version of the server's own DUMP payloads (a scratch key, deleted at once)."""
    try:
        client.set(RESTORE_PROBE_KEY, b"x")
        return dump_rdb_version(client.dump(RESTORE_PROBE_KEY) or b"")
    finally:
        client.delete(RESTORE_PROBE_KEY)


def unknown_commands(test: TestSpec, client: redis.Redis) -> list[str]:
    """Commands the test sends that this server does not know (by COMMAND INFO)."""
    names = used_commands(test)
    if not names:
        return []
    client.set_response_callback("COMMAND", lambda response, **options: response)   # keep nil entries
    info = client.execute_command("COMMAND", "INFO", *names)
    return [name for name, entry in zip(names, info) if entry is None]


def unknown_parameters(test: TestSpec, binary: Path, extra: dict[str, str]) -> list[str]:
    """Configuration parameters of the suite (and target) this server binary does not have."""
    known = binary_traits(binary).config_parameters
    return sorted(name for name in {**test.db.configuration_parameters, **extra} if name.lower() not in known)


def check_server_can_run(test: TestSpec, server: Server) -> None:
    """SkipTest when the running server lacks what the test sends: a command (COMMAND INFO) or
    the RDB version of a RESTORE payload. Checked before preparing and before a restore alike."""
    try:
        missing = unknown_commands(test, server.client())
    except redis.RedisError:
        missing = []          # a server without COMMAND INFO: let the run tell
    if missing:
        raise SkipTest(f"the server does not know {', '.join(missing)} (COMMAND INFO)")
    check_restore_payloads(test, server.command_client())
