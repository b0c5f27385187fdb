"""Whether a suite's keyspace check can be met at all, decided before anything runs.

A command creates at most as many keys as it has arguments, so a preload of R requests of at
most A arguments each, plus init commands, cannot leave more than R × A + (their arguments)
keys. When `check.keyspacelen` asks for more, the suite measures something other than it says
(upstream's MSET suites claim 10M keys and preload 80,000), and preparing it only wastes time.
Scripts (EVAL, FCALL, init_lua), generated or downloaded datasets and timed preloads have no
such bound.
"""
from __future__ import annotations

from .model import DbConfig

SCRIPT_COMMANDS = {"EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO", "FCALL", "FCALL_RO"}


def unreachable_keyspace(db: DbConfig) -> str | None:
    """Why `db.keyspacelen` cannot be reached by this preparation, or None when it may be."""
    from redline import datasets  # the registry of built-in generators
    expected = db.keyspacelen
    generated = db.dataset_name and datasets.lookup(db.dataset_name) is not None
    if not expected or db.init_lua or generated or db.dataset_url:
        return None
    if not (db.preload or db.init_commands):
        return None                      # nothing fills the database: the loader warns about that
    workload = db.preload.workload if db.preload else None
    if db.preload and workload is None:
        return None                      # another preload tool: nothing to reason about
    commands = [*(workload.commands if workload else []), *db.init_commands]
    if any(command and command[0].upper() in SCRIPT_COMMANDS for command in commands):
        return None
    requests = 0
    bound = sum(len(command) for command in db.init_commands)
    if workload:
        if workload.requests is None:
            return None                  # timed preload
        requests = workload.requests * workload.connections
        bound += requests * max(len(command) for command in workload.commands)
    if bound >= expected:
        return None
    sources = []
    if workload:
        sources.append(f"the preload's {requests:,} requests ({workload.requests:,} per connection × "
                       f"{workload.connections} connection{'s' if workload.connections != 1 else ''}"
                       f"{_default_note(workload)})")
    if db.init_commands:
        sources.append(f"{len(db.init_commands)} init commands")
    return (f"check.keyspacelen {expected:,} cannot be reached: {' and '.join(sources)} can create "
            f"at most {bound:,} keys (one per argument at most)")


def _default_note(workload) -> str:
    if "requests" in workload.flags or workload.requests_allkeys:
        return ""
    return "; no -n, so memtier's default of 10,000 per connection"
