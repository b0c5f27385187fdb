"""Which RDB snapshot a test's prepared data is cached as: keyed by everything that shapes the
data (generated dataset, preload arguments and the load generator's binary, init commands,
server configuration) and the RDB format of the server binary — not by the test's name, so
suites that prepare the same data share one. The cache itself is redline.datasets.snapshot."""

from __future__ import annotations

import hashlib
import json
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from redline.bench.preparation import dataset_scale
from redline.load.redline_load import loadgen_binary
from redline.server.traits import rdb_version_of
from redline.system.cache_dir import cache_root

if TYPE_CHECKING:
    from redline.suites import TestSpec


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


def preparation_obstacle(test: TestSpec) -> str | None:
    """Why what the test's preparation leaves in the server does not fit in an RDB file, or None:
    scripts loaded with SCRIPT LOAD live in the script cache, which an RDB does not hold (a
    restored server answers EVALSHA with NOSCRIPT)."""
    for command in test.db.init_commands:
        if [str(word).upper() for word in command[:2]] == ["SCRIPT", "LOAD"]:
            return "an init command loads a Lua script (SCRIPT LOAD), and an RDB snapshot does not hold the script cache"
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


@lru_cache(maxsize=1)
def loadgen_identity() -> str:
    """The load generator's version and a digest of its binary: a rebuilt generator may write
    different data for the same arguments, so cached snapshots of its preloads must not match."""
    binary = loadgen_binary()
    proc = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30)
    digest = hashlib.sha256(binary.read_bytes()).hexdigest()[:16]
    return f"{proc.stdout.strip()} sha256:{digest}"
