#!/usr/bin/env python3
"""Client-CPU benchmark of redline-load (both I/O paths) against redis-benchmark and memtier_benchmark.

One Debian redis-server pinned to core 0, the load generator pinned to core 1, 50
connections on one client thread, 100-byte values, SET and GET at pipeline 1, 10 and 100.
redline-load runs once per I/O path (--io io_uring, --io epoll). Runs are interleaved (the
tool order rotates by one every round) so that drift on a shared machine hits every tool
alike. Client CPU is the tool process's own user+system time (getrusage of the child: every
thread of it, io_uring's kernel workers included); server CPU is redis-server's over the same
run (/proc). Prints two markdown tables: ops per client CPU-second per cell, with each tool's
ratio to memtier_benchmark and to redis-benchmark; and the request rate at pipeline 1 with how
busy the client's and the server's cores were (which of them bounded it).

    .venv/bin/python scripts/bench_loadgen.py --duration 10 --rounds 3

memtier_benchmark is used when it is on PATH (or given with --memtier).
"""
from __future__ import annotations

import argparse
import csv
import io
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from redline.load.report import LoadReport  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
REDLINE_LOAD = REPO / "bin" / "redline-load"
KEY_MAX = 100_000
VALUE_SIZE = 100
CONNECTIONS = 50


@dataclass
class Cell:
    command: str      # "set" or "get"
    pipeline: int


@dataclass
class Sample:
    tool: str
    ops: int
    seconds: float
    cpu_s: float
    p50_ms: float | None
    p99_ms: float | None
    server_cpu_s: float = float("nan")

    @property
    def ops_per_sec(self) -> float:
        return self.ops / self.seconds

    @property
    def ops_per_cpu_s(self) -> float:
        return self.ops / self.cpu_s if self.cpu_s > 0 else float("nan")


