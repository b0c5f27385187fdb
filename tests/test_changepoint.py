"""Tests for redline.changepoint on seeded synthetic history series."""

from __future__ import annotations

import numpy as np
import pytest

from redline.changepoint import ChangePoint, detect_change_points


def _noise(seed: int, n: int, *, noise: float = 0.02, level: float = 100.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return level * np.exp(rng.normal(0.0, noise, n))


def test_step_of_five_percent_in_two_percent_noise_is_found_at_its_index():
    hits = []
    for seed in range(6):
        series = _noise(seed, 40)
        series[20:] *= 1.05
        found = detect_change_points(series)
        assert len(found) == 1, (seed, found)
        cp = found[0]
        assert isinstance(cp, ChangePoint)
        assert abs(cp.index - 20) <= 2, (seed, cp)
        assert cp.p_value <= 0.001
        assert 3 < cp.delta_pct < 7
        assert cp.after_median > cp.before_median
        hits.append(cp.index == 20)
    # noise occasionally makes a neighbour look like the edge; mostly it is exact
    assert sum(hits) >= 5, hits


def test_pure_noise_gives_no_change_points():
    for seed in range(6):
        assert detect_change_points(_noise(100 + seed, 60), seed=seed) == []


def test_single_outliers_do_not_make_change_points():
    for seed in range(4):
        series = _noise(200 + seed, 50)
        series[[10, 27, 41]] *= [0.6, 1.5, 0.7]  # wild runs, no shift
        assert detect_change_points(series, seed=seed) == []


def test_two_changes_and_a_recovery():
    rng = np.random.default_rng(5)
    series = np.concatenate([100 * np.exp(rng.normal(0, 0.02, 30)),
                             93 * np.exp(rng.normal(0, 0.02, 30)),
                             100 * np.exp(rng.normal(0, 0.02, 30))])
    found = detect_change_points(series)
    assert [cp.index for cp in found] == [30, 60]
    assert found[0].delta_pct < -4 and found[1].delta_pct > 4
    # medians are taken between neighbouring change points
    assert found[0].after_median == pytest.approx(np.median(series[30:60]))
    assert found[1].before_median == pytest.approx(np.median(series[30:60]))


def test_needs_min_size_points_on_each_side():
    series = _noise(7, 30, noise=0.001)
    series[28:] *= 1.5  # a huge change, but only 2 points after it
    assert detect_change_points(series, min_size=3) == []
    # ranks cap the evidence a few points can give: 3 points after a step are allowed but
    # cannot reach p <= 0.001 (p >= 1/C(30,3) for the order alone); 6 can
    series = _noise(7, 30, noise=0.001)
    series[24:] *= 1.5
    assert [cp.index for cp in detect_change_points(series, min_size=3)] == [24]
    early = _noise(8, 30, noise=0.001)
    early[:6] *= 1.5
    assert [cp.index for cp in detect_change_points(early)] == [6]


def test_is_reproducible_with_a_seed():
    series = _noise(9, 40)
    series[15:] *= 0.95
    assert detect_change_points(series, seed=3) == detect_change_points(series, seed=3)


def test_short_series_have_no_change_points():
    assert detect_change_points([1.0, 2.0, 3.0, 4.0, 5.0]) == []


def test_long_history_finds_the_step():
    series = _noise(11, 200)
    series[120:] *= 0.94
    found = detect_change_points(series)
    assert [cp.index for cp in found] == [120]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"values": [1.0, float("inf"), 2.0]}, r"values\[1\] = inf"),
        ({"values": [[1.0, 2.0]]}, "flat series"),
        ({"values": [1.0] * 10, "min_size": 1}, "min_size"),
        ({"values": [1.0] * 10, "p_threshold": 0}, "p_threshold"),
        ({"values": [1.0] * 10, "window": 4}, "window"),
    ],
)
def test_bad_input_is_rejected_clearly(kwargs, message):
    values = kwargs.pop("values")
    with pytest.raises(ValueError, match=message):
        detect_change_points(values, **kwargs)


def test_constant_and_quantised_series():
    assert detect_change_points([5.0] * 30) == []
    # quantised values (many ties) with a clear step: still found at the step
    series = [1.0, 1.1, 1.0, 1.0, 1.1, 1.0, 1.1, 1.0, 1.0, 1.1, 1.0, 1.0, 1.1, 1.0, 1.0,
              1.3, 1.2, 1.3, 1.3, 1.2, 1.3, 1.3, 1.2, 1.3, 1.3, 1.2, 1.3, 1.3, 1.2, 1.3]
    found = detect_change_points(series)
    assert [cp.index for cp in found] == [15]
    assert found[0].before_median == 1.0 and found[0].after_median == 1.3
