"""A/B statistics: is the comparison faster, slower, the same, or can the data not tell?

Everything works on the logarithm of the measured values, so a change is a ratio and
"+5%" means the same thing for ops/sec, latency and CPU per operation.

* Paired runs (interleaved A B B A ...; pair i = baseline run i and comparison run i):
  the change is estimated by the Hodges-Lehmann estimator of the log ratios (median of the
  Walsh averages) and its confidence interval comes from inverting the Wilcoxon signed-rank
  test; the p-value is the exact signed-rank p-value.
* Unpaired runs: Hodges-Lehmann shift (median of all pairwise differences) with the interval
  from inverting the Mann-Whitney test; the p-value is the exact Mann-Whitney p-value.

Ties and zeros (quantised latency percentiles produce both):
* p-values are exact *conditional* permutation p-values: ties get mid-ranks, and for the
  signed-rank test zero differences are ranked and then left out of the sign flips (Pratt's
  method). The permutation distribution is computed exactly by dynamic programming over
  doubled mid-ranks (integers), so ties cost nothing in exactness.
* Confidence intervals are order statistics of the Walsh averages / pairwise differences with
  the critical value of the untied distribution. With ties the closed interval is conservative
  (its coverage is at least the nominal level), and a zero difference counts as "no evidence".

The paired signed-rank test cannot reach 95% with fewer than 6 pairs (with 5 pairs the
smallest two-sided p-value is 2/32 = 0.0625). For such small paired samples the interval and
p-value come from the Mann-Whitney test instead (5 vs 5 can reach 95%), and the result says
``paired=False``. See docs/statistics.md for the reasoning and the simulations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

import numpy as np

__all__ = [
    "Verdict",
    "MetricComparison",
    "compare_metric",
    "noise_floor_pct",
    "benjamini_hochberg",
    "needs_more_runs",
    "FUTILITY_CHANCE",
    "decision_chance",
    "hodges_lehmann_paired",
    "hodges_lehmann_shift",
    "signed_rank_pvalue",
    "signed_rank_reaches",
    "mann_whitney_pvalue",
    "MIN_TAU_PCT",
    "confidence_per_look",
    "decide_verdict",
]

#: The smallest practical threshold: changes below 2% are never called regressions.
MIN_TAU_PCT = 2.0
#: Exact Mann-Whitney distributions are computed up to this many runs in total.
_MAX_EXACT_MW_TOTAL = 100


@dataclass(frozen=True)
class Verdict:
    """The four possible answers (plain strings, so they serialise as-is)."""

    REGRESSION = "regression"
    IMPROVEMENT = "improvement"
    NO_CHANGE = "no_change"
    INCONCLUSIVE = "inconclusive"


@dataclass
class MetricComparison:
    """The comparison of one metric between baseline and comparison runs."""

    baseline_median: float
    comparison_median: float
    delta_pct: float  # Hodges-Lehmann estimate of the change, in % (comparison vs baseline)
    ci_low_pct: float  # distribution-free confidence interval of the change, in %
    ci_high_pct: float
    p_value: float
    verdict: str  # one of the Verdict constants
    tau_pct: float  # practical threshold used
    min_detectable_pct: float  # smallest change this data could have detected
    n_baseline: int
    n_comparison: int
    paired: bool  # True when the paired (signed-rank) analysis was used
    effect_words: str  # e.g. "comparison slower in 6 of 7 pairs"
    higher_is_better: bool
    # inconclusive with runs still allowed: the chance that they would decide (stopping for futility)
    decision_chance: float | None = None

    @property
    def futility_note(self) -> str | None:
        """Said of an inconclusive result whose runs could still have grown but had too little chance
        to decide for the adaptive rule to add them (needs_more_runs)."""
        if needs_more_runs(self) or self.decision_chance is None:
            return None
        chance = "under 0.1%" if self.decision_chance < 0.001 else f"{100 * self.decision_chance:.1f}%"
        return (f"{min(self.n_baseline, self.n_comparison)} runs per side; more had a {chance} chance to "
                f"decide (below {100 * FUTILITY_CHANCE:g}%, so none were added)")


# --------------------------------------------------------------------------- input checks


def _as_positive_array(values: Sequence[float], *, name: str) -> np.ndarray:
    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}: values must be numbers ({exc})") from None
    if arr.ndim != 1:
        raise ValueError(f"{name}: expected a flat list of numbers, got shape {arr.shape}")
    for i, v in enumerate(arr):
        if not math.isfinite(v):
            raise ValueError(f"{name}[{i}] = {float(v)!r}: values must be finite")
        if v <= 0:
            raise ValueError(
                f"{name}[{i}] = {float(v)!r}: values must be positive (changes are ratios)"
            )
    return arr


def _check_confidence(confidence: float) -> float:
    if not (isinstance(confidence, (int, float)) and 0.5 <= confidence < 1):
        raise ValueError(f"confidence must be in [0.5, 1), got {confidence!r}")
    return 1.0 - float(confidence)


# --------------------------------------------------------------------------- ranks


def _midranks_doubled(values: np.ndarray) -> np.ndarray:
    """Twice the mid-ranks (1-based) of values: integers even with ties."""
    n = len(values)
    order = np.argsort(values, kind="mergesort")
    sorted_vals = values[order]
    doubled = np.empty(n, dtype=np.int64)
    i = 0
    while i < n:
        j = i
        while j + 1 < n and sorted_vals[j + 1] == sorted_vals[i]:
            j += 1
        # ranks i+1 .. j+1 share the mean rank (i+j+2)/2; doubled: i+j+2
        doubled[order[i : j + 1]] = i + j + 2
        i = j + 1
    return doubled


# --------------------------------------------------------------------------- distributions


def _sign_flip_distribution(weights: Sequence[int]) -> np.ndarray:
    """P(sum of the weights whose sign is +) for independent fair signs; index = sum."""
    total = int(sum(weights))
    dist = np.zeros(total + 1)
    dist[0] = 1.0
    top = 0
    for w in weights:
        w = int(w)
        nxt = dist * 0.5
        nxt[w : top + w + 1] += 0.5 * dist[: top + 1]
        dist = nxt
        top += w
    return dist


@lru_cache(maxsize=256)
def _untied_signed_rank_cdf(n: int) -> np.ndarray:
    """cdf[t] = P(T+ <= t) for the signed-rank statistic of n untied, non-zero differences."""
    return np.cumsum(_sign_flip_distribution(range(1, n + 1)))


def _subset_sum_distribution(weights: Sequence[int], size: int) -> np.ndarray:
    """P(sum of a uniformly random size-subset of weights = s); index = s."""
    weights = [int(w) for w in weights]
    total = sum(weights)
    counts = np.zeros((size + 1, total + 1))
    counts[0, 0] = 1.0
    for w in weights:
        # counts[k, s] += counts_old[k-1, s-w]: numpy buffers the overlapping operands, so the
        # right-hand side is the old table and each weight is used at most once
        counts[1:, w:] += counts[:-1, : total + 1 - w]
    row = counts[size]
    return row / row.sum()


@lru_cache(maxsize=256)
def _untied_mann_whitney_cdf(n_x: int, n_y: int) -> np.ndarray:
    """cdf[u] = P(U <= u), U = #{(i, j): y_j > x_i}, untied samples of sizes n_x, n_y."""
    rank_sum = _subset_sum_distribution(range(1, n_x + n_y + 1), n_y)
    offset = n_y * (n_y + 1) // 2
    return np.cumsum(rank_sum[offset : offset + n_x * n_y + 1])


