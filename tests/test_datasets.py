"""redline.datasets against real redis-server processes on free loopback ports."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from redline import datasets
from redline.datasets import geo
from redline.datasets.bulkload import BulkLoadError, bulk_load
from redline.datasets.geomath import in_box, in_circle
from redline.datasets.resp import encode_command, geoadd_batches, set_batches
from redline.server.process import free_port

from conftest import start_redis_server

REDIS_SERVER = Path("/usr/bin/redis-server")


@pytest.fixture
def server():
    srv = start_redis_server()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def loaded_geo():
    """One server holding the geo dataset at scale 0.01 (608,416 points), plus progress calls."""
    srv = start_redis_server()
    calls: list[tuple[int, int]] = []
    try:
        plan = datasets.lookup(geo.DATASET_NAME).load(
            host="127.0.0.1", port=srv.port, scale=0.01, progress=lambda d, t: calls.append((d, t))
        )
        yield srv, plan, calls
    finally:
        srv.stop()


def _points(count: int, seed: int, chunk_size: int) -> tuple[np.ndarray, np.ndarray, list[int]]:
    gen = geo.GeoPointGenerator(count=count, seed=seed)
    chunks = list(gen.chunks(chunk_size))
    firsts = [c.first_member for c in chunks]
    return (
        np.concatenate([c.lon_e6 for c in chunks]),
        np.concatenate([c.lat_e6 for c in chunks]),
        firsts,
    )


# ---------------------------------------------------------------- generator


def test_same_seed_same_points_and_other_seed_differs():
    lon_a, lat_a, _ = _points(150_000, seed=7, chunk_size=1 << 16)
    lon_b, lat_b, _ = _points(150_000, seed=7, chunk_size=1 << 16)
    lon_c, _, _ = _points(150_000, seed=8, chunk_size=1 << 16)
    assert np.array_equal(lon_a, lon_b) and np.array_equal(lat_a, lat_b)
    assert (lon_a != lon_c).mean() > 0.99


def test_chunk_size_does_not_change_the_data():
    count = 3 * geo.BLOCK_SIZE + 1234
    reference = _points(count, seed=3, chunk_size=1 << 20)
    for chunk_size in (1, 999, geo.BLOCK_SIZE, 100_003):
        if chunk_size == 1:
            gen = geo.GeoPointGenerator(count=count, seed=3)
            head = [next(iter(gen.chunks(1)))]  # a chunk of one point is the first point
            assert head[0].first_member == 1 and len(head[0]) == 1
            assert head[0].lon_e6[0] == reference[0][0]
            continue
        lon, lat, firsts = _points(count, seed=3, chunk_size=chunk_size)
        assert np.array_equal(lon, reference[0]) and np.array_equal(lat, reference[1])
        assert firsts == list(range(1, count + 1, chunk_size))
    # a shorter dataset is a prefix of a longer one with the same seed
    lon_short, _, _ = _points(count - 5000, seed=3, chunk_size=4096)
    assert np.array_equal(lon_short, reference[0][: count - 5000])


def test_points_are_valid_for_the_server():
    lon, lat, _ = _points(200_000, seed=1, chunk_size=1 << 16)
    assert lon.min() >= -180_000_000 and lon.max() <= 180_000_000
    assert np.abs(lat).max() <= 85_051_128


def test_density_is_highest_in_europe_and_calibrated_offline():
    count = geo.point_count(0.01)
    assert count == 608_416
    box = circle = europe = 0
    for chunk in geo.GeoPointGenerator(count=count, seed=1).chunks(1 << 18):
        box += int(in_box(chunk.lon, chunk.lat, geo.UPSTREAM_BOX).sum())
        circle += int(in_circle(chunk.lon, chunk.lat, geo.UPSTREAM_CIRCLE).sum())
        europe += int(((chunk.lon > -25) & (chunk.lon < 45) & (chunk.lat > 35) & (chunk.lat < 72)).sum())
    assert abs(box - 110) <= 0.15 * 110, box
    assert abs(circle - 1000) <= 0.15 * 1000, circle
    # Europe is ~7% of the land; it must hold far more than that share of the points
    assert europe / count > 0.25


# ---------------------------------------------------------------- RESP encoding


def test_fixed_width_coordinates_and_members_are_exact(server):
    lon = np.array([7_250_000, -180_000_000, 180_000_000, -1, 0], dtype=np.int64)
    lat = np.array([-33_500_000, 85_051_128, -85_051_128, 1, 0], dtype=np.int64)
    batches = list(geoadd_batches(key="g", first_member=8, lon_e6=lon, lat_e6=lat, members_per_command=2))
    assert [b.elements for b in batches] == [2, 2, 1]  # 8,9 | 10,11 | 12
    split = geoadd_batches(key="g", first_member=9, lon_e6=lon[:3], lat_e6=lat[:3], members_per_command=5)
    assert [b.elements for b in split] == [1, 2]  # a command never mixes member widths
    assert b"0007.250000" in batches[0].payload and b"-33.500000" in batches[0].payload
    stats = bulk_load(batches, host="127.0.0.1", port=server.port, total_elements=5)
    assert stats.elements == 5
    assert server.client().zcard("g") == 5
    pos = server.client().geopos("g", "8", "12", "10")
    assert pos[0] == pytest.approx((7.25, -33.5), abs=1e-5)
    assert pos[1] == pytest.approx((0.0, 0.0), abs=1e-5)
    assert pos[2] == pytest.approx((180.0, -85.051128), abs=1e-5)


def test_set_batches_load_exact_keys(server):
    batches = set_batches(key_prefix="memtier-", first_index=1, count=12_345, value=b"v" * 100,
                          commands_per_batch=1000)
    stats = bulk_load(batches, host="127.0.0.1", port=server.port, total_elements=12_345, connections=3)
    assert stats.commands == 12_345 and stats.elements == 12_345
    assert server.client().dbsize() == 12_345
    assert server.client().get("memtier-12345") == b"v" * 100
    assert server.client().get("memtier-0") is None and server.client().get("memtier-12346") is None


# ---------------------------------------------------------------- errors


def test_server_error_reply_names_the_command(server):
    server.client().set("key", "a string, not a geo set")
    gen = geo.GeoPointGenerator(count=5000, seed=1)
    batches = (
        b for c in gen.chunks(5000)
        for b in geoadd_batches(key="key", first_member=c.first_member, lon_e6=c.lon_e6,
                                lat_e6=c.lat_e6, members_per_command=1000)
    )
    with pytest.raises(BulkLoadError) as info:
        bulk_load(batches, host="127.0.0.1", port=server.port, total_elements=5000)
    text = str(info.value)
    assert "WRONGTYPE" in text and "GEOADD key <9 points: members 1..9>" in text  # 1..9, then 10..99, ...


def test_error_in_the_middle_of_a_batch_names_that_command(server):
    batches = list(set_batches(key_prefix="k", first_index=1, count=10, value=b"x", commands_per_batch=10))
    bad = encode_command("SET", "k11", "x", "EX", "not-a-number")
    from redline.datasets.resp import Batch

    batches.append(Batch(payload=bad, commands=1, elements=1, describe=lambda i: "SET k11 x EX not-a-number"))
    with pytest.raises(BulkLoadError, match=r"server error reply to SET k11 x EX not-a-number: ERR"):
        bulk_load(batches, host="127.0.0.1", port=server.port, total_elements=11, connections=1)


def test_unreachable_server_is_a_clear_error():
    port = free_port()
    with pytest.raises(BulkLoadError, match=rf"cannot connect to 127.0.0.1:{port}"):
        bulk_load([], host="127.0.0.1", port=port, total_elements=0)


def test_load_refuses_an_existing_key(server):
    server.client().geoadd("key", (1.0, 2.0, "x"))
    with pytest.raises(datasets.DatasetError, match="already exists"):
        datasets.lookup(geo.DATASET_NAME).load(host="127.0.0.1", port=server.port, scale=1e-5)
    assert server.client().zcard("key") == 1


# ---------------------------------------------------------------- registry and plans


def test_registry_and_plan():
    assert datasets.lookup("no-such-dataset") is None
    dataset = datasets.lookup("1key-geo-60M-elements")
    plan = dataset.plan(1.0)
    assert (plan.key_count, plan.element_count) == (1, 60_841_557)
    assert dataset.plan(0.5).element_count == 30_420_778  # round(60,841,557 * 0.5)
    assert plan.fingerprint() == dataset.plan(1.0).fingerprint()
    assert plan.fingerprint() != dataset.plan(1.0, seed=2).fingerprint()
    assert plan.fingerprint() != dataset.plan(0.5).fingerprint()
    for bad in (0, -1, float("nan"), 11, "1"):
        with pytest.raises(ValueError, match="scale"):
            dataset.plan(bad)


# ---------------------------------------------------------------- loaded server (scale 0.01)


def test_load_gives_exact_counts_and_progress(loaded_geo):
    srv, plan, calls = loaded_geo
    assert plan.element_count == 608_416
    assert srv.client().dbsize() == 1
    assert srv.client().zcard("key") == 608_416
    assert calls[0] == (0, 608_416) and calls[-1] == (608_416, 608_416)
    done = [d for d, _ in calls]
    assert done == sorted(done)


def test_upstream_queries_on_the_server(loaded_geo):
    srv, plan, _ = loaded_geo
    box = srv.client().execute_command("GEOSEARCH", "key", "FROMLONLAT", 7.0, 55.0, "BYBOX", 200, 200, "KM")
    assert abs(len(box) - 110) <= 0.15 * 110, len(box)
    # the server agrees with our numpy re-implementation of its test
    lon, lat, _ = _points(plan.element_count, seed=plan.seed, chunk_size=1 << 18)
    expected = np.flatnonzero(in_box(lon / 1e6, lat / 1e6, geo.UPSTREAM_BOX)) + 1
    assert abs(len(set(box) ^ {str(i).encode() for i in expected})) <= 2
    # members "1" and "2" exist (GEODIST key 1 2, GEOPOS key 1 in the upstream suites)
    pos = srv.client().geopos("key", "1", "2", "608416", "608417")
    assert pos[0] == pytest.approx((lon[0] / 1e6, lat[0] / 1e6), abs=1e-5)
    assert pos[2] == pytest.approx((lon[-1] / 1e6, lat[-1] / 1e6), abs=1e-5)
    assert pos[3] is None
    assert srv.client().geodist("key", "1", "2") is not None
