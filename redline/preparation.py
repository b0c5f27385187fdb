"""Getting a server ready for a test: generated dataset, preload, init commands, and the check
that the keyspace holds what the suite says it should."""

from __future__ import annotations

import hashlib
import json
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import redis

from redline.cache_dir import cache_root
from redline.errors import RunError, SkipTest
from redline.load import LoadRequest, loadgen_binary, run_load
from redline.watch import ServerWatch
from redline.server import ManagedServer, Server, ServerSettings
from redline.suites.keyspace import unreachable_keyspace

if TYPE_CHECKING:
    from redline.suites import TestSpec

CLIENT_TOOLS = ("memtier_benchmark", "redline-load")
DEFAULT_TOPOLOGY = "oss-standalone"
PRELOAD_TIMEOUT_S = 1800.0


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
    if test.multi_client:
        return f"runs {len(test.clients)} clients at once; redline drives one client per test"
    if test.has_errors:
        first = next(d for d in test.diagnostics if d.severity == "error")
        return f"the suite has errors, e.g. {first.path}:{first.line}: {first.message}"
    if test.client.tool not in CLIENT_TOOLS:
        return f"client tool {test.client.tool!r} is not supported (redline runs memtier_benchmark command lines)"
    if test.db.preload and test.db.preload.tool not in CLIENT_TOOLS:
        return f"preload tool {test.db.preload.tool!r} is not supported"
    needed, available = estimated_preload_bytes(test), available_memory_bytes()
    if available and needed > MEMORY_SHARE * available:
        return (f"its preload needs about {needed / 2**30:.1f} GiB; this machine has "
                f"{available / 2**30:.1f} GiB available")
    return None


def _workloads(test: TestSpec):
    """The parsed memtier workloads of the measured client and of the preload, where there are."""
    for invocation in (test.client, test.db.preload):
        workload = getattr(invocation, "workload", None) if invocation else None
        if workload is not None:
            yield workload


def _literal_commands(test: TestSpec):
    """Each command line the measured client, the preload and the init commands send as written
    (memtier's default SET/GET mix has none)."""
    for workload in _workloads(test):
        if workload.arbitrary_commands:
            yield from (command for command in workload.commands if command)
    yield from (command for command in test.db.init_commands if command)


def _uses_default_mix(test: TestSpec) -> bool:
    return any(not workload.arbitrary_commands for workload in _workloads(test))


def measured_commands(test: TestSpec) -> list[list[str]]:
    """The command lines the measured client sends (memtier's default mix: SET and GET by its
    --ratio set:get)."""
    workload = getattr(test.client, "workload", None)
    if workload is None:
        return []
    if not workload.arbitrary_commands:
        sets, gets = workload.ratio
        return [name for name, share in ((["SET"], sets), (["GET"], gets)) if share]
    return [command for command in workload.commands if command]


def used_commands(test: TestSpec) -> list[str]:
    """The command names the measured client and the preload send (memtier's default mix: SET, GET)."""
    names = {command[0].upper() for command in _literal_commands(test)}
    if _uses_default_mix(test):
        names |= {"SET", "GET"}
    return sorted(names)


def restore_payloads(test: TestSpec) -> list[bytes]:
    """The literal DUMP payloads of the test's `RESTORE key ttl payload …` commands."""
    payloads = []
    for command in _literal_commands(test):
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


def dataset_scale(test: TestSpec, requested: float | None) -> float:
    return requested if requested is not None else test.dataset_scale


class _PreloadProgress:
    def __init__(self, observer):
        self.observer = observer

    def on_phase(self, phase: str, at: float) -> None:
        pass

    def on_progress(self, event: dict) -> None:
        total = event.get("requests_total")
        self.observer.progress(event.get("requests_done", 0), total)


