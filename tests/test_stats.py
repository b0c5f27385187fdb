"""Tests for redline.analysis.stats: hand-checked cases, scipy cross-checks, properties, simulation."""

from __future__ import annotations

import importlib.util
import itertools
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.stats

from redline.analysis import stats
from redline.analysis.stats import (
    MetricComparison,
    Verdict,
    benjamini_hochberg,
    compare_metric,
    hodges_lehmann_paired,
    hodges_lehmann_shift,
    confidence_per_look,
    mann_whitney_pvalue,
    needs_more_runs,
    noise_floor_pct,
    signed_rank_pvalue,
)

ROOT = Path(__file__).resolve().parent.parent


# --------------------------------------------------------------------------- hand-checked


def test_signed_rank_all_positive_is_two_over_two_to_the_n():
    # every sign positive is the single most extreme of 2**n equally likely sign patterns
    assert signed_rank_pvalue([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]) == pytest.approx(2 / 128)
    assert signed_rank_pvalue([0.1, 0.2, 0.3, 0.4, 0.5]) == pytest.approx(2 / 32)


def test_signed_rank_all_zero_is_one():
    assert signed_rank_pvalue([0.0, 0.0, 0.0]) == 1.0


def test_mann_whitney_complete_separation():
    # 3 vs 3, fully separated: 2 of the C(6,3) = 20 equally likely splits are as extreme
    assert mann_whitney_pvalue([1, 2, 3], [4, 5, 6]) == pytest.approx(2 / 20)


def test_hodges_lehmann_paired_by_hand():
    # Walsh averages of 1,2,3: 1, 1.5, 2, 2, 2.5, 3 -> median 2
    est, low, high = hodges_lehmann_paired([1.0, 2.0, 3.0])
    assert est == 2.0
    assert (low, high) == (-math.inf, math.inf)  # 3 pairs cannot give a 95% interval


def test_paired_interval_is_third_and_third_last_walsh_average_for_seven():
    # n = 7: T+ <= 2 for the sign patterns {}, {1}, {2}: P(T+ <= 2) = 3/128 <= 0.025 <
    # P(T+ <= 3) = 5/128, so c = 3: the interval is [W(3), W(26)] of the 28 sorted Walsh
    # averages, with coverage 1 - 6/128 = 95.3%
    d = np.array([-0.03, 0.01, 0.02, 0.04, 0.05, 0.08, 0.13])
    walsh = sorted((d[i] + d[j]) / 2 for i in range(7) for j in range(i, 7))
    est, low, high = hodges_lehmann_paired(d)
    assert low == pytest.approx(walsh[2])
    assert high == pytest.approx(walsh[25])
    assert est == pytest.approx(np.median(walsh))


def test_hodges_lehmann_shift_by_hand():
    # differences y - x: 3,2,1,4,3,2,5,4,3 -> median 3
    est, _, _ = hodges_lehmann_shift([1, 2, 3], [4, 5, 6])
    assert est == 3.0


def test_throughput_drop_in_every_pair_is_a_regression():
    base = [100_000, 101_000, 99_500, 100_400, 100_900, 99_800, 100_200]
    comp = [v * 0.90 * (1 + 0.002 * (i % 3 - 1)) for i, v in enumerate(base)]
    r = compare_metric(base, comp, paired=True, higher_is_better=True)
    assert r.verdict == Verdict.REGRESSION
    assert r.delta_pct == pytest.approx(-10, abs=0.5)
    assert r.ci_low_pct < r.delta_pct < r.ci_high_pct < 0
    assert r.p_value == pytest.approx(2 / 128)
    assert r.effect_words == "comparison slower in 7 of 7 pairs"
    assert r.paired and r.n_baseline == 7 and r.n_comparison == 7
    assert r.baseline_median == 100_200
    assert not needs_more_runs(r)


