#!/usr/bin/env python3
"""Side by side: memtier_benchmark and redline-load run the same upstream suite arguments.

For a sample of upstream suites that together use every memtier flag the catalogue uses (plus
the cases of issue #23), each tool in turn gets an empty Debian redis-server configured as the
suite says, runs the suite's preload and then its client with the same argv (redline-owned
options such as --out-file dropped, as `redline run` drops them), and the script compares what
the server saw:

- after the preload: the dataset (keys per type, elements per type — string bytes, list/set/
  zset/hash/stream lengths — and the first and last key name) and the requests per command
  (INFO commandstats);
- after the client: the share of each command in the requests, the error replies by type and
  the keyspace hit rate.

A timed run (--test-time) sends a fixed number of requests instead (--timed-requests in all,
default 20,000), so that what each tool sends can be compared exactly; request counts above
--max-requests in all are scaled down for both tools alike (noted in the table).
Random key patterns draw from different generators in the two tools, so their datasets are
compared with a tolerance. memtier_benchmark is not part of redline and is never committed:
build it from source and pass its path. `--io` picks redline-load's I/O path.

With --io-paths the two sides are redline-load's two I/O paths (`--io epoll` and
`--io io_uring`) instead, no memtier needed: the same generator on both, so the datasets, the
requests per command and the error replies must be equal exactly.

    .venv/bin/python scripts/memtier_parity.py --memtier /path/to/memtier_benchmark [--io epoll] \\
        [--suites ../shared/upstream-suites/test-suites] [--only NAME ...] [--markdown out.md]
    .venv/bin/python scripts/memtier_parity.py --io-paths [--only NAME ...]
"""
from __future__ import annotations

import argparse
import hashlib
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from redline.suites import load_test  # noqa: E402
from redline.suites.memtier import without_options  # noqa: E402
from redline.suites.owned import CLIENT_OPTIONS, owned_server_parameter  # noqa: E402
from redline.suites.parallel import is_parallel  # noqa: E402

REDLINE_LOAD = REPO / "bin" / "redline-load"
DEFAULT_SUITES = REPO.parent / "shared" / "upstream-suites" / "test-suites"
# Always in the sample: the suites issue #23 is about.
ISSUE_SUITES = [
    "memtier_benchmark-1key-zset-1M-elements-zcard-pipeline-10",
    "memtier_benchmark-1key-zrank-1M-elements-pipeline-1",
    "memtier_benchmark-1key-zset-250-elements-zadd-new-random-members",
    "memtier_benchmark-10streams-xreadgroup-count-100",
    "memtier_benchmark-playbook-session-storage-1k-sessions",
    "memtier_benchmark-3Mkeys-string-mixed-50-50-with-512B-values-with-expiration-pipeline-10-400_conns",
]
ADMIN_COMMANDS = {"config|resetstat", "config|set", "info", "ping", "flushall"}  # the script's own
# And one suite for each way a preload draws its keys (-n allkeys with P over several
# connections, with two draws per command, with S; a random pattern over many connections).
BEHAVIOUR_SUITES = [
    "memtier_benchmark-25Kkeys-string-get-64KiB",
    "memtier_benchmark-1key-zset-600K-elements-zrangestore-1K-elements",
    "memtier_benchmark-1key-list-1K-elements-sort-numeric-pipeline-10",
    "memtier_benchmark-1key-stream-10K-entries-20-fields-8B-xrevrange-count-100",
    "memtier_benchmark-1key-hash-hscan-1K-fields-100B-values-cursor-count-1000",
]
NEEDS_SETUP = {"cluster-mode": "a cluster", "tls": "TLS certificates"}
LENGTH = {"string": "STRLEN", "list": "LLEN", "set": "SCARD", "zset": "ZCARD", "hash": "HLEN", "stream": "XLEN"}


