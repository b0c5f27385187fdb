"""scripts/memtier_parity.py: its verdicts (pure logic), and one real side-by-side run when a
memtier_benchmark binary is at hand ($MEMTIER_BENCHMARK or on PATH; skipped otherwise, as in CI)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
import memtier_parity as parity  # noqa: E402

from redline.suites import parse_client_arguments  # noqa: E402

MEMTIER = os.environ.get("MEMTIER_BENCHMARK") or shutil.which("memtier_benchmark")
UPSTREAM = REPO.parent / "shared" / "upstream-suites" / "test-suites"
ZSET = {"first": "1", "last": "9", "zset": (1, 134)}


def step(calls, dataset=ZSET, code=0, message=""):
    return parity.Step(exit_code=code, message=message, calls=calls, dataset=dataset)


def test_preload_verdicts():
    parallel = parse_client_arguments(["--command", "ZADD lb __key__ __key__", "--command-key-pattern", "P",
                                       "-n", "allkeys", "-c", "4", "-t", "1"])
    assert parity.compare_preload(step({"zadd": 9}), step({"zadd": 9}), parallel)[0] == "same"
    assert parity.compare_preload(step({"zadd": 90}), step({"zadd": 9}), parallel)[0] == "same data, fewer requests"
    other = {"first": "1", "last": "9", "zset": (1, 133)}
    assert parity.compare_preload(step({"zadd": 9}), step({"zadd": 9}, other), parallel)[0] == "different"
    refused = parity.compare_preload(step({}, {}, 2, "error: x"), step({}, {}, 2, "y"), parallel)
    assert refused == ("refused by both", "memtier: error: x; redline-load: y")
    random = parse_client_arguments(["--command", "SET __key__ __data__", "-n", "100"])
    close = {"first": "1", "last": "9", "string": (99, 3200)}
    near = {"first": "2", "last": "9", "string": (100, 3232)}
    assert parity.compare_preload(step({"set": 100}, close), step({"set": 100}, near), random)[0] == "same (within 2%)"


def test_client_verdicts():
    assert parity.compare_client(step({"get": 900, "set": 100}), step({"get": 1800, "set": 205}), False)[0] == "same"
    assert parity.compare_client(step({"get": 900, "set": 100}), step({"get": 500, "set": 500}), False)[0] == "different"
    assert parity.compare_client(step({"get": 10}), step({"get": 11}), True)[0] == "different"


def test_io_path_verdicts():
    same = step({"zadd": 9})
    assert parity.compare_paths(same, step({"zadd": 9}))[0] == "same"
    assert parity.compare_paths(same, step({"zadd": 10}))[0] == "different"
    assert parity.compare_paths(same, step({"zadd": 9}, {**ZSET, "names": "x"}))[0] == "different"
    assert parity.compare_paths(step({}, {}, 2, "no"), step({}, {}, 2, "no")) == ("refused by both", "no")


needs_upstream = pytest.mark.skipif(not UPSTREAM.is_dir(), reason="upstream suites not found")


@pytest.mark.skipif(not MEMTIER, reason="no memtier_benchmark binary ($MEMTIER_BENCHMARK or PATH)")
@needs_upstream
@pytest.mark.parametrize("io", ["io_uring", "epoll"])
def test_side_by_side_on_the_250_member_zset_suite(io):
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "memtier_parity.py"), "--memtier", MEMTIER,
                           "--io", io, "--only", "memtier_benchmark-1key-zset-250-elements-zadd-new-random-members"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "| 1key-zset-250-elements-zadd-new-random-members | preload | same | zset 1 keys/134 " in proc.stdout


# One suite per way a dataset is drawn: P slices with two draws per command, a random pattern
# with random data over many connections, several commands and key types, a SCAN cursor.
IO_PATH_SUITES = ["memtier_benchmark-1key-zset-250-elements-zadd-new-random-members",
                  "memtier_benchmark-1Mkeys-string-get-mixed-embstr-raw-pipeline-100-randomdata",
                  "memtier_benchmark-playbook-session-storage-1k-sessions",
                  "memtier_benchmark-1key-hash-hscan-1K-fields-100B-values-cursor-count-1000"]


@needs_upstream
def test_both_io_paths_send_the_same_requests_and_write_the_same_keys():
    """redline-load --io epoll and --io io_uring on the same suites: equal datasets (keys, their
    names and sizes) after the preload and after the client, equal requests per command."""
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "memtier_parity.py"), "--io-paths",
                           "--timed-requests", "2000", "--max-requests", "20000", "--only", *IO_PATH_SUITES],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ") and "| phase |" not in line]
    assert len(rows) == 2 * len(IO_PATH_SUITES)
    assert all(" | same | " in row for row in rows), rows
