"""How spread out are a store's timed runs, and could anything have told in advance? Per test and
side, the runs' spread (coefficient of variation) of

* server CPU per operation, the metric a timed verdict decides on by default;
* throughput summarised by each run's mean (what redline uses) and by its best second (the
  fastest of its per-second throughputs, as a minimum-of-times estimator would take it);

how much pairing helps: the standard deviation of the pairs' log ratios of server CPU per operation
against that of two independent runs (1: pairing cancels nothing; 0: everything), and the
correlation of a pair's two runs; beside the steadiness probe the test's runs carry (redline/system/steadiness.py: taken as the
test's first timed run began): its widest spread over the cores, its lowest share, its fewest
slices. The summary gives the ranges, and the rank correlation (Spearman) of each probe reading
with the runs' spread of server CPU per operation over the tests that carry a probe.

    .venv/bin/python scripts/timed_run_spread.py STORE.db [--min-runs 5]

Prints one line per test and session with at least --min-runs ok runs on each side. Used in
docs/statistics.md ("How steady the machine was") on the catalogue stores in measurements/
(unpacked with xz -dk)."""

from __future__ import annotations

import argparse
import json
import math
import sqlite3
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from redline.system.steadiness import Steadiness  # noqa: E402


def spread(values: list[float]) -> float:
    return statistics.stdev(values) / statistics.mean(values)


def ranks(values: list[float]) -> list[float]:
    order = sorted(range(len(values)), key=values.__getitem__)
    result = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            result[order[k]] = (i + j) / 2 + 1          # ties share their mean rank
        i = j + 1
    return result


def spearman(xs: list[float], ys: list[float]) -> float | None:
    if len(xs) < 3:
        return None
    rx, ry = ranks(xs), ranks(ys)
    if statistics.pstdev(rx) == 0 or statistics.pstdev(ry) == 0:
        return None
    return statistics.correlation(rx, ry)


def probe_in(facts: str | None) -> Steadiness | None:
    try:
        document = json.loads(facts or "{}")
    except ValueError:
        return None
    machine = document.get("machine") if isinstance(document, dict) else None
    return Steadiness.from_json(machine.get("steadiness")) if isinstance(machine, dict) else None


class TimedTest:
    """One test's timed runs in one session: per side, (mean ops/s, best second, server CPU/op)."""

    def __init__(self):
        self.sides: dict[str, list[tuple[float, float, float | None]]] = defaultdict(list)
        self.cpu_by_index: dict[str, dict[int, float]] = defaultdict(dict)
        self.probe: Steadiness | None = None

    def pairing(self) -> tuple[float, float] | None:
        """(sd of the pairs' log ratios ÷ sd of independent runs' log ratios, correlation of a pair's
        runs) of server CPU per op, over the run indexes both sides have."""
        base, comp = self.cpu_by_index.get("baseline", {}), self.cpu_by_index.get("comparison", {})
        both = sorted(set(base) & set(comp))
        if len(both) < 3:
            return None
        a, b = [math.log(base[i]) for i in both], [math.log(comp[i]) for i in both]
        independent = math.sqrt(statistics.variance(a) + statistics.variance(b))
        if independent == 0 or statistics.pstdev(a) == 0 or statistics.pstdev(b) == 0:
            return None
        return statistics.stdev([y - x for x, y in zip(a, b)]) / independent, statistics.correlation(a, b)

    def complete(self, min_runs: int) -> bool:
        return set(self.sides) == {"baseline", "comparison"} and min(len(v) for v in self.sides.values()) >= min_runs

    def spread_of(self, column: int) -> float | None:
        per_side = []
        for runs in self.sides.values():
            values = [run[column] for run in runs if run[column] is not None]
            if len(values) < 2 or statistics.mean(values) <= 0:
                return None
            per_side.append(spread(values))
        return statistics.mean(per_side)