def _generated_dataset(test: TestSpec, server: Server, scale: float, observer) -> dict:
    from redline import datasets   # the generators are only needed by tests that name a dataset
    from redline.datasets import DatasetError
    from redline.datasets.bulkload import BulkLoadError

    name = test.db.dataset_name
    dataset = datasets.lookup(name) if name else None
    if dataset is None:
        if test.db.dataset_url:
            raise RunError(f"dataset {name!r} comes from {test.db.dataset_url}, which cannot be "
                           f"downloaded here, and redline has no generator for it")
        return {}
    plan = dataset.plan(scale)
    observer.phase(f"dataset {name} ×{scale:g}", total=plan.element_count, unit="elements")
    try:
        dataset.load(host=server.host, port=server.port, scale=scale,
                     progress=lambda done, total: observer.progress(done, total))
    except (DatasetError, BulkLoadError) as exc:
        raise RunError(f"dataset {name}: {exc}") from exc
    return {"name": plan.name, "scale": plan.scale, "keys": plan.key_count,
            "elements": plan.element_count, "seed": plan.seed, "fingerprint": plan.fingerprint()}


# -- dataset snapshots ----------------------------------------------------------------------------

@dataclass
class Snapshot:
    """Where a test's prepared keyspace is (or will be) cached as an RDB file."""

    plan: object            # redline.datasets.DatasetPlan describing everything the preparation does
    rdb_version: int
    cache: object           # redline.datasets.snapshot.SnapshotCache

    @property
    def cached(self) -> Path | None:
        return self.cache.lookup(self.plan, self.rdb_version)


def snapshot_obstacle(topology, config: dict[str, str]) -> str | None:
    """Why a server of this topology and configuration cannot start from an RDB file, or None:
    a cluster's nodes each hold a part of the keyspace, and with appendonly yes redis loads its
    (empty) append-only file instead of dump.rdb."""
    if topology.cluster:
        return f"{topology.name} is a cluster: its nodes cannot start from one RDB file"
    if str(config.get("appendonly", "no")).strip("'\"").lower() == "yes":
        return "appendonly yes: the server loads its append-only file, not an RDB snapshot"
    return None


def prepares_anything(test: TestSpec) -> bool:
    db = test.db
    return bool(db.dataset_name or db.preload or db.init_commands or db.init_lua)


def preparation_summary(test: TestSpec, scale: float | None) -> str:
    """What the preparation does, in a few words: "dataset 1key-geo-60M-elements ×0.05; preload
    (memtier_benchmark --ratio 1:0 …); 2 init commands"."""
    db, parts = test.db, []
    if db.dataset_name:
        parts.append(f"dataset {db.dataset_name} ×{dataset_scale(test, scale):g}")
    if db.preload:
        parts.append(f"preload ({' '.join([db.preload.tool, *db.preload.arguments])})")
    if db.init_commands:
        parts.append(f"{len(db.init_commands)} init commands")
    if db.init_lua:
        parts.append("init Lua")
    return "; ".join(parts) or "nothing"


def snapshot_for(test: TestSpec, *, binary: Path, scale: float | None) -> Snapshot | None:
    """The snapshot entry for this test's preparation on this server binary; None when the test
    prepares nothing. Keyed by everything that shapes the data (generated dataset plan, preload
    arguments and the load generator's version, init commands and Lua, server configuration)
    and by the RDB format the binary writes."""
    from redline.datasets import DatasetPlan, lookup
    from redline.datasets.snapshot import SnapshotCache
    db = test.db
    if not prepares_anything(test):
        return None
    scale = dataset_scale(test, scale)
    generator = lookup(db.dataset_name) if db.dataset_name else None
    definition = {
        "generated": generator.plan(scale).fingerprint() if generator else None,
        "preload": [db.preload.tool, *db.preload.arguments] if db.preload else None,
        "loadgen": loadgen_identity() if db.preload else None,
        "init_commands": db.init_commands, "init_lua": db.init_lua,
        "configuration": db.configuration_parameters,
    }
    # Not keyed by the test's name: suites that prepare the same data share one snapshot.
    plan = DatasetPlan(name="prepared", scale=scale, key_count=0, element_count=0, seed=0,
                       definition=json.dumps(definition, sort_keys=True))
    return Snapshot(plan, rdb_version_of(binary), SnapshotCache(cache_root() / "snapshots"))


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


