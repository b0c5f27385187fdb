"""How often the near-deterministic verdict rule (redline.analysis.counted) calls a change on
A/A data, and how often it finds a real one, on simulated runs.

Each run's value is 1 × (1 + e), e normal with standard deviation `noise` (the run-to-run spread
of instructions per operation), or, in the heavy-tailed rows, with 10% of runs shifted a further
3 × noise either way (a run with more event-loop or cron work than usual). Runs per side: 2 or 3.
"calibrated" rows also give the rule an A/A spread measured on an independent 2+2-run A/A, as
`redline calibrate --measure instructions` stores it.

    .venv/bin/python scripts/simulate_instructions_verdict.py --iterations 4000 --seed 1
"""

from __future__ import annotations

import argparse
import random

from redline.analysis.counted import deterministic_verdict, spread_pct
from redline.analysis.stats import Verdict

NOISES = (0.0005, 0.002, 0.005, 0.01)
CHANGES = (0.0, 0.01, 0.02, 0.05)


def _runs(rng: random.Random, n: int, level: float, noise: float, heavy: bool) -> list[float]:
    values = []
    for _ in range(n):
        e = rng.gauss(0.0, noise)
        if heavy and rng.random() < 0.10:
            e += rng.choice((-3, 3)) * noise
        values.append(level * (1 + e))
    return values


def rates(rng: random.Random, *, n: int, noise: float, change: float, heavy: bool, calibrated: bool,
          iterations: int) -> tuple[float, float]:
    """(share of comparisons called a change in the true direction or the false one, share called
    a regression) — on A/A (change 0) the first is the false-verdict rate."""
    called = regressions = 0
    for _ in range(iterations):
        floor = None
        if calibrated:
            floor = spread_pct(_runs(rng, 4, 1.0, noise, heavy))
        result = deterministic_verdict(_runs(rng, n, 1.0, noise, heavy), _runs(rng, n, 1 + change, noise, heavy),
                                       aa_spread_pct=floor)
        called += result.verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT)
        regressions += result.verdict == Verdict.REGRESSION
    return called / iterations, regressions / iterations


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    header = "| runs/side | noise (sd) | tails | A/A spread given | false verdicts on A/A | " + \
             " | ".join(f"found +{c:.0%}" for c in CHANGES[1:]) + " |"
    print(header)
    print("|" + "---:|" * (header.count("|") - 1))
    for n in (2, 3):
        for noise in NOISES:
            for heavy in (False, True):
                for calibrated in (False, True):
                    cells = []
                    for change in CHANGES:
                        called, regressions = rates(rng, n=n, noise=noise, change=change, heavy=heavy,
                                                    calibrated=calibrated, iterations=args.iterations)
                        cells.append(f"{called:.2%}" if change == 0 else f"{regressions:.1%}")
                    print(f"| {n} | {noise:.2%} | {'heavy' if heavy else 'normal'} | "
                          f"{'yes' if calibrated else 'no'} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