@dataclass
class Step:
    """One tool invocation and what the server saw after it."""
    exit_code: int
    message: str = ""                                    # last stderr line on failure
    calls: dict[str, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    dataset: dict = field(default_factory=dict)
    hit_rate: float | None = None


@dataclass
class Row:
    suite: str
    phase: str
    verdict: str          # "same", "same (within 2%)", "same data, fewer requests", "different", …
    why: str


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, binary: str, workdir: Path):
        self.port = free_port()
        self.proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(workdir)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.client = redis.Redis(port=self.port, decode_responses=True)
        deadline = time.time() + 10
        while True:
            try:
                self.client.ping()
                return
            except redis.ConnectionError:
                if time.time() > deadline:
                    raise SystemExit(f"redis-server did not start on port {self.port}")
                time.sleep(0.05)

    def reset(self, parameters: dict[str, str]) -> None:
        self.client.flushall()
        for name, value in parameters.items():
            if owned_server_parameter(name) is None:
                try:
                    self.client.config_set(name, str(value).strip('"').strip("'"))
                except redis.ResponseError:
                    pass        # a parameter this server does not know: the same for both tools
        self.client.config_resetstat()

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


def suite_flags(test) -> set[str]:
    invocations = [test.db.preload, *test.clients] if test.db.preload else list(test.clients)
    return {flag for inv in invocations if inv.workload for flag in inv.workload.flags}


def memtier_requests(wl) -> float:
    if wl.requests is None:
        return 0
    per_connection = wl.requests
    if wl.requests_allkeys and is_parallel(wl) and wl.arbitrary_commands:
        per_connection = wl.key_maximum - wl.key_minimum
    return per_connection * wl.connections


def choose_sample(tests: list, max_requests: int) -> list:
    """The issue's suites and the behaviour cases plus, greedily, the cheapest suite that adds a flag not yet covered
    (cost: requests memtier sends), until every flag of the catalogue is covered."""
    by_name = {t.name: t for t in tests}
    chosen = [by_name[name] for name in ISSUE_SUITES + BEHAVIOUR_SUITES if name in by_name]
    covered = set().union(*(suite_flags(t) for t in chosen)) if chosen else set()
    wanted = set().union(*(suite_flags(t) for t in tests))

    def cost(test) -> float:
        preload = test.db.preload.workload if test.db.preload else None
        return memtier_requests(preload) if preload else 0

    while wanted - covered:
        candidates = [t for t in tests if suite_flags(t) - covered and t not in chosen]
        if not candidates:
            break
        best = min(candidates, key=lambda t: (cost(t) > max_requests, -len(suite_flags(t) - covered), cost(t), t.name))
        chosen.append(best)
        covered |= suite_flags(best)
    return chosen


