#!/usr/bin/env python3
"""Seeded simulations of redline's A/B verdicts (redline.analysis.stats) versus the upstream rule.

Prints markdown tables:
  1. redline, n interleaved pairs: A/A false alarms, power for 3/5/10% regressions, and how
     often a real 3% regression is wrongly called "no change";
  2. the upstream rule (one run per side, flag when the change exceeds 5%) on the same data;
  3. a machine that drifts 1-2% during the experiment: sequential AAAA-BBBB versus
     interleaved ABBA;
  4. extra runs while inconclusive (7 -> 15 pairs): the false alarms peeking causes, and
     the per-look confidence that corrects it;
  5. heavy tails: paired (signed-rank) versus unpaired (Mann-Whitney) analysis;
  6. stopping for futility: the adaptive plans stopped when the pairs still allowed have little
     chance to decide (redline.analysis.stats.decision_chance), from its own random stream of
     the seed (--only futility prints it alone).

Noise model: each run's value is 100000 * exp(sigma * Z) with Z standard normal and
sigma = noise% / 100 (log-normal; noise% is the run-to-run coefficient of variation).
Heavy tails: additionally, each run independently has a 10% chance of dipping by a
uniformly drawn 5-20%. A regression of s% multiplies every comparison run by (1 - s/100).
The metric is throughput (higher is better).

    .venv/bin/python scripts/simulate_stats.py --iterations 2000 --seed 1
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from redline.analysis.stats import (  # noqa: E402
    FUTILITY_CHANCE,
    compare_metric,
    confidence_per_look,
    needs_more_runs,
)

BASE_VALUE = 100_000.0
FUTILITY_STREAM = 5        # the futility table's own random stream (added after the others were published)
UPSTREAM_THRESHOLD_PCT = 5.0


@dataclass(frozen=True)
class NoiseModel:
    noise_pct: float
    heavy_tails: bool = False


@dataclass(frozen=True)
class CellResult:
    """Fractions of simulated comparisons that ended in each outcome."""

    regression: float
    improvement: float
    no_change: float
    inconclusive: float
    ci_excludes_zero: float

    @property
    def flagged(self) -> float:
        return self.regression + self.improvement


def draw_runs(rng: np.random.Generator, *, model: NoiseModel, count: int,
              level: np.ndarray | float = 1.0) -> np.ndarray:
    """count runs of a server whose true throughput is BASE_VALUE * level."""
    values = BASE_VALUE * np.asarray(level) * np.exp(rng.normal(0.0, model.noise_pct / 100, count))
    if model.heavy_tails:
        dips = rng.random(count) < 0.10
        values = np.where(dips, values * (1 - rng.uniform(0.05, 0.20, count)), values)
    return values


def simulate_redline(rng: np.random.Generator, *, model: NoiseModel, n: int, shift_pct: float,
                     iterations: int, paired: bool = True) -> CellResult:
    """n interleaved pairs per comparison, analysed paired (default) or unpaired."""
    counts = dict.fromkeys(["regression", "improvement", "no_change", "inconclusive", "sig"], 0)
    for _ in range(iterations):
        base = draw_runs(rng, model=model, count=n)
        comp = draw_runs(rng, model=model, count=n, level=1 - shift_pct / 100)
        result = compare_metric(base, comp, paired=paired, higher_is_better=True)
        counts[result.verdict] += 1
        counts["sig"] += result.ci_low_pct > 0 or result.ci_high_pct < 0
    return _fractions(counts, iterations)


@dataclass(frozen=True)
class AdaptivePlan:
    """Start with start pairs; while inconclusive add step pairs, up to max_pairs."""

    start: int = 7
    step: int = 2
    max_pairs: int = 15
    correct_for_peeking: bool = True
    futility_chance: float = 0.0    # stop when the pairs still allowed have less chance than this to decide

    @property
    def looks(self) -> int:
        return 1 + (self.max_pairs - self.start) // self.step

    @property
    def confidence(self) -> float:
        return confidence_per_look(self.looks) if self.correct_for_peeking else 0.95


def simulate_adaptive(rng: np.random.Generator, *, model: NoiseModel, shift_pct: float,
                      plan: AdaptivePlan, iterations: int) -> tuple[CellResult, float]:
    """Interleaved pairs with extra runs while inconclusive; returns outcomes, mean pairs."""
    counts = dict.fromkeys(["regression", "improvement", "no_change", "inconclusive", "sig"], 0)
    pairs_used = 0
    level = 1 - shift_pct / 100
    for _ in range(iterations):
        base = list(draw_runs(rng, model=model, count=plan.start))
        comp = list(draw_runs(rng, model=model, count=plan.start, level=level))
        for _look in range(plan.looks):
            result = compare_metric(base, comp, paired=True, higher_is_better=True, confidence=plan.confidence,
                                    runs_allowed=plan.max_pairs)
            if not needs_more_runs(result, plan.futility_chance) or len(base) + plan.step > plan.max_pairs:
                break
            base += list(draw_runs(rng, model=model, count=plan.step))
            comp += list(draw_runs(rng, model=model, count=plan.step, level=level))
        counts[result.verdict] += 1
        counts["sig"] += result.ci_low_pct > 0 or result.ci_high_pct < 0
        pairs_used += len(base)
    return _fractions(counts, iterations), pairs_used / iterations


def simulate_upstream(rng: np.random.Generator, *, model: NoiseModel, shift_pct: float,
                      iterations: int) -> CellResult:
    """One run per side; a change beyond 5% either way is flagged."""
    base = draw_runs(rng, model=model, count=iterations)
    comp = draw_runs(rng, model=model, count=iterations, level=1 - shift_pct / 100)
    change = (comp / base - 1) * 100
    regression = float(np.mean(change < -UPSTREAM_THRESHOLD_PCT))
    improvement = float(np.mean(change > UPSTREAM_THRESHOLD_PCT))
    return CellResult(regression=regression, improvement=improvement,
                      no_change=1 - regression - improvement, inconclusive=0.0,
                      ci_excludes_zero=float("nan"))


@dataclass(frozen=True)
class Design:
    interleaved: bool  # A B B A A B ... (else A A A ... B B B ...)
    paired: bool  # analysed with the paired test


def drift_levels(rng: np.random.Generator, *, kind: str, size_pct: float, slots: int) -> np.ndarray:
    """The machine's speed factor at each run slot.

    linear: a steady drift of size_pct (random sign) from the first to the last run.
    walk: a random walk, each run moving the level by a normal step of size_pct (SD).
    """
    if kind == "linear":
        sign = 1 if rng.random() < 0.5 else -1
        return 1 + sign * size_pct / 100 * np.arange(slots) / (slots - 1)
    if kind == "walk":
        return np.exp(np.cumsum(rng.normal(0.0, size_pct / 100, slots)))
    raise ValueError(f"unknown drift kind {kind!r} (expected 'linear' or 'walk')")


def simulate_drift(rng: np.random.Generator, *, model: NoiseModel, n: int, drift_kind: str,
                   drift_pct: float, design: Design, iterations: int,
                   shift_pct: float = 0.0) -> CellResult:
    """Comparisons on a machine whose speed drifts during the experiment (B slower by shift).

    Sequential: runs 0..n-1 are A, n..2n-1 are B. Interleaved: pair k takes slots 2k and
    2k+1, A first when k is even (A B B A A B ...).
    """
    if design.paired and not design.interleaved:
        raise ValueError("sequential runs have no pairs; analyse them unpaired")
    counts = dict.fromkeys(["regression", "improvement", "no_change", "inconclusive", "sig"], 0)
    slots = np.arange(2 * n)
    if design.interleaved:
        pair = slots // 2
        a_first = pair % 2 == 0
        is_a = np.where(slots % 2 == 0, a_first, ~a_first)
    else:
        is_a = slots < n
    a_slots, b_slots = slots[is_a], slots[~is_a]
    for _ in range(iterations):
        level = drift_levels(rng, kind=drift_kind, size_pct=drift_pct, slots=2 * n)
        base = draw_runs(rng, model=model, count=n, level=level[a_slots])
        comp = draw_runs(rng, model=model, count=n,
                         level=level[b_slots] * (1 - shift_pct / 100))
        result = compare_metric(base, comp, paired=design.paired, higher_is_better=True)
        counts[result.verdict] += 1
        counts["sig"] += result.ci_low_pct > 0 or result.ci_high_pct < 0
    return _fractions(counts, iterations)


def _fractions(counts: dict[str, int], iterations: int) -> CellResult:
    return CellResult(regression=counts["regression"] / iterations,
                      improvement=counts["improvement"] / iterations,
                      no_change=counts["no_change"] / iterations,
                      inconclusive=counts["inconclusive"] / iterations,
                      ci_excludes_zero=counts["sig"] / iterations)


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


NOISES = (1.0, 3.0, 6.0)
SHIFTS = (3.0, 5.0, 10.0)
SIZES = (5, 7, 10)


def redline_table(rng: np.random.Generator, *, iterations: int) -> str:
    lines = [
        "| noise | heavy tails | pairs | A/A false alarms | power 3% | power 5% | power 10% "
        "| real 3% called \"no change\" | real 5% called \"no change\" |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for tails in (False, True):
        for noise in NOISES:
            model = NoiseModel(noise_pct=noise, heavy_tails=tails)
            for n in SIZES:
                aa = simulate_redline(rng, model=model, n=n, shift_pct=0.0, iterations=iterations)
                cells = {s: simulate_redline(rng, model=model, n=n, shift_pct=s,
                                             iterations=iterations) for s in SHIFTS}
                lines.append(
                    f"| {noise:g}% | {'yes' if tails else 'no'} | {n} | {_pct(aa.flagged)} | "
                    + " | ".join(_pct(cells[s].regression) for s in SHIFTS)
                    + f" | {_pct(cells[3.0].no_change)} | {_pct(cells[5.0].no_change)} |"
                )
    return "\n".join(lines)


def upstream_table(rng: np.random.Generator, *, iterations: int) -> str:
    lines = [
        "| noise | heavy tails | A/A false alarms | power 3% | power 5% | power 10% |",
        "|---|---|---|---|---|---|",
    ]
    for tails in (False, True):
        for noise in NOISES:
            model = NoiseModel(noise_pct=noise, heavy_tails=tails)
            aa = simulate_upstream(rng, model=model, shift_pct=0.0, iterations=iterations)
            cells = [simulate_upstream(rng, model=model, shift_pct=s, iterations=iterations)
                     for s in SHIFTS]
            lines.append(
                f"| {noise:g}% | {'yes' if tails else 'no'} | {_pct(aa.flagged)} | "
                + " | ".join(_pct(c.regression) for c in cells) + " |"
            )
    return "\n".join(lines)


DESIGNS = (
    ("sequential AAAA-BBBB, unpaired", Design(interleaved=False, paired=False)),
    ("interleaved ABBA, paired", Design(interleaved=True, paired=True)),
    ("interleaved ABBA, unpaired", Design(interleaved=True, paired=False)),
)


def drift_table(rng: np.random.Generator, *, iterations: int, n: int = 7) -> str:
    lines = [
        "| noise | drift | design | A/A: test significant (CI excludes 0) "
        "| A/A: regression/improvement verdict | power 5% |",
        "|---|---|---|---|---|---|",
    ]
    cases = [(1.0, "linear", 1.0), (1.0, "linear", 2.0), (3.0, "linear", 2.0),
             (1.0, "walk", 0.5), (1.0, "walk", 1.0), (1.0, "walk", 2.0)]
    for noise, kind, size in cases:
        model = NoiseModel(noise_pct=noise)
        drift = f"{size:g}% {'steady' if kind == 'linear' else 'random walk per run'}"
        for name, design in DESIGNS:
            cell = simulate_drift(rng, model=model, n=n, drift_kind=kind, drift_pct=size,
                                  design=design, iterations=iterations)
            power = simulate_drift(rng, model=model, n=n, drift_kind=kind, drift_pct=size,
                                   design=design, iterations=iterations, shift_pct=5.0)
            lines.append(f"| {noise:g}% | {drift} | {name} | {_pct(cell.ci_excludes_zero)} | "
                         f"{_pct(cell.flagged)} | {_pct(power.regression)} |")
    return "\n".join(lines)


def adaptive_table(rng: np.random.Generator, *, iterations: int) -> str:
    lines = [
        "| noise | heavy tails | plan | A/A false alarms | power 3% | power 5% "
        "| mean pairs (A/A) | mean pairs (5%) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    plans = (
        ("7 pairs, fixed", AdaptivePlan(max_pairs=7, correct_for_peeking=False)),
        ("7 -> 15 while inconclusive, 95% at every look",
         AdaptivePlan(correct_for_peeking=False)),
        (f"7 -> 15 while inconclusive, {100 * AdaptivePlan().confidence:.2f}% at every look "
         "(Pocock)", AdaptivePlan()),
    )
    for noise, tails in ((1.0, False), (3.0, False), (6.0, False), (3.0, True)):
        model = NoiseModel(noise_pct=noise, heavy_tails=tails)
        for name, plan in plans:
            aa, aa_pairs = simulate_adaptive(rng, model=model, shift_pct=0.0, plan=plan,
                                             iterations=iterations)
            three, _ = simulate_adaptive(rng, model=model, shift_pct=3.0, plan=plan,
                                         iterations=iterations)
            five, five_pairs = simulate_adaptive(rng, model=model, shift_pct=5.0, plan=plan,
                                                 iterations=iterations)
            lines.append(f"| {noise:g}% | {'yes' if tails else 'no'} | {name} | "
                         f"{_pct(aa.flagged)} | {_pct(three.regression)} | "
                         f"{_pct(five.regression)} | {aa_pairs:.1f} | {five_pairs:.1f} |")
    return "\n".join(lines)


def futility_table(rng: np.random.Generator, *, iterations: int) -> str:
    """The adaptive plans with and without stopping when the pairs still allowed have little chance to
    decide (redline.analysis.stats.decision_chance): what it costs in verdicts, what it saves in pairs."""
    lines = [
        "| noise | heavy tails | plan | stop below chance | A/A flagged | A/A no change | 2%: flagged / no change "
        "| 3% flagged | 5% flagged | mean pairs A/A / 2% / 3% / 5% |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for noise, tails in ((1.0, False), (3.0, False), (3.0, True), (6.0, False)):
        model = NoiseModel(noise_pct=noise, heavy_tails=tails)
        for start in (5, 7):
            for chance in (0.0, 0.02, FUTILITY_CHANCE):
                plan = AdaptivePlan(start=start, futility_chance=chance)
                cells = {shift: simulate_adaptive(rng, model=model, shift_pct=shift, plan=plan, iterations=iterations)
                         for shift in (0.0, 2.0, 3.0, 5.0)}
                pairs = " / ".join(f"{cells[shift][1]:.1f}" for shift in (0.0, 2.0, 3.0, 5.0))
                lines.append(
                    f"| {noise:g}% | {'yes' if tails else 'no'} | {start} -> {plan.max_pairs} | "
                    f"{f'{chance:g}' if chance else 'never'} | {_pct(cells[0.0][0].flagged)} | {_pct(cells[0.0][0].no_change)} | "
                    f"{_pct(cells[2.0][0].flagged)} / {_pct(cells[2.0][0].no_change)} | "
                    f"{_pct(cells[3.0][0].flagged)} | {_pct(cells[5.0][0].flagged)} | {pairs} |")
    return "\n".join(lines)


def analysis_table(rng: np.random.Generator, *, iterations: int) -> str:
    """Paired signed-rank versus unpaired Mann-Whitney on the same kind of interleaved runs."""
    lines = [
        "| noise | heavy tails | pairs | analysis | A/A false alarms | power 3% | power 5% "
        "| power 10% |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for noise in (1.0, 3.0):
        for n in (7, 10):
            for paired in (True, False):
                model = NoiseModel(noise_pct=noise, heavy_tails=True)
                aa = simulate_redline(rng, model=model, n=n, shift_pct=0.0,
                                      iterations=iterations, paired=paired)
                cells = [simulate_redline(rng, model=model, n=n, shift_pct=s,
                                          iterations=iterations, paired=paired)
                         for s in SHIFTS]
                name = "paired (signed-rank)" if paired else "unpaired (Mann-Whitney)"
                lines.append(f"| {noise:g}% | yes | {n} | {name} | {_pct(aa.flagged)} | "
                             + " | ".join(_pct(c.regression) for c in cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=2000,
                        help="simulated comparisons per table cell (default 2000)")
    parser.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    parser.add_argument("--only", choices=["futility"],
                        help="print only this table (it draws from its own stream of the seed, so it is the same "
                             "either way)")
    args = parser.parse_args(argv)
    if args.iterations < 1:
        parser.error("--iterations must be at least 1")
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    print(f"<!-- scripts/simulate_stats.py --iterations {args.iterations} --seed {args.seed} -->")
    if args.only == "futility":
        print(futility_table(np.random.default_rng([args.seed, FUTILITY_STREAM]), iterations=args.iterations))
        return 0
    print("\n### redline: interleaved pairs, tau = 2%\n")
    print(redline_table(rng, iterations=args.iterations))
    print("\n### upstream rule: one run per side, fixed 5% threshold\n")
    print(upstream_table(rng, iterations=max(args.iterations, 20000)))
    print("\n### drift of the machine during the experiment (7 runs per side)\n")
    print(drift_table(rng, iterations=args.iterations))
    print("\n### extra runs while inconclusive (interleaved pairs)\n")
    print(adaptive_table(rng, iterations=args.iterations))
    print("\n### heavy tails: paired versus unpaired analysis of interleaved runs\n")
    print(analysis_table(rng, iterations=args.iterations))
    print("\n### stopping for futility: the same plans, stopped when more pairs have little chance to decide\n")
    print(futility_table(np.random.default_rng([args.seed, FUTILITY_STREAM]), iterations=args.iterations))
    print(f"\n<!-- {time.perf_counter() - started:.0f} s -->")
    return 0


if __name__ == "__main__":
    sys.exit(main())
