"""How a core's speed moves over time, and for how long it stays where it went: the steadiness
probe's loop (redline/system/steadiness.py, slices of equal work) run for --seconds on each core
at once, its slices' speed (work per CPU second) binned every --bin seconds. Prints per core the
bins' speed relative to their median (10th, 50th and 90th percentiles), the autocorrelation of the
bins at lags from 0.1 s to 16 s (how long a speed persists: a timed run and its partner further
apart than the lag where it reaches 0 meet independent speeds), and the correlation of the cores'
bins with each other (noise common to the cores). Used in docs/statistics.md ("Duets").

    .venv/bin/python scripts/core_speed_over_time.py --cores 0 1 --seconds 60
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from redline.system.pinning import pinned  # noqa: E402

LAGS_S = (0.1, 0.2, 0.5, 1, 2, 4, 8, 16)


def speeds(cpu_s: list[float], wall_s: list[float], bin_s: float) -> np.ndarray:
    """Median slice speed per `bin_s` of wall time, relative to the median bin."""
    ends = np.cumsum(wall_s)
    speed = 1 / np.asarray(cpu_s)
    bins = (ends // bin_s).astype(int)
    series = np.array([np.median(speed[bins == b]) for b in range(bins.max() + 1) if (bins == b).any()])
    return series / np.median(series)


def autocorrelation(series: np.ndarray, lag: int) -> float | None:
    if lag < 1 or lag >= len(series) - 2:
        return None
    return float(np.corrcoef(series[:-lag], series[lag:])[0, 1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cores", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--bin", type=float, default=0.1, help="seconds per bin (default 0.1)")
    args = parser.parse_args()
    children = {core: subprocess.Popen(pinned([sys.executable, "-m", "redline.system.steadiness", "--seconds",
                                               str(args.seconds)], (core,)), stdout=subprocess.PIPE)
                for core in args.cores}
    series = {}
    for core, child in children.items():
        out, _ = child.communicate()
        slices = json.loads(out)
        cpu, wall = slices["cpu_s"], slices["wall_s"]
        series[core] = speeds(cpu, wall, args.bin)
        p10, p50, p90 = np.percentile(series[core], [10, 50, 90])
        print(f"core {core}: {len(cpu)} slices, share {sum(cpu) / sum(wall):.2f}; speed per {args.bin:g} s "
              f"relative to the median: p10 {p10:.2f}, p50 {p50:.2f}, p90 {p90:.2f} (p90/p10 {p90 / p10:.2f})")
        lags = [(lag, autocorrelation(series[core], round(lag / args.bin))) for lag in LAGS_S]
        print("  autocorrelation: " + ", ".join(f"{lag:g} s {rho:+.2f}" for lag, rho in lags if rho is not None))
    if len(series) >= 2:
        first, second = list(series.values())[:2]
        n = min(len(first), len(second))
        print(f"correlation of cores {args.cores[0]} and {args.cores[1]} bin by bin: "
              f"{np.corrcoef(first[:n], second[:n])[0, 1]:+.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