def argv_for(invocation, port: int, args) -> tuple[list[str], str]:
    """The suite's argv for either tool, and what was changed in it."""
    wl = invocation.workload
    argv = without_options(list(invocation.arguments), CLIENT_OPTIONS)
    notes = []
    if wl.test_time is not None:
        # a fixed count instead of a time: what each tool sends is then comparable exactly
        requests = max(2, args.timed_requests // wl.connections)
        if wl.rate_limiting:           # requests per second per connection: about 3 s of them
            requests = min(requests, 3 * wl.rate_limiting)
        argv = without_options(argv, {"test-time"}) + ["-n", str(requests)]
        notes.append(f"-n {requests:,} instead of --test-time {wl.test_time}")
    elif not wl.requests_allkeys and wl.requests and wl.requests * wl.connections > args.max_requests:
        scaled = max(1, args.max_requests // wl.connections)
        argv += ["-n", str(scaled)]
        notes.append(f"-n {scaled:,} instead of {wl.requests:,}")
    return argv + ["-s", "127.0.0.1", "-p", str(port), "--hide-histogram"], "; ".join(notes)


def run_tool(tool: list[str], argv: list[str], server: Server, timeout: float) -> Step:
    try:
        proc = subprocess.run([*tool, *argv], capture_output=True, text=True, errors="replace", timeout=timeout)
    except subprocess.TimeoutExpired:
        return Step(exit_code=-1, message=f"did not finish within {timeout:.0f} s")
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    message = lines[-1] if proc.returncode and lines else ""
    stats = server.client.info("commandstats")
    errors = server.client.info("errorstats")
    keyspace = server.client.info("stats")
    hits, misses = keyspace.get("keyspace_hits", 0), keyspace.get("keyspace_misses", 0)
    return Step(exit_code=proc.returncode, message=message,
                calls={name.removeprefix("cmdstat_"): v["calls"] for name, v in stats.items()
                       if name.removeprefix("cmdstat_") not in ADMIN_COMMANDS},
                errors={name.removeprefix("errorstat_"): v["count"] for name, v in errors.items()},
                hit_rate=hits / (hits + misses) if hits + misses else None)


def digest(server: Server) -> dict:
    """Keys and elements per type (string bytes, collection lengths), the first and last key
    name and a hash of all key names, read with SCAN in pipelined batches (a script over a
    million keys would block)."""
    totals: dict[str, list[int]] = {}
    names: list[str] = []
    every_name: list[str] = []
    for batch in _scan_batches(server.client):
        pipe = server.client.pipeline(transaction=False)
        for key in batch:
            pipe.type(key)
        types = pipe.execute()
        pipe = server.client.pipeline(transaction=False)
        for key, kind in zip(batch, types):
            pipe.execute_command(LENGTH.get(kind, "EXISTS"), key)
        for kind, size in zip(types, pipe.execute()):
            count = totals.setdefault(kind, [0, 0])
            count[0] += 1
            count[1] += size if kind in LENGTH else 0
        names = [min(names + batch), max(names + batch)] if batch else names
        every_name += batch
    out: dict = {"first": names[0] if names else "", "last": names[-1] if names else "",
                 "names": hashlib.sha256("\n".join(sorted(every_name)).encode()).hexdigest()[:16]}
    out.update({kind: (count, size) for kind, (count, size) in totals.items()})
    return out


def _scan_batches(client, count: int = 2000):
    cursor = None
    while cursor != 0:
        cursor, keys = client.scan(cursor or 0, count=count)
        yield keys


def exact(wl) -> bool:
    """Whether a workload's keys and value sizes are determined (no random key pattern, no
    random sizes from --data-size-range): then both tools must build the same dataset."""
    sequential = all(p in "SP" for p in wl.command_key_patterns[: len(wl.commands)])
    sizes_fixed = wl.data_size_range is None or wl.flags.get("data-size-pattern") == "S"
    return sequential and sizes_fixed


def _types(dataset: dict) -> dict[str, tuple[int, int]]:
    return {t: v for t, v in dataset.items() if t not in ("first", "last", "names")}


def _describe(dataset: dict) -> str:
    types = ", ".join(f"{t} {n:,} keys/{s:,}" for t, (n, s) in sorted(_types(dataset).items()))
    return f"{types or 'no keys'} ({dataset['first']}..{dataset['last']})"


def compare_preload(memtier: Step, ours: Step, wl) -> tuple[str, str]:
    if memtier.exit_code and ours.exit_code:
        return "refused by both", f"memtier: {memtier.message}; redline-load: {ours.message}"
    if memtier.exit_code or ours.exit_code:
        return "different", (f"memtier exit {memtier.exit_code} ({memtier.message}), "
                             f"redline-load exit {ours.exit_code} ({ours.message})")
    a, b = memtier.dataset, ours.dataset
    if a != b:
        theirs, mine = _types(a), _types(b)
        if not exact(wl) and set(theirs) == set(mine) and all(_close(theirs[t], mine[t]) for t in theirs):
            return "same (within 2%)", (f"random draws from different generators: memtier {_describe(a)}, "
                                        f"redline-load {_describe(b)}")
        return "different", f"memtier {_describe(a)}; redline-load {_describe(b)}"
    requests, memtier_requests = sum(ours.calls.values()), sum(memtier.calls.values())
    if memtier.calls != ours.calls:
        if requests < memtier_requests and wl.requests_allkeys:
            return "same data, fewer requests", (f"{_describe(a)}; -n allkeys single pass: {requests:,} "
                                                 f"requests, memtier {memtier_requests:,}")
        return "different", f"same data ({_describe(a)}) but requests {ours.calls} vs memtier {memtier.calls}"
    return "same", f"{_describe(a)}; {requests:,} requests"


def _close(a: tuple[int, int], b: tuple[int, int], tolerance: float = 0.02) -> bool:
    return all(abs(x - y) <= tolerance * max(x, y, 1) for x, y in zip(a, b))


def compare_client(memtier: Step, ours: Step, exact_counts: bool) -> tuple[str, str]:
    if memtier.exit_code and ours.exit_code:
        return "refused by both", f"memtier: {memtier.message}; redline-load: {ours.message}"
    if memtier.exit_code or ours.exit_code:
        return "different", f"memtier exit {memtier.exit_code} ({memtier.message}), redline-load exit {ours.exit_code} ({ours.message})"
    share = {name: _shares(step.calls) for name, step in (("memtier", memtier), ("redline-load", ours))}
    mix = ", ".join(f"{c} {s:.1%}" for c, s in sorted(share["memtier"].items()))
    if set(share["memtier"]) != set(share["redline-load"]) or any(
            abs(share["memtier"][c] - share["redline-load"][c]) > 0.02 for c in share["memtier"]):
        return "different", f"command mix memtier {share['memtier']}, redline-load {share['redline-load']}"
    if set(memtier.errors) != set(ours.errors):
        return "different", f"error replies memtier {memtier.errors}, redline-load {ours.errors}"
    if exact_counts and memtier.calls != ours.calls:
        return "different", f"requests memtier {memtier.calls}, redline-load {ours.calls}"
    hits = ""
    if memtier.hit_rate is not None and ours.hit_rate is not None:
        if abs(memtier.hit_rate - ours.hit_rate) > 0.03:
            return "different", f"hit rate memtier {memtier.hit_rate:.1%}, redline-load {ours.hit_rate:.1%}"
        hits = f"; hit rate {memtier.hit_rate:.0%}"
    errors = f"; errors {sorted(memtier.errors)}" if memtier.errors else ""
    return "same", f"mix {mix}{hits}{errors}"


def compare_paths(epoll: Step, uring: Step) -> tuple[str, str]:
    """redline-load's two I/O paths: one generator, so everything the server saw is equal."""
    seen = {name: (step.exit_code, step.dataset, step.calls, step.errors) for name, step in
            (("epoll", epoll), ("io_uring", uring))}
    if seen["epoll"] != seen["io_uring"]:
        return "different", "; ".join(f"{name}: exit {code}, {_describe(data) if data else 'no dataset'}, "
                                      f"requests {calls}, errors {errors}"
                                      for name, (code, data, calls, errors) in seen.items())
    if epoll.exit_code:
        return "refused by both", epoll.message
    data = f"{_describe(epoll.dataset)}; " if epoll.dataset else ""
    return "same", f"{data}{sum(epoll.calls.values()):,} requests {dict(sorted(epoll.calls.items()))}"


def _shares(calls: dict[str, int]) -> dict[str, float]:
    total = sum(calls.values()) or 1
    return {c: n / total for c, n in calls.items()}


def check_suite(test, server: Server, args) -> list[Row]:
    for flag, needs in NEEDS_SETUP.items():
        if flag in suite_flags(test):
            return [Row(test.name, "all", "skipped", f"--{flag} needs {needs}")]
    rows, steps = [], {}
    if args.io_paths:
        sides = [(path, [str(REDLINE_LOAD), "--io", path]) for path in ("epoll", "io_uring")]
    else:
        sides = [("memtier", [args.memtier]), ("redline-load", [str(REDLINE_LOAD), "--io", args.io])]
    for tool_name, tool in sides:
        server.reset(test.db.configuration_parameters)
        results = {}
        if test.db.preload and test.db.preload.workload:
            argv, note = argv_for(test.db.preload, server.port, args)
            step = run_tool(tool, argv, server, args.timeout)
            if step.exit_code == 0:
                step.dataset = digest(server)
            results["preload"] = (step, note)
        for command in test.db.init_commands:
            try:
                server.client.execute_command(*command)
            except redis.ResponseError:
                pass
        server.client.config_resetstat()
        client = test.client
        if client.workload:
            argv, note = argv_for(client, server.port, args)
            step = run_tool(tool, argv, server, args.timeout)
            if args.io_paths and step.exit_code == 0:     # one generator: what the client wrote is equal too
                step.dataset = digest(server)
            results["client"] = (step, note)
        steps[tool_name] = results
    (first, _), (second, _) = sides
    for phase in ("preload", "client"):
        if phase not in steps[first]:
            continue
        (memtier, note), (ours, _) = steps[first][phase], steps[second][phase]
        wl = (test.db.preload if phase == "preload" else test.client).workload
        if args.io_paths:
            verdict, why = compare_paths(memtier, ours)
        elif phase == "preload":
            verdict, why = compare_preload(memtier, ours, wl)
        else:
            verdict, why = compare_client(memtier, ours, exact_counts=True)
        rows.append(Row(test.name, phase, verdict, why + (f" [{note}]" if note else "")))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memtier", help="path of a memtier_benchmark binary")
    parser.add_argument("--io", choices=("auto", "io_uring", "epoll"), default="auto",
                        help="redline-load's I/O path beside memtier (its --io)")
    parser.add_argument("--io-paths", action="store_true",
                        help="compare redline-load's two I/O paths with each other instead of with memtier")
    parser.add_argument("--redis-server", default="/usr/bin/redis-server")
    parser.add_argument("--suites", type=Path, default=DEFAULT_SUITES)
    parser.add_argument("--only", nargs="*", help="suite names to check instead of the sample")
    parser.add_argument("--timed-requests", type=int, default=20_000,
                        help="a timed run (--test-time) sends this many requests in all instead")
    parser.add_argument("--max-requests", type=int, default=2_000_000,
                        help="scale request counts above this (in all) down, for both tools")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per tool run")
    parser.add_argument("--markdown", type=Path, help="also write the result table here")
    args = parser.parse_args()
    if not args.io_paths and not (args.memtier and Path(args.memtier).is_file()):
        parser.error(f"--memtier {args.memtier}: no such file (or --io-paths)")
    tests = []
    for path in sorted(args.suites.glob("*.yml")):
        try:
            tests.append(load_test(path))
        except Exception:       # not a test (defaults.yml) or unreadable: validate reports those
            continue
    sample = [t for t in tests if t.name in set(args.only)] if args.only else choose_sample(tests, args.max_requests)
    flags = set().union(*(suite_flags(t) for t in sample))
    print(f"{len(sample)} suites, {len(flags)} flags: {' '.join(sorted('--' + f for f in flags))}", file=sys.stderr)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as workdir:
        server = Server(args.redis_server, Path(workdir))
        try:
            for index, test in enumerate(sample, 1):
                print(f"[{index}/{len(sample)}] {test.name}", file=sys.stderr, flush=True)
                for row in check_suite(test, server, args):
                    rows.append(row)
                    print(f"    {row.phase}: {row.verdict}: {row.why}", file=sys.stderr, flush=True)
        finally:
            server.stop()
    table = ["| suite | phase | result | why |", "|---|---|---|---|"]
    table += [f"| {r.suite.removeprefix('memtier_benchmark-')} | {r.phase} | {r.verdict} | {r.why} |" for r in rows]
    print("\n".join(table))
    if args.markdown:
        args.markdown.write_text("\n".join(table) + "\n")
    return 1 if any(r.verdict == "different" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
