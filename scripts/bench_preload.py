#!/usr/bin/env python3
"""Preload rate vs the server's ingest ceiling, side by side in one run.

For each dataset, every repetition starts a fresh redis-server (free loopback port,
--save "" --appendonly no) and loads the same data three ways, in interleaved order
(A B C, then C B A, ...):

  redis-cli --pipe   the RESP bytes pre-built in a file, fed to `redis-cli --pipe`
  raw prebuilt       the same bytes pre-built in memory, sent by redline's loader
                     (several connections, windowed): the server's ceiling as we can feed it
  redline preload    what a run does: generate + encode + send + check replies + validate

Reported per method: wall seconds, elements/s, and the server's own CPU seconds (utime +
stime from /proc): a server at ~100% CPU is at its ceiling. The verdict compares redline's
preload with the best ceiling method (median rate over the repetitions).

With --restore (or --restore-only), the data is also preloaded once into a server with a
data directory, SAVEd into an RDB snapshot cache (redline/datasets/snapshot.py), and restored
`--reps` times: copy the cached file, start redis-server on it, wait for the first PING.

    .venv/bin/python scripts/bench_preload.py --geo-points 10000000 --string-keys 1000000
    .venv/bin/python scripts/bench_preload.py --geo-points 1000000 --string-keys 200000 --reps 1
    .venv/bin/python scripts/bench_preload.py --restore-only     # snapshot restore vs preload
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from redline.datasets import geo  # noqa: E402
from redline.datasets.bulkload import bulk_load  # noqa: E402
from redline.datasets.geo_dataset import GeoDataset  # noqa: E402
from redline.datasets.base import DatasetPlan  # noqa: E402
from redline.datasets.resp import Batch, set_batches  # noqa: E402
from redline.datasets.snapshot import SnapshotCache, rdb_version_of_file  # noqa: E402

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Server:
    process: subprocess.Popen
    port: int

    @classmethod
    def start(cls, binary: str, directory: Path | None = None) -> "Server":
        """Start and wait until it answers PING (i.e. has finished loading any RDB)."""
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        where = ["--dir", str(directory), "--dbfilename", "dump.rdb"] if directory else []
        if directory:
            directory.mkdir(parents=True, exist_ok=True)
        process = subprocess.Popen(
            [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", *where],
            stdout=subprocess.DEVNULL,
        )
        client = redis.Redis(port=port)
        for _ in range(60_000):
            try:
                client.ping()
                break
            except (redis.ConnectionError, redis.BusyLoadingError):
                if process.poll() is not None:
                    raise SystemExit(f"{binary} exited with {process.returncode} on port {port}")
                time.sleep(0.005)
        else:
            process.kill()
            raise SystemExit(f"{binary} did not answer on port {port}")
        client.close()
        return cls(process=process, port=port)

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS

    def count(self, what: str) -> int:
        client = redis.Redis(port=self.port, socket_timeout=600)
        try:
            return client.zcard(geo.KEY_NAME) if what == "geo" else client.dbsize()
        finally:
            client.close()

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@dataclass
class Result:
    method: str
    seconds: float
    server_cpu: float
    elements: int

    @property
    def rate(self) -> float:
        return self.elements / self.seconds


@dataclass(frozen=True)
class Workload:
    kind: str  # "geo" or "strings"
    elements: int
    build: Callable[[], Iterable[Batch]]  # fresh batches (generation happens while iterating)
    redline_load: Callable[[int], None]  # port -> load the way a run does


def geo_workload(points: int, seed: int) -> Workload:
    dataset = GeoDataset()
    scale = points / geo.FULL_SCALE_POINTS
    plan = dataset.plan(scale, seed=seed)

    def load(port: int) -> None:
        dataset.load(host="127.0.0.1", port=port, scale=scale, seed=seed)

    return Workload(
        kind="geo",
        elements=plan.element_count,
        build=lambda: dataset.batches(plan, members_per_command=1000),
        redline_load=load,
    )


def strings_workload(keys: int, value_size: int) -> Workload:
    def build() -> Iterable[Batch]:
        return set_batches(key_prefix="memtier-", first_index=1, count=keys,
                           value=b"x" * value_size, commands_per_batch=1000)

    def load(port: int) -> None:
        bulk_load(build(), host="127.0.0.1", port=port, total_elements=keys)

    return Workload(kind="strings", elements=keys, build=build, redline_load=load)


def measure(server: Server, method: str, action: Callable[[], None], workload: Workload) -> Result:
    cpu0 = server.cpu_seconds()
    started = time.perf_counter()
    action()
    seconds = time.perf_counter() - started
    result = Result(method=method, seconds=seconds, server_cpu=server.cpu_seconds() - cpu0,
                    elements=workload.elements)
    found = server.count(workload.kind)
    if found != workload.elements:
        raise SystemExit(f"{method}: expected {workload.elements:,} elements, server has {found:,}")
    return result


def run_workload(workload: Workload, *, reps: int, binary: str) -> list[Result]:
    prebuilt = list(workload.build())  # not timed
    with tempfile.NamedTemporaryFile(prefix="redline-preload-", suffix=".resp", delete=False) as fh:
        for batch in prebuilt:
            fh.write(batch.payload)
        resp_file = Path(fh.name)
    size_mb = resp_file.stat().st_size / 1e6
    print(f"\n{workload.kind}: {workload.elements:,} elements, {size_mb:,.0f} MB of RESP")

    def redis_cli(port: int) -> None:
        with open(resp_file, "rb") as stdin:
            out = subprocess.run(["redis-cli", "-p", str(port), "--pipe"], stdin=stdin,
                                 capture_output=True, text=True, check=False)
        if out.returncode != 0 or "errors: 0" not in out.stdout:
            raise SystemExit(f"redis-cli --pipe failed: {out.stdout[-300:]} {out.stderr[-300:]}")

    def raw(port: int) -> None:
        bulk_load(prebuilt, host="127.0.0.1", port=port, total_elements=workload.elements)

    methods = {
        "redis-cli --pipe": redis_cli,
        "raw prebuilt": raw,
        "redline preload": workload.redline_load,
    }
    order = list(methods)
    results: list[Result] = []
    try:
        for rep in range(reps):
            for method in order if rep % 2 == 0 else list(reversed(order)):
                server = Server.start(binary)
                try:
                    result = measure(server, method, lambda m=method, s=server: methods[m](s.port),
                                     workload)
                finally:
                    server.stop()
                results.append(result)
                print(f"  rep {rep + 1} {method:17s} {result.seconds:7.2f} s  "
                      f"{result.rate:12,.0f} /s  server CPU {result.server_cpu:6.2f} s "
                      f"({result.server_cpu / result.seconds:4.0%} of wall)")
    finally:
        resp_file.unlink(missing_ok=True)
    return results


def run_restore(workload: Workload, *, reps: int, binary: str, preload_seconds: float) -> None:
    """Preload once into a server with a data dir, cache its RDB, then time restores:
    copy the cached file + start a server on it + first PING answered."""
    with tempfile.TemporaryDirectory(prefix="redline-snapshot-") as tmp:
        tmp_dir = Path(tmp)
        cache = SnapshotCache(tmp_dir / "cache")
        plan = DatasetPlan(name=f"bench-{workload.kind}", scale=1.0, key_count=0,
                           element_count=workload.elements, seed=0)
        server = Server.start(binary, tmp_dir / "source")
        try:
            workload.redline_load(server.port)
            started = time.perf_counter()
            entry = cache.store_from_server(plan, host="127.0.0.1", port=server.port)
            save_seconds = time.perf_counter() - started
        finally:
            server.stop()
        version = rdb_version_of_file(entry)
        size_mb = entry.stat().st_size / 1e6
        print(f"  snapshot: SAVE + copy into the cache {save_seconds:.2f} s, {size_mb:,.0f} MB RDB "
              f"(format {version})")
        times = []
        for rep in range(reps):
            target = tmp_dir / f"restore-{rep}"
            started = time.perf_counter()
            cache.restore_to(plan, version, target)
            server = Server.start(binary, target)
            seconds = time.perf_counter() - started
            try:
                load_cpu = server.cpu_seconds()
                found = server.count(workload.kind)
            finally:
                server.stop()
            if found != workload.elements:
                raise SystemExit(f"restore: expected {workload.elements:,}, found {found:,}")
            shutil.rmtree(target)
            times.append(seconds)
            print(f"  rep {rep + 1} restore          {seconds:7.2f} s  server CPU {load_cpu:6.2f} s "
                  f"({load_cpu / seconds:4.0%} of wall)")
        restore = statistics.median(times)
        print(f"  restore {restore:.2f} s vs redline preload {preload_seconds:.2f} s: "
              f"{preload_seconds / restore:.1f}x faster (goal >= 10x)")


def summarize(kind: str, results: list[Result]) -> None:
    by_method: dict[str, list[Result]] = {}
    for result in results:
        by_method.setdefault(result.method, []).append(result)
    medians = {m: statistics.median(r.rate for r in rs) for m, rs in by_method.items()}
    cpu_per_m = {
        m: statistics.median(r.server_cpu / r.elements * 1e6 for r in rs)
        for m, rs in by_method.items()
    }
    ceiling_method = max(("redis-cli --pipe", "raw prebuilt"), key=lambda m: medians[m])
    ceiling = medians[ceiling_method]
    print(f"\n{kind} summary (median of {len(by_method['redline preload'])} reps)")
    print(f"  {'method':17s} {'elements/s':>12s} {'server CPU µs/element':>22s}")
    for method, rate in medians.items():
        print(f"  {method:17s} {rate:12,.0f} {cpu_per_m[method]:22.2f}")
    ratio = medians["redline preload"] / ceiling
    print(f"  redline preload = {ratio:.0%} of the ceiling ({ceiling_method}); goal >= 80%")


def preload_seconds(results: list[Result]) -> float:
    return statistics.median(r.seconds for r in results if r.method == "redline preload")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    parser.add_argument("--geo-points", type=int, default=10_000_000)
    parser.add_argument("--string-keys", type=int, default=1_000_000)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--server", default="/usr/bin/redis-server")
    parser.add_argument("--restore", action="store_true",
                        help="also cache an RDB snapshot and time restoring it")
    parser.add_argument("--restore-only", action="store_true",
                        help="only one preload (timed) and the snapshot restores")
    args = parser.parse_args()
    if args.reps < 1:
        parser.error("--reps must be >= 1")
    print(f"server {args.server}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    workloads = []
    if args.string_keys > 0:
        workloads.append((strings_workload(args.string_keys, args.value_size),
                          f"strings ({args.string_keys:,} SET, {args.value_size} B values)"))
    if args.geo_points > 0:
        workloads.append((geo_workload(args.geo_points, args.seed),
                          f"geo ({args.geo_points:,} points, 1000 per GEOADD)"))
    for workload, title in workloads:
        results = [] if args.restore_only else run_workload(
            workload, reps=args.reps, binary=args.server)
        if results:
            summarize(title, results)
        if args.restore or args.restore_only:
            print(f"\n{title}: snapshot restore")
            seconds = preload_seconds(results) if results else _time_one_preload(workload, args.server)
            run_restore(workload, reps=args.reps, binary=args.server, preload_seconds=seconds)


def _time_one_preload(workload: Workload, binary: str) -> float:
    server = Server.start(binary)
    try:
        started = time.perf_counter()
        workload.redline_load(server.port)
        return time.perf_counter() - started
    finally:
        server.stop()


if __name__ == "__main__":
    main()
