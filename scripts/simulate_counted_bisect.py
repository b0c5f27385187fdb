"""How counted bisections (`redline bisect --measure instructions`: one run per commit after the
endpoint check) end when builds' counts sit apart by more or less than the step tolerance u
assumes, on simulated counts (redline.bisect.simulation) through the real search and comparer.

Each bisection: a path of 4-40 commits, the culprit anywhere on it, every build offset uniformly
within ±offset/2 (two builds up to `offset` apart), every run ±0.1%. The metric is
instructions_per_op (τ 4%, so u 2%, and a step is followed from +8.2%).

    .venv/bin/python scripts/simulate_counted_bisect.py --iterations 1000 --seed 1
"""

from __future__ import annotations

import argparse
import random

from redline.bisect.search import bisect
from redline.bisect.measure import CountedComparer
from redline.bisect.simulation import SimulatedCounter, commit_line

STEPS = (1.09, 1.2, 2.0, 0.85)
OFFSETS = (0.0, 0.02, 0.03, 0.04, 0.06, 0.08)    # the largest distance between two builds' counts


def outcomes(rng: random.Random, *, step: float, offset: float, iterations: int) -> dict[str, float]:
    ended = {"named": 0, "wrong": 0, "among candidates": 0, "not followed": 0}
    runs = 0
    for _ in range(iterations):
        good, path = commit_line(rng.randint(4, 40))
        culprit = rng.randrange(len(path))
        counter = SimulatedCounter(good, path, culprit=culprit, step=step, build_offset=offset / 2,
                                   seed=rng.randrange(2**31))
        outcome = bisect(CountedComparer(counter, metric="instructions_per_op", endpoint_runs=3), good, path, ["t"])
        runs += counter.runs
        if not outcome.endpoints.moved:
            ended["not followed"] += 1
        elif outcome.culprit == path[culprit]:
            ended["named"] += 1
        elif outcome.culprit is not None or path[culprit] not in outcome.candidates:
            ended["wrong"] += 1
        else:
            ended["among candidates"] += 1
    return {**{k: v / iterations for k, v in ended.items()}, "runs": runs / iterations}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    print("| step | builds apart up to | culprit named | wrong commit | among candidates (skips) | not followed | runs |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for step in STEPS:
        for offset in OFFSETS:
            r = outcomes(rng, step=step, offset=offset, iterations=args.iterations)
            print(f"| {step:g}x | {offset:.0%} | {r['named']:.1%} | {r['wrong']:.1%} | {r['among candidates']:.1%} "
                  f"| {r['not followed']:.1%} | {r['runs']:.1f} |")


if __name__ == "__main__":
    main()
