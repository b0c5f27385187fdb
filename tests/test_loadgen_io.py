"""redline-load's two I/O paths (--io auto|io_uring|epoll, issue #33) against real redis-servers:
the path a run used is in its JSON, a refused io_uring falls back to epoll with one line (refused
for real: a seccomp filter makes io_uring_setup fail with EPERM, as container policies do), and
latency under a server stall is measured the same way on both paths. That both paths send the
same requests and write the same keys: tests/test_memtier_parity.py."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from hdrh.histogram import HdrHistogram

from test_loadgen import BIN, base, redis_server

HELPER_SOURCE = Path(__file__).with_name("io_uring_refused.c")
FALLBACK = "redline-load: io_uring is not available here (io_uring_setup: Operation not permitted); using epoll"


@pytest.fixture
def server():
    with redis_server() as proc:
        yield proc


@pytest.fixture(scope="module")
def io_uring_refused(tmp_path_factory) -> Path:
    """A program that runs its arguments with io_uring_setup refused (EPERM) by seccomp."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    assert compiler, "a C compiler is needed (build-essential, installed by setup.sh)"
    binary = tmp_path_factory.mktemp("seccomp") / "io_uring_refused"
    proc = subprocess.run([compiler, "-O2", "-o", str(binary), str(HELPER_SOURCE)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return binary


def load(args, tmp_path, prefix=()):
    out = tmp_path / f"out-{time.monotonic_ns()}.json"
    proc = subprocess.run([*map(str, prefix), str(BIN), *map(str, args), "--json-out-file", str(out)],
                          capture_output=True, text=True, timeout=60)
    return proc, (json.loads(out.read_text()) if out.exists() else None)


def io_uring_allowed() -> bool:
    """Whether this kernel lets redline-load use io_uring (asked of redline-load itself)."""
    proc = subprocess.run([str(BIN), "--io", "io_uring", "-p", "1", "-n", "1"], capture_output=True, text=True,
                          timeout=30)
    return "io_uring is not available here" not in proc.stderr


def test_epoll_is_the_default_and_auto_uses_io_uring_where_the_kernel_allows_it(server, tmp_path):
    proc, data = load([*base(server), "-n", 200, "-c", 2, "-t", 2], tmp_path)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert data["redline"]["io"] == {"path": "epoll", "requested": "epoll", "note": None}
    proc, data = load([*base(server), "-n", 200, "-c", 2, "-t", 2, "--io", "auto"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    if io_uring_allowed():
        assert data["redline"]["io"] == {"path": "io_uring", "requested": "auto", "note": None}
        assert proc.stderr == ""
    else:
        assert data["redline"]["io"]["path"] == "epoll"
    for path in ("io_uring", "epoll"):
        if path == "io_uring" and not io_uring_allowed():
            continue
        proc, data = load([*base(server), "-n", 200, "-c", 2, "-t", 2, "--io", path], tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert data["redline"]["io"] == {"path": path, "requested": path, "note": None}
        assert data["redline"]["ops"] == data["ALL STATS"]["Totals"]["Count"] == 800


def test_a_refused_io_uring_falls_back_to_epoll_with_one_line(server, tmp_path, io_uring_refused):
    proc, data = load([*base(server), "-n", 200, "-c", 2, "-t", 2, "--io", "auto"], tmp_path, prefix=[io_uring_refused])
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == [FALLBACK]
    assert data["redline"]["io"] == {"path": "epoll", "requested": "auto",
                                     "note": FALLBACK.removeprefix("redline-load: ")}
    assert data["redline"]["ops"] == data["ALL STATS"]["Totals"]["Count"] == 800      # the results still come


def test_a_forced_io_uring_that_is_refused_fails_in_one_line(server, tmp_path, io_uring_refused):
    proc, data = load([*base(server), "-n", 10, "--io", "io_uring"], tmp_path, prefix=[io_uring_refused])
    assert proc.returncode == 1 and data is None
    assert proc.stderr.splitlines() == [
        "redline-load: --io io_uring: io_uring is not available here (io_uring_setup: Operation not permitted)"]


@pytest.mark.parametrize("args, line", [
    (["--io", "uring"], "redline-load: --io must be auto, io_uring or epoll, got 'uring'"),
    (["--io", "io_uring", "--tls", "--tls-skip-verify"],
     "redline-load: --io io_uring cannot be combined with --tls: TLS connections run on epoll"),
])
def test_bad_io_flags_are_one_line_and_exit_2(args, line):
    proc = subprocess.run([str(BIN), *args, "-n", "1"], capture_output=True, text=True, timeout=30)
    assert (proc.returncode, proc.stderr.splitlines()) == (2, [line])


RATE = 200          # requests per second per connection
CONNECTIONS = 2
STALL_S = 0.5


@pytest.mark.parametrize("io", ["io_uring", "epoll"])
def test_latency_under_a_server_stall_counts_from_the_intended_send_on_both_paths(server, tmp_path, io):
    """A rate-limited run whose server is stopped (SIGSTOP) for 0.5 s: the requests due during
    the stall are sent when it ends and their latency counts from when they were due, so about
    half of them (those due in its first half) wait 0.25 s or more and the longest waits the
    whole stall. Both paths must show that; nothing here depends on the machine's speed."""
    if io == "io_uring" and not io_uring_allowed():
        pytest.skip("this kernel refuses io_uring (the fallback test covers it)")
    out = tmp_path / "stall.json"
    proc = subprocess.Popen([str(BIN), *map(str, base(server)), "--io", io, "--test-time", "3", "-c", str(CONNECTIONS),
                             "-t", "1", "--rate-limiting", str(RATE), "--events", "--json-out-file", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for line in proc.stderr:
        if '"phase":"measure"' in line:
            break
    time.sleep(1.0)
    os.kill(server.pid, signal.SIGSTOP)
    time.sleep(STALL_S)
    os.kill(server.pid, signal.SIGCONT)
    proc.stderr.read()
    assert proc.wait(timeout=30) == 0
    data = json.loads(out.read_text())
    totals = data["ALL STATS"]["Totals"]
    assert data["redline"]["latency_measured_from"] == "intended_send"
    assert totals["Count"] == pytest.approx(3 * RATE * CONNECTIONS, rel=0.05)      # the stalled requests were sent
    histogram = HdrHistogram.decode(totals["Percentile Latencies"]["Histogram log format"]["Compressed Histogram"])
    due_in_stall = STALL_S * RATE * CONNECTIONS
    waited_half = sum(item.count_added_in_this_iter_step for item in histogram.get_recorded_iterator()
                      if item.value_iterated_to >= 250_000)             # microseconds
    assert waited_half == pytest.approx(due_in_stall / 2, rel=0.3)
    assert STALL_S * 0.9 <= totals["Max Latency"] / 1000 <= STALL_S + 0.3