def test_latency_rise_is_a_regression_and_fall_an_improvement():
    base = [1.00, 1.02, 0.99, 1.01, 1.00, 0.98, 1.03]
    worse = [v * 1.15 for v in base]
    better = [v / 1.15 for v in base]
    up = compare_metric(base, worse, paired=True, higher_is_better=False)
    down = compare_metric(base, better, paired=True, higher_is_better=False)
    assert up.verdict == Verdict.REGRESSION
    assert up.effect_words == "comparison slower in 7 of 7 pairs"
    assert down.verdict == Verdict.IMPROVEMENT
    assert down.effect_words == "comparison faster in 7 of 7 pairs"
    assert up.delta_pct == pytest.approx(15)


def test_identical_runs_are_no_change():
    base = [100.0, 102.0, 98.0, 101.0, 99.0, 100.5, 99.5]
    r = compare_metric(base, list(base), paired=True, higher_is_better=True)
    assert r.verdict == Verdict.NO_CHANGE
    assert r.p_value == 1.0
    assert (r.delta_pct, r.ci_low_pct, r.ci_high_pct) == (0.0, 0.0, 0.0)
    assert r.effect_words == "no difference in any of 7 pairs"


def test_equal_ratios_are_ties_whatever_the_level():
    # 110/100, 220/200, ... are the same ratio; their logarithms must tie exactly
    base = [100.0, 200.0, 300.0, 0.7, 1.3, 170.0, 90.0]
    comp = [v * 1.1 for v in base]
    comp[3] = base[3] / 1.1
    r = compare_metric(base, comp, paired=True, higher_is_better=False)
    # all seven |log ratios| tie (mid-rank 4); six up, one down: p = 2 * P(>= 6 of 7 up)
    assert r.p_value == pytest.approx(2 * 8 / 128)
    assert r.p_value == pytest.approx(_brute_force_signed_rank([1, 1, 1, -1, 1, 1, 1]))
    assert r.effect_words == "comparison slower in 6 of 7 pairs"


def test_tight_small_difference_is_no_change_even_if_significant():
    base = np.array([100.0, 100.1, 99.9, 100.05, 99.95, 100.02, 99.98])
    comp = base * 1.005
    r = compare_metric(base, comp, paired=True, higher_is_better=True)
    assert r.ci_low_pct > 0  # statistically detectable ...
    assert r.verdict == Verdict.NO_CHANGE  # ... but far below tau = 2%


def test_noisy_data_is_inconclusive_with_minimum_detectable_effect():
    base = [100, 80, 120, 95, 110, 70, 130]
    comp = [105, 75, 128, 90, 118, 72, 126]
    r = compare_metric(base, comp, paired=True, higher_is_better=True)
    assert r.verdict == Verdict.INCONCLUSIVE
    assert needs_more_runs(r)
    assert r.min_detectable_pct > r.tau_pct
    assert r.ci_low_pct < 0 < r.ci_high_pct


def test_five_pairs_fall_back_to_mann_whitney():
    # with 5 pairs the signed-rank test cannot reach 95%; Mann-Whitney 5 vs 5 can
    base = [100.0, 101.0, 99.0, 100.5, 99.5]
    comp = [v * 0.9 for v in base]
    r = compare_metric(base, comp, paired=True, higher_is_better=True)
    assert r.paired is False
    assert r.verdict == Verdict.REGRESSION
    assert r.p_value == pytest.approx(2 / 252)
    assert r.effect_words == "comparison slower in 5 of 5 pairs"


def test_too_few_runs_for_any_interval_is_inconclusive_with_infinite_mde():
    r = compare_metric([100, 101], [90, 91], paired=True, higher_is_better=True)
    assert r.verdict == Verdict.INCONCLUSIVE
    assert math.isinf(r.min_detectable_pct)