def load(db: sqlite3.Connection) -> dict[tuple[int, str], TimedTest]:
    seconds: dict[int, list[float]] = defaultdict(list)
    for run_id, value in db.execute("SELECT run_id, value FROM series WHERE name = 'ops' ORDER BY run_id, second"):
        seconds[run_id].append(value)
    cpu = dict(db.execute("SELECT run_id, value FROM metrics WHERE name = 'server_cpu_us_per_op'"))
    tests: dict[tuple[int, str], TimedTest] = defaultdict(TimedTest)
    query = ("SELECT r.id, r.test, r.side, r.session_id, r.run_index, r.facts, m.value FROM runs r "
             "JOIN metrics m ON m.run_id = r.id WHERE r.purpose = 'measure' AND r.status = 'ok' AND m.name = 'ops_per_sec'")
    for run_id, test, side, session, index, facts, mean in db.execute(query):
        if len(seconds[run_id]) >= 2:                    # timed runs only: counted runs have no per-second series
            timed = tests[(session, test)]
            timed.sides[side].append((mean, max(seconds[run_id]), cpu.get(run_id)))
            if cpu.get(run_id):
                timed.cpu_by_index[side][index] = cpu[run_id]
            timed.probe = timed.probe or probe_in(facts)
    return tests


def describe_range(name: str, values: list[float]) -> str:
    return f"{name} {min(values):.1%}-{max(values):.1%} (median {statistics.median(values):.1%})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("store")
    parser.add_argument("--min-runs", type=int, default=5)
    args = parser.parse_args()
    db = sqlite3.connect(f"file:{args.store}?mode=ro", uri=True)
    by_mean, by_best, by_cpu, probed, pairings = [], [], [], [], []
    for (session, test), timed in sorted(load(db).items()):
        if not timed.complete(args.min_runs):
            continue
        mean_cv, best_cv, cpu_cv = timed.spread_of(0), timed.spread_of(1), timed.spread_of(2)
        by_mean.append(mean_cv)
        by_best.append(best_cv)
        line = f"session {session} {test}: throughput {mean_cv:.1%} by mean, {best_cv:.1%} by best second"
        if cpu_cv is not None:
            by_cpu.append(cpu_cv)
            line += f"; server CPU/op {cpu_cv:.1%}"
        pairing = timed.pairing()
        if pairing is not None:
            pairings.append(pairing)
            line += f"; pairs {pairing[0]:.2f} of independent runs' spread (correlation {pairing[1]:+.2f})"
        if timed.probe is not None:
            cores = timed.probe.cores
            reading = (timed.probe.spread, min(c.share for c in cores), min(c.slices for c in cores))
            line += f"; probe spread {reading[0]:.2f}x, share {reading[1]:.2f}, slices {reading[2]}"
            if cpu_cv is not None:
                probed.append((*reading, cpu_cv))
        print(line)
    if not by_mean:
        print(f"no test has {args.min_runs} timed runs on each side")
        return 0
    print(f"{len(by_mean)} tests, runs' spread: " + "; ".join(
        [describe_range("throughput by mean", by_mean), describe_range("by best second", by_best)]
        + ([describe_range("server CPU/op", by_cpu)] if by_cpu else [])))
    if pairings:
        print(f"{len(pairings)} tests with pairs: the pairs' log ratios spread {statistics.median(p[0] for p in pairings):.2f} "
              f"of what independent runs would (median), a pair's runs correlated "
              f"{statistics.median(p[1] for p in pairings):+.2f} (median)")
    if probed:
        columns = list(zip(*probed))
        correlations = [spearman(list(columns[i]), list(columns[3])) for i in range(3)]
        print(f"{len(probed)} tests carry a probe; rank correlation with the runs' spread of server CPU/op: "
              + ", ".join(f"{name} {'n/a' if rho is None else f'{rho:+.2f}'}"
                          for name, rho in zip(("probe spread", "share", "slices"), correlations)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
