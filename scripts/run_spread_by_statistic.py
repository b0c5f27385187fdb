"""Would a robust per-run statistic narrow timed intervals on an unsteady machine? Reads a store's
timed runs and, per test and side, compares the runs' spread (coefficient of variation) when each
run is summarised by its mean throughput (what redline uses) and by its best second (the fastest
of its per-second throughputs, as a minimum-of-times estimator would take it).

    .venv/bin/python scripts/run_spread_by_statistic.py STORE.db [--min-runs 5]

Prints one line per test and session with at least --min-runs ok runs on each side, then the
range of both spreads. Used in docs/statistics.md ("How steady the machine was") on the
catalogue A/B's store (measurements/catalogue-ab/gate.db.xz, unpacked with xz -dk)."""

from __future__ import annotations

import argparse
import sqlite3
import statistics
from collections import defaultdict


def spread(values: list[float]) -> float:
    return statistics.stdev(values) / statistics.mean(values)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("store")
    parser.add_argument("--min-runs", type=int, default=5)
    args = parser.parse_args()
    db = sqlite3.connect(f"file:{args.store}?mode=ro", uri=True)
    seconds: dict[int, list[float]] = defaultdict(list)
    for run_id, value in db.execute("SELECT run_id, value FROM series WHERE name = 'ops' ORDER BY run_id, second"):
        seconds[run_id].append(value)
    runs: dict[tuple, dict[str, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
    query = ("SELECT r.id, r.test, r.side, r.session_id, m.value FROM runs r JOIN metrics m ON m.run_id = r.id "
             "WHERE r.purpose = 'measure' AND r.status = 'ok' AND m.name = 'ops_per_sec'")
    for run_id, test, side, session, mean in db.execute(query):
        if len(seconds[run_id]) >= 2:                    # timed runs only: counted runs have no per-second series
            runs[(session, test)][side].append((mean, max(seconds[run_id])))
    by_mean, by_best = [], []
    for (session, test), sides in sorted(runs.items()):
        if set(sides) != {"baseline", "comparison"} or min(len(v) for v in sides.values()) < args.min_runs:
            continue
        mean_cv = statistics.mean(spread([m for m, _ in v]) for v in sides.values())
        best_cv = statistics.mean(spread([b for _, b in v]) for v in sides.values())
        by_mean.append(mean_cv)
        by_best.append(best_cv)
        print(f"session {session} {test}: runs' spread {mean_cv:.1%} by mean, {best_cv:.1%} by best second")
    if by_mean:
        print(f"{len(by_mean)} tests: by mean {min(by_mean):.1%}-{max(by_mean):.1%} (median "
              f"{statistics.median(by_mean):.1%}), by best second {min(by_best):.1%}-{max(by_best):.1%} "
              f"(median {statistics.median(by_best):.1%})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
