"""How counted bisections (`redline bisect --measure instructions`: one run per commit after the
endpoint check) end when builds' counts sit apart by more or less than the step tolerance u
assumes, on simulated counts (redline.bisect.simulation) through the real search and comparer.

Table 1, one step: a path of 4-40 commits, the culprit anywhere on it, every build offset
uniformly within ±offset/2 (two builds up to `offset` apart), every run ±0.1%. The metric is
instructions_per_op (τ 4%, so u 2%, and a step is followed from +8.2%).

Table 2, a change made by several commits (#34): two or three steps of 1.2x, 1.8x and 1.4x (in a
random order and direction) anywhere on 10-60 commits; the search for the step across the middle,
and (--each-step) for every step, with k commits per round.

    .venv/bin/python scripts/simulate_counted_bisect.py --iterations 1000 --seed 1
"""

from __future__ import annotations

import argparse
import math
import random

from redline.bisect.measure import CountedComparer
from redline.bisect.search import bisect
from redline.bisect.simulation import SimulatedCounter, commit_line

STEPS = (1.09, 1.2, 2.0, 0.85)
OFFSETS = (0.0, 0.02, 0.03, 0.04, 0.06, 0.08)    # the largest distance between two builds' counts
SEVERAL = (1.2, 1.8, 1.4)
SEVERAL_OFFSETS = (0.0, 0.02, 0.04, 0.08)
MODES = ((False, 1), (False, 3), (True, 1), (True, 3))    # (each step, commits per round)


def _bisect(counter: SimulatedCounter, good, path, **options):
    return bisect(CountedComparer(counter, metric="instructions_per_op", endpoint_runs=3), good, path, ["t"], **options)


def outcomes(rng: random.Random, *, step: float, offset: float, iterations: int) -> dict[str, float]:
    ended = {"named": 0, "wrong": 0, "among candidates": 0, "none named": 0, "not followed": 0}
    runs = 0
    for _ in range(iterations):
        good, path = commit_line(rng.randint(4, 40))
        culprit = rng.randrange(len(path))
        counter = SimulatedCounter(good, path, culprit=culprit, step=step, build_offset=offset / 2,
                                   seed=rng.randrange(2**31))
        outcome = _bisect(counter, good, path)
        runs += counter.runs
        if not outcome.endpoints.moved:
            ended["not followed"] += 1
        elif outcome.culprit == path[culprit]:
            ended["named"] += 1
        elif outcome.culprit is not None or (outcome.candidates and path[culprit] not in outcome.candidates):
            ended["wrong"] += 1
        elif outcome.unresolved:
            ended["none named"] += 1
        else:
            ended["among candidates"] += 1
    return {**{k: v / iterations for k, v in ended.items()}, "runs": runs / iterations}


def _layout(rng: random.Random) -> tuple[int, dict[int, float], int]:
    """A path length, its steps (index → factor) and the step across the middle."""
    n = rng.randint(10, 60)
    factors = rng.sample(SEVERAL, rng.choice([2, 3]))
    if rng.random() < 0.5:
        factors = [1 / f for f in factors]
    changes = dict(zip(sorted(rng.sample(range(n), len(factors))), factors))
    total, reached = math.log(math.prod(factors)), 0.0
    for at in sorted(changes):
        reached += math.log(changes[at])
        if reached / total > 0.5:
            return n, changes, at
    raise AssertionError("no crossing")


def several(rng: random.Random, *, offset: float, each_step: bool, per_round: int, iterations: int) -> dict[str, float]:
    ended = {"middle named": 0, "all found": 0, "no-change found": 0, "no-change named": 0, "other step named": 0,
             "none named": 0}
    runs = rounds = 0
    for _ in range(iterations):
        n, changes, across = _layout(rng)
        good, path = commit_line(n)
        counter = SimulatedCounter(good, path, changes=changes, build_offset=offset / 2, seed=rng.randrange(2**31))
        outcome = _bisect(counter, good, path, each_step=each_step, per_round=per_round)
        runs, rounds = runs + counter.runs, rounds + outcome.rounds
        named = None if outcome.culprit is None else path.index(outcome.culprit)
        ended["middle named"] += named == across
        ended["no-change named"] += named is not None and named not in changes
        ended["other step named"] += named is not None and named in changes and named != across
        ended["none named"] += named is None
        found = [path.index(r.commit) for r in outcome.found if r.resolved]
        ended["all found"] += found == sorted(changes)
        ended["no-change found"] += any(i not in changes for i in found)
    return {**{k: v / iterations for k, v in ended.items()}, "runs": runs / iterations, "rounds": rounds / iterations}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    print("| step | builds apart up to | culprit named | wrong commit | among candidates (skips) "
          "| none named (own change not told from none) | not followed | runs |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for step in STEPS:
        for offset in OFFSETS:
            r = outcomes(rng, step=step, offset=offset, iterations=args.iterations)
            print(f"| {step:g}x | {offset:.0%} | {r['named']:.1%} | {r['wrong']:.1%} | {r['among candidates']:.1%} "
                  f"| {r['none named']:.1%} | {r['not followed']:.1%} | {r['runs']:.1f} |")
    print()
    print("| steps of 1.2x, 1.8x, 1.4x | builds apart up to | k | step across the middle named | every step found "
          "| a commit without a change named | … listed as a step | another step named | none named | runs | rounds |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for each_step, per_round in MODES:
        for offset in SEVERAL_OFFSETS:
            r = several(rng, offset=offset, each_step=each_step, per_round=per_round, iterations=args.iterations)
            mode = "each step" if each_step else "across the middle"
            print(f"| {mode} | {offset:.0%} | {per_round} | {r['middle named']:.1%} | {r['all found']:.1%} "
                  f"| {r['no-change named']:.1%} | {r['no-change found']:.1%} | {r['other step named']:.1%} "
                  f"| {r['none named']:.1%} "
                  f"| {r['runs']:.1f} | {r['rounds']:.1f} |")


if __name__ == "__main__":
    main()