def _two_sided(dist: np.ndarray, observed: int) -> float:
    lower = float(dist[: observed + 1].sum())
    upper = float(dist[observed:].sum())
    return min(1.0, 2.0 * min(lower, upper))


def _normal_two_sided(z: float) -> float:
    return min(1.0, math.erfc(abs(z) / math.sqrt(2.0)))


def _normal_quantile(p: float) -> float:
    """Inverse standard normal cdf (Acklam's rational approximation, |error| < 1.2e-9)."""
    if not 0 < p < 1:
        raise ValueError(f"quantile needs 0 < p < 1, got {p}")
    a = (-3.969683028665376e01, 2.209460984245205e02, -2.759285104469687e02,
         1.383577518672690e02, -3.066479806614716e01, 2.506628277459239e00)
    b = (-5.447609879822406e01, 1.615858368580409e02, -1.556989798598866e02,
         6.680131188771972e01, -1.328068155288572e01)
    c = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e00,
         -2.549732539343734e00, 4.374664141464968e00, 2.938163982698783e00)
    d = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e00,
         3.754408661907416e00)
    if p < 0.02425:
        q = math.sqrt(-2 * math.log(p))
        return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / (
            (((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1)
    if p > 1 - 0.02425:
        return -_normal_quantile(1 - p)
    q = p - 0.5
    r = q * q
    return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q / (
        ((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1)


# --------------------------------------------------------------------------- p-values


def signed_rank_pvalue(differences: Sequence[float]) -> float:
    """Exact two-sided Wilcoxon signed-rank p-value (Pratt's treatment of zeros, mid-ranks).

    The distribution is the exact conditional permutation distribution given the observed
    ranks, so ties and zeros are handled exactly. 1.0 when every difference is zero.
    """
    d = np.asarray(differences, dtype=float)
    doubled = _midranks_doubled(np.abs(d))
    nonzero = d != 0
    if not nonzero.any():
        return 1.0
    weights = doubled[nonzero]
    observed = int(doubled[d > 0].sum())
    return _two_sided(_sign_flip_distribution(weights), observed)


def mann_whitney_pvalue(x: Sequence[float], y: Sequence[float]) -> float:
    """Exact two-sided Mann-Whitney p-value, conditional on ties (mid-ranks).

    Exact up to 100 values in total; beyond that the normal approximation with tie
    correction (which is then accurate to about 3 decimals).
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    pooled = np.concatenate([x, y])
    doubled = _midranks_doubled(pooled)
    observed = int(doubled[len(x):].sum())
    if np.all(doubled == doubled[0]):
        return 1.0
    if len(pooled) <= _MAX_EXACT_MW_TOTAL:
        return _two_sided(_subset_sum_distribution(doubled, len(y)), observed)
    n_x, n_y, n = len(x), len(y), len(pooled)
    ranks = doubled / 2.0
    mean = n_y * (n + 1) / 2.0
    _, tie_counts = np.unique(pooled, return_counts=True)
    tie_term = float(np.sum(tie_counts**3 - tie_counts)) / (n * (n - 1))
    var = n_x * n_y / 12.0 * ((n + 1) - tie_term)
    z = (ranks[n_x:].sum() - mean) / math.sqrt(var)
    return _normal_two_sided(z)


# --------------------------------------------------------------------------- estimates + CIs


def _walsh_averages(d: np.ndarray) -> np.ndarray:
    i, j = np.triu_indices(len(d))
    return np.sort((d[i] + d[j]) / 2.0)


def _pairwise_differences(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.sort((y[None, :] - x[:, None]).ravel())


def _signed_rank_critical(n: int, alpha: float) -> int:
    """Largest c with P(T+ <= c-1) <= alpha/2 (0 when no such interval exists)."""
    cdf = _untied_signed_rank_cdf(n)
    return int(np.searchsorted(cdf, alpha / 2.0, side="right"))


def signed_rank_reaches(pairs: int, alpha: float) -> bool:
    """Whether any signed-rank result on this many pairs can be significant at alpha (two-sided):
    with 5 pairs the smallest p is 2/32, so never at 0.05."""
    return _signed_rank_critical(pairs, alpha) > 0


def _mann_whitney_critical(n_x: int, n_y: int, alpha: float) -> int:
    if n_x + n_y <= _MAX_EXACT_MW_TOTAL:
        cdf = _untied_mann_whitney_cdf(n_x, n_y)
        return int(np.searchsorted(cdf, alpha / 2.0, side="right"))
    z = _normal_quantile(1 - alpha / 2.0)
    mean = n_x * n_y / 2.0
    sd = math.sqrt(n_x * n_y * (n_x + n_y + 1) / 12.0)
    return max(0, int(math.floor(mean - z * sd)))


def hodges_lehmann_paired(d: Sequence[float], *, alpha: float = 0.05) -> tuple[float, float, float]:
    """(estimate, ci_low, ci_high) of the centre of the differences d (signed-rank inversion).

    The interval is [W(c), W(M+1-c)] of the M sorted Walsh averages; (-inf, inf) when n is too
    small for the requested level.
    """
    d = np.asarray(d, dtype=float)
    walsh = _walsh_averages(d)
    estimate = float(np.median(walsh))
    c = _signed_rank_critical(len(d), alpha)
    if c == 0:
        return estimate, -math.inf, math.inf
    return estimate, float(walsh[c - 1]), float(walsh[len(walsh) - c])


def hodges_lehmann_shift(x: Sequence[float], y: Sequence[float], *,
                         alpha: float = 0.05) -> tuple[float, float, float]:
    """(estimate, ci_low, ci_high) of the shift y - x (Mann-Whitney inversion)."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    diffs = _pairwise_differences(x, y)
    estimate = float(np.median(diffs))
    c = _mann_whitney_critical(len(x), len(y), alpha)
    if c == 0:
        return estimate, -math.inf, math.inf
    return estimate, float(diffs[c - 1]), float(diffs[len(diffs) - c])


# --------------------------------------------------------------------------- verdicts


def _pct(log_change: float) -> float:
    if math.isinf(log_change):
        return log_change
    return math.expm1(log_change) * 100.0


def _tau(noise_floor: float | None) -> float:
    if noise_floor is None:
        return MIN_TAU_PCT
    if not (isinstance(noise_floor, (int, float)) and math.isfinite(noise_floor)
            and noise_floor >= 0):
        raise ValueError(f"noise_floor_pct must be a finite number >= 0, got {noise_floor!r}")
    return max(MIN_TAU_PCT, 2.0 * float(noise_floor))


def _decide(*, delta_pct: float, ci_low_pct: float, ci_high_pct: float, tau_pct: float,
            higher_is_better: bool) -> str:
    ci_excludes_zero = ci_low_pct > 0 or ci_high_pct < 0
    if ci_excludes_zero and abs(delta_pct) >= tau_pct:
        comparison_higher = delta_pct > 0
        if comparison_higher == higher_is_better:
            return Verdict.IMPROVEMENT
        return Verdict.REGRESSION
    if -tau_pct < ci_low_pct and ci_high_pct < tau_pct:
        return Verdict.NO_CHANGE
    return Verdict.INCONCLUSIVE


decide_verdict = _decide     # the verdict from an estimate, its interval and τ (also used by redline.analysis.counted)


def _min_detectable_pct(*, estimate: float, low: float, high: float, tau_pct: float) -> float:
    """Smallest change that, with this spread, would have given a regression/improvement.

    The interval is shift-equivariant: data shifted by delta (in log units) moves the
    interval by delta. A rise is flagged once the interval's lower end passes 0, a drop
    once its upper end does, and only when the change is at least tau.
    """
    if math.isinf(low) or math.isinf(high):
        return math.inf
    rise = _pct(estimate - low)
    drop = -_pct(-(high - estimate))
    return max(rise, drop, tau_pct)


def _effect_words(*, worse: int, better: int, total: int, unit: str) -> str:
    if worse == 0 and better == 0:
        return f"no difference in any of {total} {unit}"
    if worse > better:
        return f"comparison slower in {worse} of {total} {unit}"
    if better > worse:
        return f"comparison faster in {better} of {total} {unit}"
    return f"comparison slower in {worse} and faster in {better} of {total} {unit}"


def compare_metric(baseline: Sequence[float], comparison: Sequence[float], *,
                   paired: bool, higher_is_better: bool,
                   noise_floor_pct: float | None = None,
                   confidence: float = 0.95, runs_allowed: int | None = None) -> MetricComparison:
    """Compare one metric between baseline and comparison runs (values must be > 0).

    paired=True means run i of each side belongs together (interleaved A B B A ... runs);
    both sides must then have the same number of runs. higher_is_better says which direction
    is good (True for ops/sec, False for latency and CPU per operation). noise_floor_pct is
    the A/A noise floor from :func:`noise_floor_pct`; the practical threshold is
    tau = max(2%, 2 x noise floor). runs_allowed, when the runs may still grow to that many per
    side, asks for `decision_chance` of an inconclusive paired result (:func:`decision_chance`).
    """
    alpha = _check_confidence(confidence)
    tau_pct = _tau(noise_floor_pct)
    base = _as_positive_array(baseline, name="baseline")
    comp = _as_positive_array(comparison, name="comparison")
    if len(base) < 2 or len(comp) < 2:
        raise ValueError(
            f"need at least 2 runs per side, got baseline={len(base)} comparison={len(comp)}"
        )
    if paired and len(base) != len(comp):
        raise ValueError(
            "paired comparison needs the same number of runs on both sides: "
            f"baseline has {len(base)}, comparison {len(comp)}"
        )
    # Rounding to 1e-9 (a change of a millionth of a percent) makes equal ratios compare
    # equal (110/100 and 220/200 can differ in the last bits of their logarithms), so ties
    # are recognised.
    log_b, log_c = np.round(np.log(base), 9), np.round(np.log(comp), 9)

    use_paired = paired and signed_rank_reaches(len(base), alpha)
    if use_paired:
        diffs = np.round(np.log(comp) - np.log(base), 9)
        estimate, low, high = hodges_lehmann_paired(diffs, alpha=alpha)
        p_value = signed_rank_pvalue(diffs)
    else:
        estimate, low, high = hodges_lehmann_shift(log_b, log_c, alpha=alpha)
        p_value = mann_whitney_pvalue(log_b, log_c)

    if paired:
        higher = int(np.sum(comp > base))
        lower = int(np.sum(comp < base))
        total, unit = len(base), "pairs"
    else:
        higher = int(np.sum(comp[None, :] > base[:, None]))
        lower = int(np.sum(comp[None, :] < base[:, None]))
        total, unit = len(base) * len(comp), "baseline x comparison run pairs"
    worse, better = (lower, higher) if higher_is_better else (higher, lower)

    delta_pct, ci_low_pct, ci_high_pct = _pct(estimate), _pct(low), _pct(high)
    verdict = _decide(delta_pct=delta_pct, ci_low_pct=ci_low_pct, ci_high_pct=ci_high_pct, tau_pct=tau_pct,
                      higher_is_better=higher_is_better)
    chance = None
    if use_paired and verdict == Verdict.INCONCLUSIVE and runs_allowed is not None and len(base) < runs_allowed:
        chance = decision_chance(diffs, tau_pct=tau_pct, alpha=alpha, runs_allowed=runs_allowed)
    return MetricComparison(
        baseline_median=float(np.median(base)),
        comparison_median=float(np.median(comp)),
        delta_pct=delta_pct,
        ci_low_pct=ci_low_pct,
        ci_high_pct=ci_high_pct,
        p_value=p_value,
        verdict=verdict,
        tau_pct=tau_pct,
        min_detectable_pct=_min_detectable_pct(estimate=estimate, low=low, high=high,
                                               tau_pct=tau_pct),
        n_baseline=len(base),
        n_comparison=len(comp),
        paired=use_paired,
        effect_words=_effect_words(worse=worse, better=better, total=total, unit=unit),
        higher_is_better=higher_is_better,
        decision_chance=chance,
    )


#: Below this chance that the runs still allowed turn an inconclusive comparison into a decision,
#: adding them is futile (redline.analysis.comparison.extra_runs_needed). docs/statistics.md,
#: "Stopping for futility", gives the replay of stored runs and the simulations that chose it.
FUTILITY_CHANCE = 0.05


def decision_chance(diffs: np.ndarray, *, tau_pct: float, alpha: float, runs_allowed: int) -> float:
    """The chance that these paired log differences, grown to `runs_allowed` pairs, end decided at
    that last look: a change beyond τ whose interval excludes 0, or an interval inside ±τ. (A
    decision at an earlier look is not added: the chance of deciding at all is at least this.)

    Stochastic curtailment with predictive power (Spiegelhalter, Freedman & Blackburn 1986), on the
    rank statistics redline decides with. The final interval is the Walsh averages' order
    statistics c_N and M_N + 1 - c_N of N pairs; the Walsh averages of the pairs so far estimate
    their distribution, so the final interval's reach below and above the estimate is read at the
    quantiles c_N / M_N and 1 - c_N / M_N of today's Walsh averages. (Scaling today's interval by
    sqrt(n / N) instead misjudges timing noise, whose rare slow runs widen a small sample's
    interval far more than they widen a larger one's.) The final estimate, averaged over what the
    true change may be given the runs so far, is normal around today's with spread
    (final half-width / z)·sqrt(N / n - 1). The chance is its mass where the final interval decides.

    Stopping when the chance is small never makes a verdict of this comparison: it stays
    inconclusive with the interval its runs gave, so its false alarms cannot grow; the price is
    power. 0 when no run may be added; 1 when the final interval could not exclude anything (too
    few pairs at this confidence) or the runs so far do not spread at all (nothing to predict from).
    """
    n, final = len(diffs), runs_allowed
    if n >= final:
        return 0.0
    critical = _signed_rank_critical(final, alpha)
    if critical == 0:
        return 1.0
    walsh = _walsh_averages(np.asarray(diffs, dtype=float))      # sorted
    estimate = float(np.median(walsh))
    level = critical / (final * (final + 1) / 2)
    below = estimate - float(np.quantile(walsh, level))            # the final interval's reach under
    above = float(np.quantile(walsh, 1.0 - level)) - estimate      # and over the estimate
    rise, drop = math.log1p(tau_pct / 100.0), -math.log1p(-tau_pct / 100.0)   # ±τ on the log scale
    spread = (below + above) / 2.0 / _normal_quantile(1.0 - alpha / 2.0) * math.sqrt(final / n - 1.0)
    if spread <= 0.0:
        return 1.0

    def under(x: float) -> float:                     # P(final estimate < x)
        return 0.5 * math.erfc((estimate - x) / (spread * math.sqrt(2.0)))

    chance = under(-max(drop, above)) + (1.0 - under(max(rise, below)))     # a change, clear of 0
    if rise - above > below - drop:
        chance += under(rise - above) - under(below - drop)                 # no change, inside ±τ
    return min(1.0, max(0.0, chance))


def noise_floor_pct(aa_baseline: Sequence[float], aa_comparison: Sequence[float]) -> float:
    """The noise floor of a test on this machine, from A/A runs (same target on both sides).

    Defined as the magnitude of the change the A/A comparison shows: |Hodges-Lehmann
    estimate| in %. The statistical test already accounts for run-to-run noise; tau =
    2 x this floor guards against what the test cannot see, a systematic difference between
    two identical sides (process placement, memory layout, a side that always runs second).
    Runs of equal count are treated as interleaved pairs. More A/A runs give a steadier floor.
    """
    if min(len(aa_baseline), len(aa_comparison)) < 3:
        raise ValueError(
            f"too few A/A runs for a noise floor ({len(aa_baseline)} + {len(aa_comparison)}); "
            "use at least 5 per side"
        )
    paired = len(aa_baseline) == len(aa_comparison)
    result = compare_metric(aa_baseline, aa_comparison, paired=paired, higher_is_better=True)
    return abs(result.delta_pct)


def benjamini_hochberg(p_values: Sequence[float], q: float = 0.05) -> list[bool]:
    """Benjamini-Hochberg step-up: which hypotheses are rejected at false-discovery rate q.

    Returns one flag per p-value, in input order.
    """
    if not (0 < q < 1):
        raise ValueError(f"q must be in (0, 1), got {q!r}")
    p = [float(v) for v in p_values]
    for i, v in enumerate(p):
        if not (0.0 <= v <= 1.0):
            raise ValueError(f"p_values[{i}] = {v!r}: p-values must lie in [0, 1]")
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    cutoff = 0
    for rank, i in enumerate(order, start=1):
        if p[i] <= rank * q / m:
            cutoff = rank
    rejected = [False] * m
    for i in order[:cutoff]:
        rejected[i] = True
    return rejected


def benjamini_hochberg_room(p_values: Sequence[float], *, family: int, q: float = 0.05) -> float:
    """The largest p-value one more hypothesis may have and still be rejected by Benjamini-Hochberg
    at rate q over the final family, whatever the p-values of the hypotheses not yet tested, given
    these (already final) p-values and at most `family` hypotheses in all (these and the new one
    included).

    The new p is rejected when it is at most q*k/m for a k at which k-1 of these are at most q*k/m:
    then at least k p-values lie at or under q*k/m, so the step-up cutoff reaches k or beyond. A
    smaller final family only raises every q*k/m. With none of these small enough this is q/m,
    the Bonferroni threshold of a lone finding."""
    if not (0 < q < 1):
        raise ValueError(f"q must be in (0, 1), got {q!r}")
    p = sorted(float(v) for v in p_values)
    if family < len(p) + 1:
        raise ValueError(f"a family of {family} cannot hold {len(p)} p-values and one more")
    for k in range(len(p) + 1, 0, -1):
        threshold = q * k / family
        if k == 1 or p[k - 2] <= threshold:      # the (k-1)-th smallest: k-1 of them at or under it
            return threshold
    raise AssertionError("unreachable: k = 1 always returns")


# Pocock (1977): the constant two-sided level per look that keeps the overall level at 5%
# over K equally spaced looks at accumulating data.
_POCOCK_5PCT = {1: 0.05, 2: 0.0294, 3: 0.0221, 4: 0.0182, 5: 0.0158, 6: 0.0142, 7: 0.0130,
                8: 0.0120, 9: 0.0112, 10: 0.0106}


def confidence_per_look(looks: int, confidence: float = 0.95) -> float:
    """The confidence to use at each look when runs are added while inconclusive.

    Testing again after every extra block of runs ("peeking") inflates false alarms: with
    looks at 7, 9, 11, 13 and 15 pairs and 95% each, an A/A comparison ends in a verdict
    about 10% of the time instead of 5% (scripts/simulate_stats.py, adaptive table).
    Pass the total number of looks the budget allows, e.g. 5 for 7 -> 15 runs in steps of
    2, and use the returned confidence for every look. For 95% overall this is Pocock's
    constant boundary (0.0158 per look for 5 looks), otherwise Bonferroni.
    """
    if not (isinstance(looks, int) and looks >= 1):
        raise ValueError(f"looks must be an integer >= 1, got {looks!r}")
    alpha = _check_confidence(confidence)
    if math.isclose(alpha, 0.05) and looks in _POCOCK_5PCT:
        return 1.0 - _POCOCK_5PCT[looks]
    return 1.0 - alpha / looks


def needs_more_runs(c: MetricComparison, futility_chance: float = FUTILITY_CHANCE) -> bool:
    """True when more repetitions could turn the answer into a decision: inconclusive, and, where
    its chance to decide was asked (`decision_chance`), at least `futility_chance` (0: whatever it is)."""
    if c.verdict != Verdict.INCONCLUSIVE:
        return False
    return c.decision_chance is None or c.decision_chance >= futility_chance