def test_tau_from_noise_floor():
    base = [100.0, 100.2, 99.8, 100.1, 99.9, 100.0, 100.05]
    comp = [v * 0.97 for v in base]
    assert compare_metric(base, comp, paired=True, higher_is_better=True).tau_pct == 2.0
    strict = compare_metric(base, comp, paired=True, higher_is_better=True, noise_floor_pct=0.5)
    assert strict.tau_pct == 2.0
    assert strict.verdict == Verdict.REGRESSION
    loose = compare_metric(base, comp, paired=True, higher_is_better=True, noise_floor_pct=2.5)
    assert loose.tau_pct == 5.0
    # the 3% change is real but smaller than tau = 5%, and the interval lies inside +-5%
    assert loose.verdict == Verdict.NO_CHANGE


def test_unpaired_effect_words_count_all_run_pairs():
    r = compare_metric([100, 101, 102], [90, 91, 103, 89], paired=False, higher_is_better=True)
    assert r.effect_words == "comparison slower in 9 of 12 baseline x comparison run pairs"
    assert r.n_baseline == 3 and r.n_comparison == 4 and not r.paired


def test_noise_floor_from_aa_runs():
    rng = np.random.default_rng(3)
    a = 1000 * np.exp(rng.normal(0, 0.01, 9))
    b = 1000 * np.exp(rng.normal(0, 0.01, 9))
    floor = noise_floor_pct(a, b)
    r = compare_metric(a, b, paired=True, higher_is_better=True)
    assert floor == pytest.approx(abs(r.delta_pct))
    assert 0 < floor < 2
    # a systematic 4% difference between two "identical" sides shows up in the floor
    assert noise_floor_pct(a, b * 1.04) == pytest.approx(abs(r.delta_pct + 4), abs=0.5)
    with pytest.raises(ValueError, match="too few A/A runs"):
        noise_floor_pct([1, 2], [1, 2])


def test_benjamini_hochberg_room_is_what_a_lone_finding_needs_with_no_earlier_discoveries():
    assert stats.benjamini_hochberg_room([], family=400) == pytest.approx(0.05 / 400)
    assert stats.benjamini_hochberg_room([0.3, 0.9], family=400) == pytest.approx(0.05 / 400)
    # two earlier discoveries at or under 3q/m: the third finding needs 3q/m, not q/m
    assert stats.benjamini_hochberg_room([1e-6, 2e-4, 0.5], family=400) == pytest.approx(3 * 0.05 / 400)
    with pytest.raises(ValueError, match="family of 2 cannot hold 2 p-values and one more"):
        stats.benjamini_hochberg_room([0.1, 0.2], family=2)


def test_a_p_value_inside_the_room_is_rejected_whatever_the_untested_ones_turn_out_to_be():
    """BH over the final family (the earlier p-values, the new one at the room, and the hypotheses
    not yet tested, any p-values, any count up to the family) rejects the new one; a little above
    the room, with the untested ones all at 1, it does not: the room is the largest such p."""
    rng = np.random.default_rng(35)
    for _ in range(2000):
        family = int(rng.integers(1, 60))
        earlier = [float(v) for v in rng.uniform(0, 0.05, size=int(rng.integers(0, family))) ** 2]
        room = stats.benjamini_hochberg_room(earlier, family=family)
        untested = [float(v) for v in rng.uniform(0, 1, size=int(rng.integers(0, family - len(earlier))))]
        assert benjamini_hochberg([*earlier, room, *untested])[len(earlier)], (earlier, room, untested)
        worst = [1.0] * (family - len(earlier) - 1)
        assert not benjamini_hochberg([*earlier, room * 1.0001, *worst])[len(earlier)], (earlier, room)


def test_benjamini_hochberg_step_up():
    assert benjamini_hochberg([0.01, 0.04, 0.03, 0.005]) == [True, True, True, True]
    assert benjamini_hochberg([0.01, 0.02, 0.03, 0.5]) == [True, True, True, False]
    # step-up: 0.03 > 1 * 0.05 / 2 alone, but rejected because 0.04 <= 2 * 0.05 / 2
    assert benjamini_hochberg([0.04, 0.03]) == [True, True]
    assert benjamini_hochberg([0.2, 0.3, 0.04]) == [False, False, False]
    assert benjamini_hochberg([]) == []
    assert benjamini_hochberg([0.02, 0.5], q=0.01) == [False, False]