@dataclass
class Setup:
    port: int
    duration: int
    client_core: int
    workdir: Path
    memtier: str | None
    redis_benchmark: str | None
    redline: Path = REDLINE_LOAD
    server_pid: int = 0
    estimates: dict = field(default_factory=dict)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(port: int, core: int) -> subprocess.Popen:
    proc = subprocess.Popen(["taskset", "-c", str(core), "/usr/bin/redis-server", "--port", str(port),
                             "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit(f"redis-server did not start on port {port}")


def run_measured(argv: list[str], timeout: float) -> tuple[subprocess.CompletedProcess, float]:
    """Run argv; return the result and the child's CPU seconds (user + system)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[0:4]}... failed ({proc.returncode}): {proc.stderr[-1000:]}")
    return proc, cpu


def pinned(setup: Setup, argv: list[str]) -> list[str]:
    return ["taskset", "-c", str(setup.client_core), *argv]


def memtier_style_args(setup: Setup, cell: Cell) -> list[str]:
    ratio = "1:0" if cell.command == "set" else "0:1"
    return ["-s", "127.0.0.1", "-p", str(setup.port), "-c", str(CONNECTIONS), "-t", "1",
            "--pipeline", str(cell.pipeline), "--test-time", str(setup.duration), "--ratio", ratio,
            "-d", str(VALUE_SIZE), "--key-minimum", "1", "--key-maximum", str(KEY_MAX),
            "--key-pattern", "R:R", "--hide-histogram", "--distinct-client-seed"]


def sample_from_memtier_json(tool: str, path: Path, cpu: float) -> Sample:
    report = LoadReport.read(path)     # memtier_benchmark's file reads as redline-load's does
    return Sample(tool=tool, ops=report.count, seconds=report.runtime_s, cpu_s=cpu,
                  p50_ms=report.percentile_ms(50), p99_ms=report.percentile_ms(99))


def server_cpu_s(pid: int) -> float:
    """redis-server's user + system CPU seconds so far (/proc/PID/stat, every thread)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_redline(setup: Setup, cell: Cell, io: str) -> Sample:
    out = setup.workdir / "redline.json"
    argv = pinned(setup, [str(setup.redline), "--io", io, *memtier_style_args(setup, cell),
                          "--json-out-file", str(out)])
    _, cpu = run_measured(argv, timeout=setup.duration * 3 + 30)
    path = json.loads(out.read_text())["redline"]["io"]["path"]
    if path != io:
        raise RuntimeError(f"redline-load --io {io} ran on {path}")
    return sample_from_memtier_json(f"redline-load {io}", out, cpu)


def run_memtier(setup: Setup, cell: Cell) -> Sample:
    out = setup.workdir / "memtier.json"
    argv = pinned(setup, [setup.memtier, *memtier_style_args(setup, cell), "--json-out-file", str(out)])
    _, cpu = run_measured(argv, timeout=setup.duration * 3 + 30)
    return sample_from_memtier_json("memtier_benchmark", out, cpu)


def run_redis_benchmark(setup: Setup, cell: Cell) -> Sample:
    # redis-benchmark has no timed mode: size the request count from the last known rate.
    rate = setup.estimates.get((cell.command, cell.pipeline), 50_000 * cell.pipeline ** 0.5)
    requests = max(10_000, int(rate * setup.duration))
    argv = pinned(setup, [setup.redis_benchmark, "-h", "127.0.0.1", "-p", str(setup.port),
                          "-c", str(CONNECTIONS), "-n", str(requests), "-P", str(cell.pipeline),
                          "-d", str(VALUE_SIZE), "-r", str(KEY_MAX), "-t", cell.command, "--csv"])
    t0 = time.monotonic()
    proc, cpu = run_measured(argv, timeout=setup.duration * 6 + 60)
    elapsed = time.monotonic() - t0
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    row = rows[-1]
    rps = float(row["rps"])
    return Sample(tool="redis-benchmark", ops=requests, seconds=requests / rps if rps else elapsed,
                  cpu_s=cpu, p50_ms=float(row.get("p50_latency_ms") or "nan"),
                  p99_ms=float(row.get("p99_latency_ms") or "nan"))


RUNNERS = {"redline-load io_uring": lambda setup, cell: run_redline(setup, cell, "io_uring"),
           "redline-load epoll": lambda setup, cell: run_redline(setup, cell, "epoll"),
           "redis-benchmark": run_redis_benchmark, "memtier_benchmark": run_memtier}


def run_sample(setup: Setup, tool: str, cell: Cell) -> Sample:
    """One run of `tool`, with the server's CPU over it."""
    before = server_cpu_s(setup.server_pid)
    sample = RUNNERS[tool](setup, cell)
    sample.server_cpu_s = server_cpu_s(setup.server_pid) - before
    return sample


def preload(setup: Setup) -> None:
    subprocess.run([str(setup.redline), "-s", "127.0.0.1", "-p", str(setup.port), "-n", "allkeys",
                    "--key-pattern", "P:P", "--ratio", "1:0", "-d", str(VALUE_SIZE), "--key-minimum", "1",
                    "--key-maximum", str(KEY_MAX), "-c", "10", "-t", "1", "--pipeline", "50",
                    "--hide-histogram"], check=True, capture_output=True, timeout=300)


def fmt(x: float | None, digits: int = 0) -> str:
    if x is None or x != x:
        return "-"
    return f"{x:,.{digits}f}"


def median_sample(samples: list[Sample]) -> dict:
    def med(values):
        values = [v for v in values if v is not None and v == v]
        return statistics.median(values) if values else None
    return {"ops_per_sec": med([s.ops_per_sec for s in samples]),
            "cpu_s": med([s.cpu_s for s in samples]),
            "ops_per_cpu_s": med([s.ops_per_cpu_s for s in samples]),
            "p50": med([s.p50_ms for s in samples]), "p99": med([s.p99_ms for s in samples]),
            "client_busy": med([s.cpu_s / s.seconds for s in samples]),
            "server_busy": med([s.server_cpu_s / s.seconds for s in samples]),
            "n": len(samples)}


def ratio(samples: list[Sample], base: list[Sample] | None) -> str:
    """Median over rounds of this tool's ops per client CPU-second over `base`'s in the same
    round (a ratio measured side by side), or '-'."""
    if not base:
        return "-"
    ratios = [s.ops_per_cpu_s / b.ops_per_cpu_s for s, b in zip(samples, base) if b.ops_per_cpu_s > 0]
    return f"{statistics.median(ratios):.2f}x" if ratios else "-"


def markdown(results: dict, tools: list[str]) -> str:
    lines = ["| command | pipeline | tool | ops/sec | client CPU s | ops per client CPU-s | vs memtier | "
             "vs redis-benchmark | p50 ms | p99 ms |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for (command, pipeline), per_tool in results.items():
        for tool in tools:
            if tool not in per_tool:
                continue
            m = median_sample(per_tool[tool])
            lines.append(f"| {command.upper()} | {pipeline} | {tool} | {fmt(m['ops_per_sec'])} | "
                         f"{fmt(m['cpu_s'], 2)} | {fmt(m['ops_per_cpu_s'])} | "
                         f"{ratio(per_tool[tool], per_tool.get('memtier_benchmark'))} | "
                         f"{ratio(per_tool[tool], per_tool.get('redis-benchmark'))} | "
                         f"{fmt(m['p50'], 3)} | {fmt(m['p99'], 3)} |")
    return "\n".join(lines)


def rate_table(results: dict, tools: list[str]) -> str:
    """Pipeline 1 with 50 connections: the request rate reached, how busy the client's core and
    the server's core were, and so which of them bounded the rate (90% busy or more)."""
    lines = ["| command | tool | ops/sec at pipeline 1 | client core busy | server core busy | bounded by |",
             "|---|---|---:|---:|---:|---|"]
    for (command, pipeline), per_tool in results.items():
        if pipeline != 1:
            continue
        for tool in tools:
            if tool not in per_tool:
                continue
            m = median_sample(per_tool[tool])
            bound = [name for name, busy in (("client", m["client_busy"]), ("server", m["server_busy"]))
                     if busy is not None and busy >= 0.9]
            lines.append(f"| {command.upper()} | {tool} | {fmt(m['ops_per_sec'])} | {fmt(100 * m['client_busy'])}% | "
                         f"{fmt(100 * m['server_busy'])}% | {' and '.join(bound) or 'neither (a shared machine)'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=int, default=10, help="seconds per run (default 10)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    ap.add_argument("--pipelines", default="1,10,100")
    ap.add_argument("--commands", default="set,get")
    ap.add_argument("--server-core", type=int, default=0)
    ap.add_argument("--client-core", type=int, default=1)
    ap.add_argument("--memtier", default=shutil.which("memtier_benchmark"),
                    help="memtier_benchmark binary (default: from PATH)")
    ap.add_argument("--redline-load", type=Path, default=REDLINE_LOAD,
                    help=f"redline-load binary (default {REDLINE_LOAD})")
    ap.add_argument("--out", type=Path, help="also write the markdown table here")
    args = ap.parse_args(argv)

    if not args.redline_load.exists():
        print(f"error: {args.redline_load} not found (run setup.sh)", file=sys.stderr)
        return 2
    pipelines = [int(p) for p in args.pipelines.split(",")]
    commands = [c.strip().lower() for c in args.commands.split(",")]
    for c in commands:
        if c not in ("set", "get"):
            print(f"error: --commands: '{c}' is not set or get", file=sys.stderr)
            return 2
    tools = ["redline-load io_uring", "redline-load epoll"]
    rb = shutil.which("redis-benchmark")
    if rb:
        tools.append("redis-benchmark")
    if args.memtier:
        tools.append("memtier_benchmark")

    port = free_port()
    server = start_server(port, args.server_core)
    results: dict = {}
    try:
        with tempfile.TemporaryDirectory(prefix="bench-loadgen-") as tmp:
            setup = Setup(port=port, duration=args.duration, client_core=args.client_core,
                          workdir=Path(tmp), memtier=args.memtier, redis_benchmark=rb,
                          redline=args.redline_load.resolve(), server_pid=server.pid)
            preload(setup)
            for rnd in range(args.rounds):
                order = tools[rnd % len(tools):] + tools[:rnd % len(tools)]
                for pipeline in pipelines:
                    for command in commands:
                        cell = Cell(command=command, pipeline=pipeline)
                        for tool in order:
                            s = run_sample(setup, tool, cell)
                            setup.estimates[(command, pipeline)] = s.ops_per_sec
                            results.setdefault((command, pipeline), {}).setdefault(tool, []).append(s)
                            print(f"round {rnd + 1} {command} p{pipeline} {tool}: {s.ops_per_sec:,.0f} ops/s, "
                                  f"{s.cpu_s:.2f} CPU s, {s.ops_per_cpu_s:,.0f} ops/CPU-s",
                                  file=sys.stderr, flush=True)
    finally:
        server.kill()
        server.wait()
    table = markdown(results, tools)
    if 1 in pipelines:
        table += "\n\n" + rate_table(results, tools)
    print(table)
    if args.out:
        args.out.write_text(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