def unknown_parameters(test: TestSpec, binary: Path, extra: dict[str, str]) -> list[str]:
    """Configuration parameters of the suite (and target) this server binary does not have."""
    known = binary_traits(binary).config_parameters
    return sorted(name for name in {**test.db.configuration_parameters, **extra} if name.lower() not in known)


@lru_cache(maxsize=1)
def loadgen_identity() -> str:
    """The load generator's version and a digest of its binary: a rebuilt generator may write
    different data for the same arguments, so cached snapshots of its preloads must not match."""
    binary = loadgen_binary()
    proc = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30)
    digest = hashlib.sha256(binary.read_bytes()).hexdigest()[:16]
    return f"{proc.stdout.strip()} sha256:{digest}"


def keyspace_length(client) -> int:
    """Keys in every database (of every shard, when given a cluster's summed INFO)."""
    return keyspace_counts(client)[0]


def keyspace_counts(client) -> tuple[int, int]:
    """(keys, keys with a time to live) over every database, from INFO keyspace."""
    dbs = [db for name, db in client.info("keyspace").items() if name.startswith("db")]
    return sum(db.get("keys", 0) for db in dbs), sum(db.get("expires", 0) for db in dbs)


def check_keyspace(test: TestSpec, server: Server, *, before_init: int | None = None) -> dict:
    """The suite's check.keyspacelen, enforced after init commands as upstream does; returns the
    keys found and how many of them expire. `before_init` (keys after the preload) says who made
    a mismatch."""
    found, with_ttl = keyspace_counts(server.info_client())
    expected = test.db.keyspacelen
    if expected is not None and found != expected:
        origin = ""
        if before_init is not None and before_init != found:
            origin = f" ({before_init} after the preload, {found - before_init:+d} from init commands)"
        if with_ttl:
            origin += (f"; {with_ttl} of them have a time to live, and keys whose time ran out while "
                       "preparing are gone")
        raise RunError(f"keyspace check failed: expected {expected} keys after preparation, "
                       f"found {found}{origin}")
    return {"keyspace_length": found, "keys_with_ttl": with_ttl}


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


def prepare(test: TestSpec, server: Server, *, scale: float | None, observer,
            client_cpus: tuple[int, ...] | None, workdir: Path) -> dict:
    """Fill the server for `test`; returns the facts about the data to record with each run."""
    facts: dict = {}
    scale = dataset_scale(test, scale)
    shortfall = unreachable_keyspace(test.db)
    if shortfall:
        raise RunError(f"keyspace check failed before preparing anything: {shortfall}")
    if test.db.dataset_name:
        facts = _generated_dataset(test, server, scale, observer)
    if test.db.preload:
        observer.phase("preload", unit="requests")
        preload = run_load(LoadRequest(arguments=server.load_arguments(test.db.preload.arguments),
                             host=server.host, port=server.port,
                             json_path=workdir / f"preload-{server.port}.json", cpus=client_cpus,
                             reconnect_on_error=True),    # requests lost with a connection are re-sent
                 listener=_PreloadProgress(observer), server_alive=ServerWatch(server),
                 timeout_s=test.db.preload.timeout_seconds or PRELOAD_TIMEOUT_S)
        for warning in preload.extra.get("warnings", []):   # e.g. how -n allkeys differs from memtier
            observer.note(f"preload: {warning}")
    client = server.command_client()
    has_init = bool(test.db.init_commands or test.db.init_lua)
    before_init = keyspace_length(server.info_client()) if has_init and test.db.keyspacelen is not None else None
    try:
        for command in test.db.init_commands:
            client.execute_command(*command)
        if test.db.init_lua:
            client.eval(test.db.init_lua, 0)
    except redis.ResponseError as exc:
        raise RunError(f"init command failed: {exc}") from exc
    except redis.RedisError as exc:
        raise RunError(f"server unreachable during preparation: {exc}") from exc
    facts.update(check_keyspace(test, server, before_init=before_init))
    return facts
