"""False alarms and power of redline's change points on simulated histories (docs/history.md).

    .venv/bin/python experiments/changepoint/simulate.py [SEEDS]

The noise model is tests/history_sim.py's (run noise 3% unless stated, session drift). Every scenario is also given, as one value per
session (the median of its runs), to the E-Divisive reference that redline used before
(experiments/changepoint/edivisive.py, Otava-style, p <= 0.001, 3 points a side).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent.parent / "tests")]
from edivisive import detect_change_points as edivisive  # noqa: E402
from history_sim import Scenario, simulate  # noqa: E402

from redline.analysis.changepoint import detect_change_points  # noqa: E402


def score(found: list[int], steps: dict[int, float]) -> tuple[bool, bool]:
    """(exactly the true change points, any change point at all)."""
    return sorted(found) == sorted(steps), bool(found)


def run(scenarios: list[Scenario], seeds: int) -> None:
    print(f"{'scenario':58} {'exact':>9} {'any':>9} | {'E-Div exact':>11} {'any':>5}  s/series")
    for s in scenarios:
        exact = anything = ed_exact = ed_any = 0
        started = time.perf_counter()
        for seed in range(seeds):
            sessions = simulate(s, seed)
            e, a = score([c.index for c in detect_change_points(sessions)], s.steps)
            exact += e
            anything += a
            medians = [float(np.median(x)) for x in sessions]
            e, a = score([c.index for c in edivisive(medians, seed=seed)] if len(medians) >= 6 else [], s.steps)
            ed_exact += e
            ed_any += a
        per = (time.perf_counter() - started) / seeds
        print(f"{s.name:58} {exact:>4}/{seeds:<4} {anything:>4}/{seeds:<4} | {ed_exact:>6}/{seeds:<4} "
              f"{ed_any:>5}  {per:.3f}", flush=True)


THREE_STEPS = {3: 1 / 1.5, 5: 1 / 1.2, 8: 1 / 1.6}   # the GEOSEARCH series, 3 runs a session
SCENARIOS = [
    Scenario("3 steps 1.2-1.6x, 11x3 runs, 3% runs, no drift", 11, 3, THREE_STEPS),
    Scenario("3 steps, 11x3, 3% runs, drift 2%", 11, 3, THREE_STEPS, between=0.02),
    Scenario("3 steps, 11x3, 3% runs, drift 3% AR 0.5", 11, 3, THREE_STEPS, between=0.03, phi=0.5),
    Scenario("3 steps, 11x3, heavy-tailed runs, drift 2%", 11, 3, THREE_STEPS, between=0.02, heavy=True),
    Scenario("2 steps 1.4x 2.0x, 11x2 runs, drift 2%", 11, 2, {4: 1 / 1.4, 7: 1 / 2.0}, between=0.02),
    Scenario("flat 50x3, 3% runs, no drift", 50, 3, {}),
    Scenario("flat 50x3, 3% runs, drift 2%", 50, 3, {}, between=0.02),
    Scenario("flat 50x3, 3% runs, drift 3%", 50, 3, {}, between=0.03),
    Scenario("flat 50x3, 3% runs, drift 3% AR 0.5", 50, 3, {}, between=0.03, phi=0.5),
    Scenario("flat 50x3, heavy-tailed runs, drift 2%", 50, 3, {}, between=0.02, heavy=True),
    Scenario("flat 11x3, 3% runs, drift 2%", 11, 3, {}, between=0.02),
    Scenario("flat 6x3, 3% runs, drift 2%", 6, 3, {}, between=0.02),
    Scenario("flat 200x3, 3% runs, drift 2%", 200, 3, {}, between=0.02),
    Scenario("5% step at 25 of 50x3, 3% runs, drift 1%", 50, 3, {25: 1.05}, between=0.01),
    Scenario("5% step at 25 of 50x3, 3% runs, drift 2%", 50, 3, {25: 1.05}, between=0.02),
    Scenario("10% step at 25 of 50x3, 3% runs, drift 2%", 50, 3, {25: 1.10}, between=0.02),
    Scenario("10% step at 8 of 10x3 (2 new sessions), drift 2%", 10, 3, {8: 1.10}, between=0.02),
    Scenario("20% step at 8 of 10x3 (2 new sessions), drift 2%", 10, 3, {8: 1.20}, between=0.02),
]

if __name__ == "__main__":
    run(SCENARIOS, int(sys.argv[1]) if len(sys.argv) > 1 else 100)
