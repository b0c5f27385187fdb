"""Exact detections and false alarms of redline's change points over many seeds (docs/history.md §4).

    .venv/bin/python experiments/changepoint/false_alarms.py 1000
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent.parent.parent / "tests")]
from history_sim import Scenario, simulate  # noqa: E402

from redline.analysis.changepoint import analyse_sessions  # noqa: E402

THREE = {3: 1 / 1.5, 5: 1 / 1.2, 8: 1 / 1.6}
SCENARIOS = (Scenario("3 steps no drift", 11, 3, THREE), Scenario("3 steps drift 2%", 11, 3, THREE, between=0.02),
             Scenario("flat50 drift2", 50, 3, between=0.02), Scenario("flat50 drift3", 50, 3, between=0.03),
             Scenario("flat50", 50, 3), Scenario("flat11 drift2", 11, 3, between=0.02),
             Scenario("flat6 drift2", 6, 3, between=0.02),
             Scenario("flat50 heavy drift2", 50, 3, between=0.02, heavy=True))

if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    for scenario in SCENARIOS:
        exact, sizes = 0, []
        for seed in range(n):
            found = analyse_sessions(simulate(scenario, 5000 + seed)).change_points
            exact += [c.index for c in found] == sorted(scenario.steps)
            if found and not scenario.steps:
                sizes.append(round(max(abs(c.delta_pct) for c in found), 1))
        print(f"{scenario.name:22} exact {exact}/{n}  false alarms {len(sizes)} {sizes}", flush=True)
