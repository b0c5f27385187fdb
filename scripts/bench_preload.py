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

    .venv/bin/python scripts/bench_preload.py --geo-points 10000000 --string-keys 1000000
    .venv/bin/python scripts/bench_preload.py --geo-points 1000000 --string-keys 200000 --reps 1
"""

from __future__ import annotations

import argparse
import os
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
from redline.datasets.resp import Batch, set_batches  # noqa: E402

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Server:
    process: subprocess.Popen
    port: int

    @classmethod
    def start(cls, binary: str) -> "Server":
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        process = subprocess.Popen(
            [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
        )
        client = redis.Redis(port=port)
        for _ in range(500):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.02)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    parser.add_argument("--geo-points", type=int, default=10_000_000)
    parser.add_argument("--string-keys", type=int, default=1_000_000)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--server", default="/usr/bin/redis-server")
    args = parser.parse_args()
    if args.reps < 1:
        parser.error("--reps must be >= 1")
    print(f"server {args.server}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    if args.string_keys > 0:
        results = run_workload(strings_workload(args.string_keys, args.value_size),
                               reps=args.reps, binary=args.server)
        summarize(f"strings ({args.string_keys:,} SET, {args.value_size} B values)", results)
    if args.geo_points > 0:
        results = run_workload(geo_workload(args.geo_points, args.seed), reps=args.reps,
                               binary=args.server)
        summarize(f"geo ({args.geo_points:,} points, 1000 per GEOADD)", results)


if __name__ == "__main__":
    main()