def test_confidence_per_look():
    assert confidence_per_look(1) == pytest.approx(0.95)
    assert confidence_per_look(5) == pytest.approx(1 - 0.0158)  # Pocock, 5 looks
    assert confidence_per_look(20) == pytest.approx(1 - 0.05 / 20)  # Bonferroni beyond table
    assert confidence_per_look(2, confidence=0.9) == pytest.approx(0.95)
    levels = [confidence_per_look(k) for k in range(1, 11)]
    assert levels == sorted(levels)
    with pytest.raises(ValueError, match="looks"):
        confidence_per_look(0)


def test_stricter_confidence_widens_the_interval():
    base, comp = _random_pair(4, n=9)
    normal = compare_metric(base, comp, paired=True, higher_is_better=True)
    strict = compare_metric(base, comp, paired=True, higher_is_better=True,
                            confidence=confidence_per_look(5))
    assert strict.ci_low_pct <= normal.ci_low_pct and strict.ci_high_pct >= normal.ci_high_pct
    assert strict.p_value == normal.p_value
    assert strict.delta_pct == normal.delta_pct


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: compare_metric([1, 2, -3], [1, 2, 3], paired=True, higher_is_better=True),
         r"baseline\[2\] = -3.0: values must be positive"),
        (lambda: compare_metric([1, 2, 3], [1, float("nan"), 3], paired=True,
                                higher_is_better=True), r"comparison\[1\] = nan"),
        (lambda: compare_metric([1, 2, 3], [1, 2], paired=True, higher_is_better=True),
         "same number of runs"),
        (lambda: compare_metric([1], [1, 2], paired=False, higher_is_better=True),
         "at least 2 runs"),
        (lambda: compare_metric([1, 2], [1, 2], paired=False, higher_is_better=True,
                                confidence=95), "confidence"),
        (lambda: compare_metric([1, 2], [1, 2], paired=False, higher_is_better=True,
                                noise_floor_pct=-1), "noise_floor_pct"),
        (lambda: compare_metric(["a", 2], [1, 2], paired=False, higher_is_better=True),
         "baseline: values must be numbers"),
        (lambda: benjamini_hochberg([0.5, 1.5]), r"p_values\[1\] = 1.5"),
        (lambda: benjamini_hochberg([0.5], q=0), "q must be"),
    ],
)
def test_bad_input_says_what_and_where(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# --------------------------------------------------------------------------- scipy cross-checks


@pytest.mark.parametrize("seed", range(20))
def test_signed_rank_pvalue_matches_scipy(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(4, 25))
    d = rng.normal(rng.uniform(-1, 1), 1, n)
    expected = scipy.stats.wilcoxon(d, method="exact").pvalue
    assert signed_rank_pvalue(d) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("seed", range(20))
def test_mann_whitney_pvalue_matches_scipy(seed):
    rng = np.random.default_rng(100 + seed)
    n_x, n_y = (int(v) for v in rng.integers(3, 20, 2))
    x = rng.normal(0, 1, n_x)
    y = rng.normal(rng.uniform(-1.5, 1.5), 1, n_y)
    expected = scipy.stats.mannwhitneyu(y, x, method="exact").pvalue
    assert mann_whitney_pvalue(x, y) == pytest.approx(expected, rel=1e-9)


def test_mann_whitney_large_samples_match_scipy_asymptotic():
    rng = np.random.default_rng(7)
    x = np.round(rng.normal(0, 1, 70), 1)  # ties
    y = np.round(rng.normal(0.4, 1, 60), 1)
    expected = scipy.stats.mannwhitneyu(y, x, method="asymptotic", use_continuity=False).pvalue
    assert mann_whitney_pvalue(x, y) == pytest.approx(expected, rel=1e-6)


def _brute_force_signed_rank(d):
    d = np.asarray(d, dtype=float)
    ranks = scipy.stats.rankdata(np.abs(d))  # Pratt: zeros are ranked ...
    nonzero = np.flatnonzero(d != 0)  # ... but never flipped
    observed = ranks[d > 0].sum()
    stats_ = [sum(ranks[i] for i, s in zip(nonzero, signs) if s)
              for signs in itertools.product([0, 1], repeat=len(nonzero))]
    stats_ = np.array(stats_)
    lower = np.mean(stats_ <= observed + 1e-9)
    upper = np.mean(stats_ >= observed - 1e-9)
    return min(1.0, 2 * min(lower, upper))


def _brute_force_mann_whitney(x, y):
    pooled = np.concatenate([x, y])
    ranks = scipy.stats.rankdata(pooled)
    observed = ranks[len(x):].sum()
    sums = np.array([ranks[list(c)].sum()
                     for c in itertools.combinations(range(len(pooled)), len(y))])
    lower = np.mean(sums <= observed + 1e-9)
    upper = np.mean(sums >= observed - 1e-9)
    return min(1.0, 2 * min(lower, upper))


@pytest.mark.parametrize("seed", range(10))
def test_ties_and_zeros_are_exact(seed):
    rng = np.random.default_rng(200 + seed)
    # quantised like latency percentiles: many ties and zero differences
    d = rng.integers(-3, 5, int(rng.integers(5, 12))).astype(float)
    assert signed_rank_pvalue(d) == pytest.approx(_brute_force_signed_rank(d), rel=1e-9)
    x = rng.integers(0, 5, 6).astype(float)
    y = rng.integers(1, 6, 6).astype(float)
    assert mann_whitney_pvalue(x, y) == pytest.approx(_brute_force_mann_whitney(x, y), rel=1e-9)


@pytest.mark.parametrize("seed", range(10))
def test_hodges_lehmann_estimates_match_definition(seed):
    rng = np.random.default_rng(300 + seed)
    d = rng.standard_t(3, int(rng.integers(6, 15)))
    walsh = [(d[i] + d[j]) / 2 for i in range(len(d)) for j in range(i, len(d))]
    assert hodges_lehmann_paired(d)[0] == pytest.approx(np.median(walsh))
    x, y = rng.normal(0, 1, 8), rng.normal(1, 1, 9)
    assert hodges_lehmann_shift(x, y)[0] == pytest.approx(np.median([b - a for a in x for b in y]))


@pytest.mark.parametrize("seed", range(10))
def test_paired_interval_inverts_scipy_wilcoxon(seed):
    # the interval is the set of shifts theta that scipy's exact test does not reject
    rng = np.random.default_rng(400 + seed)
    n = int(rng.integers(6, 16))
    d = rng.normal(0.5, 1, n)
    _, low, high = hodges_lehmann_paired(d)
    eps = 1e-7
    for theta, rejected in [(low - eps, True), (low + eps, False),
                            (high - eps, False), (high + eps, True)]:
        p = scipy.stats.wilcoxon(d - theta, method="exact").pvalue
        assert (p <= 0.05) == rejected, (theta, p)


@pytest.mark.parametrize("seed", range(10))
def test_unpaired_interval_inverts_scipy_mann_whitney(seed):
    rng = np.random.default_rng(500 + seed)
    x = rng.normal(0, 1, int(rng.integers(4, 12)))
    y = rng.normal(1, 1, int(rng.integers(4, 12)))
    _, low, high = hodges_lehmann_shift(x, y)
    eps = 1e-7
    for theta, rejected in [(low - eps, True), (low + eps, False),
                            (high - eps, False), (high + eps, True)]:
        p = scipy.stats.mannwhitneyu(y - theta, x, method="exact").pvalue
        assert (p <= 0.05) == rejected, (theta, p)


# --------------------------------------------------------------------------- properties


def _random_pair(seed: int, *, n: int = 7, shift: float = 0.97):
    rng = np.random.default_rng(seed)
    base = 50_000 * np.exp(rng.normal(0, 0.02, n))
    comp = 50_000 * shift * np.exp(rng.normal(0, 0.02, n))
    return base, comp


@pytest.mark.parametrize("paired", [True, False])
def test_scale_invariance(paired):
    base, comp = _random_pair(1)
    a = compare_metric(base, comp, paired=paired, higher_is_better=True)
    b = compare_metric(base * 1e-3, comp * 1e-3, paired=paired, higher_is_better=True)
    for field in ("delta_pct", "ci_low_pct", "ci_high_pct", "p_value", "min_detectable_pct"):
        assert getattr(a, field) == pytest.approx(getattr(b, field), rel=1e-9, abs=1e-12)
    assert a.verdict == b.verdict


@pytest.mark.parametrize("paired", [True, False])
def test_swapping_sides_inverts_the_ratio(paired):
    base, comp = _random_pair(2)
    ab = compare_metric(base, comp, paired=paired, higher_is_better=True)
    ba = compare_metric(comp, base, paired=paired, higher_is_better=True)
    assert 1 + ab.delta_pct / 100 == pytest.approx(1 / (1 + ba.delta_pct / 100))
    assert 1 + ab.ci_low_pct / 100 == pytest.approx(1 / (1 + ba.ci_high_pct / 100))
    assert ab.p_value == pytest.approx(ba.p_value)


@pytest.mark.parametrize("paired", [True, False])
def test_bigger_shift_never_weakens_the_evidence(paired):
    rng = np.random.default_rng(5)
    base = 1000 * np.exp(rng.normal(0, 0.03, 8))
    noise = np.exp(rng.normal(0, 0.03, 8))
    previous = None
    for factor in np.linspace(1.0, 0.8, 15):
        r = compare_metric(base, 1000 * factor * noise, paired=paired, higher_is_better=True)
        if previous is not None:
            assert r.delta_pct <= previous.delta_pct + 1e-12
            assert r.ci_high_pct <= previous.ci_high_pct + 1e-12
        previous = r
    assert previous.verdict == Verdict.REGRESSION


@pytest.mark.parametrize("seed", range(5))
def test_direction_flag_swaps_regression_and_improvement(seed):
    base, comp = _random_pair(seed, shift=0.9)
    as_throughput = compare_metric(base, comp, paired=True, higher_is_better=True)
    as_latency = compare_metric(base, comp, paired=True, higher_is_better=False)
    swap = {Verdict.REGRESSION: Verdict.IMPROVEMENT, Verdict.IMPROVEMENT: Verdict.REGRESSION,
            Verdict.NO_CHANGE: Verdict.NO_CHANGE, Verdict.INCONCLUSIVE: Verdict.INCONCLUSIVE}
    assert as_latency.verdict == swap[as_throughput.verdict]
    assert as_throughput.effect_words.replace("slower", "X") == \
        as_latency.effect_words.replace("faster", "X")


@pytest.mark.parametrize("seed", range(10))
def test_interval_contains_estimate_and_verdict_is_consistent(seed):
    base, comp = _random_pair(seed, n=6 + seed % 5, shift=[1.0, 0.98, 0.95, 0.9][seed % 4])
    r = compare_metric(base, comp, paired=True, higher_is_better=True)
    assert isinstance(r, MetricComparison)
    assert r.ci_low_pct <= r.delta_pct <= r.ci_high_pct
    if r.verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT):
        assert r.ci_low_pct > 0 or r.ci_high_pct < 0
        assert abs(r.delta_pct) >= r.tau_pct
    if r.verdict == Verdict.NO_CHANGE:
        assert -r.tau_pct < r.ci_low_pct and r.ci_high_pct < r.tau_pct
    assert (r.p_value <= 0.05) == (r.ci_low_pct > 0 or r.ci_high_pct < 0)


