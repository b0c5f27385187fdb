"""RDB snapshot cache: store after a real preload, restore into a fresh real redis-server."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import pytest

from redline import datasets
from redline.datasets import geo
from redline.datasets.base import DatasetError
from redline.datasets.snapshot import SnapshotCache, rdb_version_of_file, server_rdb_version

from conftest import start_redis_server


def test_store_and_restore_round_trip(tmp_path):
    cache = SnapshotCache(tmp_path / "cache")
    dataset = datasets.lookup(geo.DATASET_NAME)
    source = start_redis_server(tmp_path)
    try:
        version = server_rdb_version(host="127.0.0.1", port=source.port)
        assert version >= 9  # Redis 7.0 writes RDB 10
        plan = dataset.load(host="127.0.0.1", port=source.port, scale=0.001)
        assert cache.lookup(plan, version) is None
        entry = cache.store_from_server(plan, host="127.0.0.1", port=source.port)
        expected = source.client().geopos("key", "1", str(plan.element_count))
    finally:
        source.stop()
    assert entry == cache.lookup(plan, version)
    assert rdb_version_of_file(entry) == version
    assert entry.with_suffix(".json").is_file()
    assert cache.lookup(dataset.plan(0.001, seed=2), version) is None  # other data, other entry
    assert cache.lookup(plan, version + 1) is None  # other RDB format, other entry

    restore_dir = tmp_path / "restore"
    assert cache.restore_to(plan, version, restore_dir) == restore_dir / "dump.rdb"
    restored = start_redis_server(restore_dir)
    try:
        assert restored.client().dbsize() == 1
        assert restored.client().zcard("key") == plan.element_count == 60_842
        assert restored.client().geopos("key", "1", str(plan.element_count)) == expected
    finally:
        restored.stop()


def _store(args: tuple[str, str, str]) -> str:
    cache_dir, rdb, _ = args
    plan = datasets.DatasetPlan(name="x", scale=1.0, key_count=1, element_count=1, seed=1)
    return str(SnapshotCache(cache_dir).store_file(plan, Path(rdb)))


def test_concurrent_stores_leave_one_whole_file(tmp_path):
    rdb = tmp_path / "big.rdb"
    payload = b"REDIS0010" + os.urandom(8 << 20)
    rdb.write_bytes(payload)
    cache_dir = tmp_path / "cache"
    with multiprocessing.get_context("spawn").Pool(3) as pool:
        paths = pool.map(_store, [(str(cache_dir), str(rdb), str(i)) for i in range(3)])
    assert len(set(paths)) == 1
    assert Path(paths[0]).read_bytes() == payload
    assert not [p for p in cache_dir.iterdir() if p.suffix == ".tmp"]


def test_not_an_rdb_file_is_a_clear_error(tmp_path):
    bogus = tmp_path / "bogus.rdb"
    bogus.write_bytes(b"hello world")
    plan = datasets.DatasetPlan(name="x", scale=1.0, key_count=1, element_count=1, seed=1)
    with pytest.raises(DatasetError, match="is not an RDB file"):
        SnapshotCache(tmp_path / "cache").store_file(plan, bogus)
