"""The verdict rule for near-deterministic metrics (instructions and estimated cycles per
operation), where two or three runs per side agree to a fraction of a percent.

The rank statistics of redline.analysis.stats need 5+ runs per side and assume the spread is worth
testing; here the spread is small and measured directly:

    spread      the larger of: each side's range (max − min) ÷ median in this comparison, and
                the test's A/A spread from `redline calibrate --measure instructions` when stored
    τ           max(1%, 3 × spread); max(4%, 3 × spread) for the whole process's counts
                (instructions and est. cycles per op: see least_change_pct in redline.core.metrics)
    interval    every cross-side ratio: [min(B) ÷ max(A) − 1, max(B) ÷ min(A) − 1]
    change      median(B) ÷ median(A) − 1

    regression / improvement   the interval excludes 0 (every B run beyond every A run) and
                               |change| ≥ τ
    no change                  the interval lies inside ±τ, and is not a shift: an interval that
                               excludes 0 with |change| at or above the metric's least change
                               (1%; 4% for the whole process) is one, however wide τ
    inconclusive               anything else; or fewer than 2 runs on a side; or a spread above
                               5% (not near-deterministic: measure time instead, or look for
                               what varies between runs). A shift below τ is inconclusive: MGET
                               of 5 keys of 512 B, 7.0.5 vs 7.0.7, read −5.5% [−6.9%, −4.0%] for
                               the whole process with τ 9.3% (its runs spread 3.1%), where every
                               sibling with steadier runs moved 8–10%; "no change" ended it

The false-verdict rate on A/A is simulated in scripts/simulate_instructions_verdict.py
(docs/measure-instructions.md has the table) and measured on real A/A runs in the tests.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import replace

from redline.analysis.stats import MetricComparison, Verdict, decide_verdict

MIN_EFFECT_PCT = 1.0
SPREAD_FACTOR = 3.0
MAX_SPREAD_PCT = 5.0
MIN_RUNS = 2


def spread_pct(values: Sequence[float]) -> float:
    """(max − min) ÷ median, in %; 0 for fewer than two values."""
    if len(values) < 2:
        return 0.0
    return (max(values) - min(values)) / statistics.median(values) * 100.0


def _words(baseline: Sequence[float], comparison: Sequence[float], higher_is_better: bool) -> str:
    higher = sum(1 for b in baseline for c in comparison if c > b)
    lower = sum(1 for b in baseline for c in comparison if c < b)
    worse = lower if higher_is_better else higher
    total = len(baseline) * len(comparison)
    if worse in (0, total) and higher + lower == total:
        return f"comparison {'costlier' if worse else 'cheaper'} in all {total} run pairs"
    return f"comparison costlier in {worse} of {total} run pairs"


def _positive(baseline: Sequence[float], comparison: Sequence[float]) -> tuple[list[float], list[float]]:
    base = [float(v) for v in baseline if v and v > 0]
    comp = [float(v) for v in comparison if v and v > 0]
    if not base or not comp:
        raise ValueError(f"need positive values on both sides, got {len(base)} baseline and {len(comp)} comparison")
    return base, comp


def _judged(base: list[float], comp: list[float], *, tau: float, higher_is_better: bool, widen: float = 1.0,
            inconclusive: bool = False) -> MetricComparison:
    """change = median(B) ÷ median(A) − 1; interval = every cross-side ratio, widened by the factor
    `widen` on both ends; the verdict from them and τ (inconclusive when told so)."""
    base_median, comp_median = statistics.median(base), statistics.median(comp)
    change = (comp_median / base_median - 1) * 100.0
    low = (min(comp) / max(base) / widen - 1) * 100.0
    high = (max(comp) / min(base) * widen - 1) * 100.0
    verdict = Verdict.INCONCLUSIVE if inconclusive else decide_verdict(
        delta_pct=change, ci_low_pct=low, ci_high_pct=high, tau_pct=tau, higher_is_better=higher_is_better)
    decided = verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT)
    return MetricComparison(
        baseline_median=base_median, comparison_median=comp_median, delta_pct=change,
        ci_low_pct=low, ci_high_pct=high,
        # not a test's p-value: 0 when the rule decided a change, 1 otherwise (false-discovery
        # control over the session keeps every decided change; the rule's own rate is in the docs)
        p_value=0.0 if decided else 1.0,
        verdict=verdict, tau_pct=tau,
        min_detectable_pct=max(tau, abs(high - change), abs(change - low)),
        n_baseline=len(base), n_comparison=len(comp), paired=False,
        effect_words=_words(base, comp, higher_is_better), higher_is_better=higher_is_better)


def deterministic_verdict(baseline: Sequence[float], comparison: Sequence[float], *,
                          higher_is_better: bool = False, aa_spread_pct: float | None = None,
                          least_change_pct: float = MIN_EFFECT_PCT) -> MetricComparison:
    """The rule above for one metric; values must be positive. `least_change_pct` replaces the 1%
    where a metric's sides can differ by more than its runs do (the registry says where)."""
    base, comp = _positive(baseline, comparison)
    spread = max(spread_pct(base), spread_pct(comp), aa_spread_pct or 0.0)
    judged = _judged(base, comp, tau=max(least_change_pct, SPREAD_FACTOR * spread), higher_is_better=higher_is_better,
                     inconclusive=min(len(base), len(comp)) < MIN_RUNS or spread > MAX_SPREAD_PCT)
    shifted = (judged.ci_low_pct > 0 or judged.ci_high_pct < 0) and abs(judged.delta_pct) >= least_change_pct
    return replace(judged, verdict=Verdict.INCONCLUSIVE) if judged.verdict == Verdict.NO_CHANGE and shifted else judged


def step_tolerance_pct(tau_pct: float) -> float:
    """u: how far the ratio of two builds' counts, each measured by its own run(s), may sit from the
    true ratio. τ, the least change a verdict names, is at least twice the largest such offset seen
    between two sides of one binary (least_change_pct in redline.core.metrics) and three times the
    runs' spread; u is half of it."""
    return tau_pct / 2


def one_run_step(reference: Sequence[float], candidate: Sequence[float], *, tau_pct: float,
                 higher_is_better: bool = False) -> MetricComparison:
    """A counted bisection step: a candidate measured by one run (or a few) against an end measured
    earlier, in another job. Their own spread says nothing about how far two sides' counts can be
    apart (docs/measure-instructions.md "Sides that count differently"), so the cross-side interval
    is widened by u = step_tolerance_pct(τ) on both ends, τ being the endpoint comparison's:

        interval   [min(C) ÷ max(R) ÷ (1 + u) − 1,  max(C) ÷ min(R) × (1 + u) − 1]
        change     median(C) ÷ median(R) − 1
        verdict    the usual rule on that interval with τ

    redline.bisect.search decides the step from where the interval lies against the half-way point."""
    ref, cand = _positive(reference, candidate)
    return _judged(ref, cand, tau=tau_pct, higher_is_better=higher_is_better,
                   widen=1 + step_tolerance_pct(tau_pct) / 100)