def test_module_does_not_import_scipy():
    source = Path(stats.__file__).read_text()
    assert "scipy" not in source.replace("# scipy", "")


# --------------------------------------------------------------------------- simulation


def _load_simulation():
    path = ROOT / "scripts" / "simulate_stats.py"
    spec = importlib.util.spec_from_file_location("simulate_stats", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["simulate_stats"] = module
    spec.loader.exec_module(module)
    return module


def test_fast_simulation_false_alarms_and_power():
    sim = _load_simulation()
    rng = np.random.default_rng(12345)
    for noise in (1.0, 3.0, 6.0):
        for tails in (False, True):
            aa = sim.simulate_redline(rng, model=sim.NoiseModel(noise_pct=noise, heavy_tails=tails),
                                      n=7, shift_pct=0.0, iterations=400)
            assert aa.flagged <= 0.05 + 0.025, (noise, tails, aa)
    strong = sim.simulate_redline(rng, model=sim.NoiseModel(noise_pct=1.0), n=7, shift_pct=10.0,
                                  iterations=200)
    assert strong.regression >= 0.98
    # a real 5% regression at 1% noise is never called "no change"
    five = sim.simulate_redline(rng, model=sim.NoiseModel(noise_pct=1.0), n=7, shift_pct=5.0,
                                iterations=200)
    assert five.no_change == 0.0 and five.regression >= 0.95
    # adding runs while inconclusive stays near 5% with the per-look correction
    adaptive, _ = sim.simulate_adaptive(rng, model=sim.NoiseModel(noise_pct=3.0), shift_pct=0.0,
                                        plan=sim.AdaptivePlan(), iterations=300)
    assert adaptive.flagged <= 0.05 + 0.03, adaptive
    # the upstream rule on the same noise: at 6% noise it flags far more identical comparisons
    upstream = sim.simulate_upstream(rng, model=sim.NoiseModel(noise_pct=6.0), shift_pct=0.0,
                                     iterations=5000)
    assert upstream.flagged > 0.3


# --------------------------------------------------------------------------- stopping for futility

def _cpu_pairs(changes: list[float], *, runs_allowed: int | None = 15, paired: bool = True) -> MetricComparison:
    """A paired CPU-per-op comparison whose pair i changed by changes[i] (fractions), at the per-look
    confidence of 7 -> 15 runs."""
    base = np.full(len(changes), 1000.0)
    return compare_metric(base, base * (1 + np.asarray(changes)), paired=paired, higher_is_better=False,
                          confidence=confidence_per_look(5), runs_allowed=runs_allowed)


SPREAD_AROUND_ONE_PERCENT = [-0.05, 0.03, -0.04, 0.02, -0.01, 0.035, -0.045, 0.025, -0.03]
THREE_PERCENT_AND_ONE_SLOW_PAIR = [-0.03, -0.025, -0.02, -0.035, 0.04, -0.028, -0.022, -0.04, -0.031]


def test_more_runs_of_a_wide_change_near_zero_have_little_chance_to_decide():
    result = _cpu_pairs(SPREAD_AROUND_ONE_PERCENT)
    assert result.verdict == Verdict.INCONCLUSIVE and result.paired
    assert result.decision_chance is not None and result.decision_chance < stats.FUTILITY_CHANCE
    # and indeed: six more pairs like these leave it undecided at 15
    assert _cpu_pairs(SPREAD_AROUND_ONE_PERCENT + SPREAD_AROUND_ONE_PERCENT[:6]).verdict == Verdict.INCONCLUSIVE


def test_a_change_held_back_by_one_slow_pair_keeps_its_chance_and_more_runs_decide_it():
    result = _cpu_pairs(THREE_PERCENT_AND_ONE_SLOW_PAIR)
    assert result.verdict == Verdict.INCONCLUSIVE and result.ci_high_pct > 0
    assert result.decision_chance > stats.FUTILITY_CHANCE
    clean = [c for c in THREE_PERCENT_AND_ONE_SLOW_PAIR if c < 0][:6]
    assert _cpu_pairs(THREE_PERCENT_AND_ONE_SLOW_PAIR + clean).verdict == Verdict.IMPROVEMENT


def test_the_chance_is_asked_only_of_an_inconclusive_paired_result_that_may_still_grow():
    assert _cpu_pairs(SPREAD_AROUND_ONE_PERCENT, runs_allowed=None).decision_chance is None
    assert _cpu_pairs(SPREAD_AROUND_ONE_PERCENT, paired=False).decision_chance is None
    assert _cpu_pairs([-0.03] * 9).decision_chance is None                       # decided
    assert _cpu_pairs(SPREAD_AROUND_ONE_PERCENT[:5]).paired is False               # 5 pairs: Mann-Whitney
    assert _cpu_pairs(SPREAD_AROUND_ONE_PERCENT[:5]).decision_chance is None
    assert _cpu_pairs(SPREAD_AROUND_ONE_PERCENT, runs_allowed=9).decision_chance is None   # no more runs allowed


def test_the_chance_is_stored_with_the_comparison_and_older_documents_read_without_it():
    from redline.analysis.comparison import TestComparison
    stored = TestComparison("t", "server_cpu_us_per_op", _cpu_pairs(SPREAD_AROUND_ONE_PERCENT)).as_json()
    again = TestComparison.from_json(json.loads(json.dumps(stored)))
    assert again.result.decision_chance == pytest.approx(stored["decision_chance"])
    assert again.result.futility_note == TestComparison.from_json(stored).result.futility_note
    older = {k: v for k, v in stored.items() if k != "decision_chance"}      # stored before the chance was
    assert TestComparison.from_json(older).result.decision_chance is None


def test_the_tighter_the_runs_around_a_small_change_the_better_the_chance_of_a_no_change():
    # the same centre (-0.5%), each pair's distance from it scaled: 2x and 1x are hopeless, at 0.5x
    # the interval already nearly fits inside ±2% and 15 pairs will likely say "no change"
    chances = [_cpu_pairs([-0.005 + scale * (c + 0.008) for c in SPREAD_AROUND_ONE_PERCENT]).decision_chance
               for scale in (2.0, 1.0, 0.5)]
    assert chances == sorted(chances) and chances[1] < stats.FUTILITY_CHANCE < chances[2]


def test_the_chance_reads_tau_as_the_verdict_does_a_drop_of_tau_is_log_1_minus_tau():
    # τ = 10% (a 5% noise floor). A drop counts from -10%, i.e. log(0.9) = -0.105, not -log(1.1) = -0.095:
    # at -9.5% with ±1% of spread, 15 pairs will most likely say neither "-10% or more" nor "inside ±10%";
    # at -9.0% they will most likely say "no change".
    wobble = np.array([0.016, -0.012, 0.008, -0.016, 0.004, 0.012, -0.008, 0.0, -0.004])

    def chance(level: float) -> float:
        base = np.full(len(wobble), 1000.0)
        result = compare_metric(base, base * level * np.exp(wobble), paired=True, higher_is_better=False,
                                noise_floor_pct=5.0, confidence=confidence_per_look(5), runs_allowed=15)
        assert result.tau_pct == 10.0 and result.verdict == Verdict.INCONCLUSIVE
        return result.decision_chance
    assert chance(0.905) < 0.5 < chance(0.91)


def test_stopping_for_futility_adds_no_false_alarm_and_saves_runs():
    sim = _load_simulation()
    rng = np.random.default_rng(2026)
    model = sim.NoiseModel(noise_pct=3.0, heavy_tails=True)
    plain, plain_pairs = sim.simulate_adaptive(rng, model=model, shift_pct=0.0, plan=sim.AdaptivePlan(),
                                               iterations=300)
    futile, futile_pairs = sim.simulate_adaptive(rng, model=model, shift_pct=0.0,
                                                 plan=sim.AdaptivePlan(futility_chance=stats.FUTILITY_CHANCE),
                                                 iterations=300)
    assert futile.flagged <= 0.05 + 0.03, futile
    assert futile_pairs < plain_pairs
