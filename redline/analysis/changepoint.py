"""Change points in a history of sessions: where did performance move, and how sure are we?

Input: a series of sessions, oldest first; each session holds the values of its runs (one
test × topology × target × configuration). Every value is replaced by its logarithm, so a
change is a ratio. The method (docs/history.md has the reasoning and the simulations):

1. Noise model, measured from the series itself. A run's log value is
       level of its segment + session offset (drift, sd ``between``) + run noise (sd ``within``).
   ``within`` is the pooled spread of runs inside their sessions. ``between`` comes from the
   differences of consecutive session means, leaving out those at suspected steps and those
   that a robust scale (Qn) marks as step-like, and taking the Qn of the rest; what run noise
   explains is subtracted, and drift counts only when an F test shows it. A session mean has
   variance between² + within² / runs; in long series a slow wander (lag-1 correlation of the
   offsets) widens it.
2. Split. Binary segmentation on sessions: in a segment, every split leaving at least
   ``min_sessions`` sessions on each side is scored by the standardised difference of the two
   sides' precision-weighted mean levels, z = (mean_after − mean_before) / its standard error.
   The largest |z| among the splits whose change is at least the minimum effect is kept if
   its p-value — Student t (degrees of freedom of the noise estimate, Satterthwaite), times
   the number of splits tried (Bonferroni) — is at most 10× the threshold ("weak" change
   points, as in Apache Otava); both sides are split again.
3. Merge. Each weak change point is re-tested between its neighbours (same test, the split
   fixed, Bonferroni over the splits that window allows); the weakest is dropped while its
   p-value exceeds the threshold, its change is below the minimum effect, or a side too short
   for another change point holds two significantly different sessions.
4. The noise is re-measured without the suspected steps and 2-3 repeated until they settle.
   Then single odd sessions (unlike both neighbours, which agree) are set aside and the
   search is repeated without them.

Significance therefore comes from the size of a step against the measured noise, not from
the number of sessions: a large step with quiet runs is found with two sessions on each side.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

__all__ = ["Analysis", "ChangePoint", "NoiseModel", "OddSession", "analyse_sessions", "detect_change_points",
           "noise_model", "MIN_SESSIONS", "DEFAULT_MIN_EFFECT_PCT"]

MIN_SESSIONS = 2              # sessions at least on each side of a change point
DEFAULT_MIN_EFFECT_PCT = 3.0  # smallest change reported when the test has no calibrated noise floor
_MIN_SESSION_SD = 0.001       # a session mean is never trusted to better than 0.1% (quantised data)
_ODD_TO_GAP = 3.0             # an odd session is this many times further from its neighbours than they are apart
_WANDER_MIN_SESSIONS = 20     # sessions needed before a slow wander between sessions is measured
_MAX_WANDER = 0.8             # a wander is never taken as more correlated than this
_NOISE_ROUNDS = 4             # noise re-measured around the levels found, then the series re-tested
_STEP_LIKE = 3.5              # a session-to-session difference this many robust sds out straddles a step
_DIFFERENCES_EFFICIENCY = 2 / 3  # Qn of n successive differences counted as 2n/3 independent points
_DRIFT_EVIDENCE = 0.20        # drift between sessions is assumed once an F test shows it at this level
_QN_NORMAL = 2.2219           # Qn's consistency factor for a normal distribution


@dataclass(frozen=True)
class NoiseModel:
    """Spread of the log values: `within` a session (run to run) and `between` sessions (drift)."""

    within: float
    between: float
    degrees_of_freedom: float  # of a session mean's estimated variance (Satterthwaite)
    wander: float = 0.0        # lag-1 correlation of session offsets (a slow wander), >= 0

    def session_variance(self, runs: np.ndarray) -> np.ndarray:
        # successive differences see a wander's variance times (1 - wander); a mean of
        # correlated sessions varies (1 + wander) / (1 - wander) times more than of independent ones
        drift = self.between ** 2 * (1 + self.wander) / (1 - self.wander) ** 2
        return np.maximum(drift + self.within ** 2 / runs, _MIN_SESSION_SD ** 2)


@dataclass(frozen=True)
class ChangePoint:
    index: int            # first session of the new level
    before: float         # level (geometric mean of the runs, session-weighted) since the previous change point
    after: float          # level up to the next change point
    delta_pct: float      # (after / before - 1) * 100
    p_value: float        # of this change point against its neighbours (Bonferroni over the splits tried)


@dataclass(frozen=True)
class _Sessions:
    means: np.ndarray     # mean log value per session
    weights: np.ndarray   # 1 / variance of each session mean
    df: float


@dataclass(frozen=True)
class _Split:
    index: int
    z: float
    log_change: float
    p_value: float


def _check_sessions(sessions: Sequence[Sequence[float]]) -> list[np.ndarray]:
    logs = []
    for i, runs in enumerate(sessions):
        try:
            values = np.asarray(runs, dtype=float)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"session {i}: values must be numbers ({exc})") from None
        if values.ndim != 1 or len(values) == 0:
            raise ValueError(f"session {i}: expected a non-empty list of run values")
        bad = [float(v) for v in values if not (math.isfinite(v) and v > 0)]
        if bad:
            raise ValueError(f"session {i}: value {bad[0]!r} is not a positive finite number")
        logs.append(np.log(values))
    return logs


def noise_model(sessions: Sequence[Sequence[float]], change_points: Sequence[int] = ()) -> NoiseModel:
    """Run-to-run and session-to-session spread of the log values (see the module docstring),
    leaving out the session-to-session differences at `change_points` (first sessions of new levels)."""
    return _noise_model(_check_sessions(sessions), change_points)


def _noise_model(logs: list[np.ndarray], change_points: Sequence[int] = (), *, wander: bool = True) -> NoiseModel:
    runs = np.array([len(x) for x in logs], dtype=float)
    means = np.array([x.mean() for x in logs])
    df_within = float(np.sum(runs - 1))
    within_sq = (sum(float(np.sum((x - x.mean()) ** 2)) for x in logs) / df_within) if df_within else 0.0
    between_sq, df_between = _between_from_differences(means, within_sq / runs, change_points, df_within)
    # Satterthwaite: degrees of freedom of between² + within² / runs for a typical session
    typical = within_sq / float(np.median(runs))
    spread = between_sq ** 2 / df_between + (typical ** 2 / df_within if df_within else 0.0)
    df = (between_sq + typical) ** 2 / spread if spread > 0 else 1e6
    correlation = _wander(means, change_points, between_sq=between_sq,
                          run_part=float(np.mean(within_sq / runs))) if wander else 0.0
    return NoiseModel(math.sqrt(within_sq), math.sqrt(between_sq), max(1.0, df), correlation)


def _wander(means: np.ndarray, change_points: Sequence[int], *, between_sq: float, run_part: float) -> float:
    """Lag-1 correlation of the session offsets around their levels, from long series only
    (short ones cannot tell a wander from noise): 0 when negative or without drift."""
    if between_sq == 0 or len(means) < _WANDER_MIN_SESSIONS:
        return 0.0
    bounds = [0, *change_points, len(means)]
    products = squares = 0.0
    for start, end in zip(bounds, bounds[1:]):
        offsets = means[start:end] - means[start:end].mean()
        products += float(np.sum(offsets[:-1] * offsets[1:]))
        squares += float(np.sum(offsets ** 2))
    if squares == 0:
        return 0.0
    # the run noise in each session mean is not correlated: the drift part carries all of it
    return min(_MAX_WANDER, max(0.0, products / squares * (between_sq + run_part) / between_sq))


def _between_from_differences(means: np.ndarray, run_part: np.ndarray, change_points: Sequence[int],
                              df_within: float) -> tuple[float, float]:
    """Drift variance from the differences of consecutive session means, leaving out those that
    straddle a known change point. Differences more than _STEP_LIKE robust standard deviations
    (Rousseeuw and Croux's Qn, which ignores up to half of them) from their median are left out
    too: they straddle steps not found yet. The spread of the rest is their Qn again: a single
    session far off (a loaded machine) does not make every step look like noise. Drift is taken
    as 0 unless the differences are larger than the run noise explains (F test at
    _DRIFT_EVIDENCE). run_part: the run noise in each session mean."""
    differences = np.diff(means)
    explained = run_part[:-1] + run_part[1:]
    keep = np.ones(len(differences), dtype=bool)
    keep[[index - 1 for index in change_points]] = False
    if keep.sum() >= 2:
        scale = _qn_scale(differences[keep])
        centre = float(np.median(differences[keep]))
        keep &= np.abs(differences - centre) <= _STEP_LIKE * scale if scale > 0 else differences == centre
    differences, explained = differences[keep], explained[keep]
    if len(differences) < 2:
        return 0.0, 1.0
    observed, expected = _qn_scale(differences) ** 2, float(np.mean(explained))
    df = max(1.0, _DIFFERENCES_EFFICIENCY * len(differences))
    if df_within and expected > 0 and _f_upper_tail(observed / expected, df, df_within) > _DRIFT_EVIDENCE:
        return 0.0, df  # the sessions differ no more than their runs' noise explains
    return max(0.0, (observed - expected) / 2), df


def _qn_scale(values: np.ndarray) -> float:
    """Rousseeuw and Croux's Qn: the k-th smallest pairwise distance, k = C(h, 2), h = n // 2 + 1,
    scaled to estimate a normal standard deviation (with their small-sample correction)."""
    n = len(values)
    i, j = np.triu_indices(n, k=1)
    distances = np.sort(np.abs(values[i] - values[j]))
    h = n // 2 + 1
    k = h * (h - 1) // 2
    correction = n / (n + 1.4) if n % 2 else n / (n + 3.8)
    return _QN_NORMAL * correction * float(distances[k - 1])


def _f_upper_tail(ratio: float, df_top: float, df_bottom: float) -> float:
    """P(F >= ratio) for Fisher's F with (df_top, df_bottom) degrees of freedom."""
    return _regularized_beta(df_bottom / (df_bottom + df_top * ratio), df_bottom / 2.0, df_top / 2.0)


def _t_two_sided(t: float, df: float) -> float:
    """P(|T| >= t) for Student's t with df degrees of freedom."""
    return _regularized_beta(df / (df + t * t), df / 2.0, 0.5)


def _regularized_beta(x: float, a: float, b: float) -> float:
    """I_x(a, b) by its continued fraction (modified Lentz), using the symmetry for large x."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    if x > (a + 1) / (a + b + 2):
        return 1.0 - _regularized_beta(1.0 - x, b, a)
    log_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                 + a * math.log(x) + b * math.log1p(-x))
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    fraction = d
    for m in range(1, 500):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            fraction *= c * d
        if abs(c * d - 1.0) < 1e-14:
            break
    return math.exp(log_front) * fraction / a


def _split_scan(data: _Sessions, start: int, end: int, *, min_sessions: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For every split k of sessions [start, end): (k, z, log change) of the allowed splits."""
    w = data.weights[start:end]
    wm = w * data.means[start:end]
    ks = np.arange(min_sessions, end - start - min_sessions + 1)
    if len(ks) == 0:
        return ks, np.empty(0), np.empty(0)
    w_before, wm_before = np.cumsum(w)[ks - 1], np.cumsum(wm)[ks - 1]
    w_after, wm_after = w.sum() - w_before, wm.sum() - wm_before
    change = wm_after / w_after - wm_before / w_before
    z = change / np.sqrt(1 / w_before + 1 / w_after)
    return start + ks, z, change


def _test_split(data: _Sessions, start: int, end: int, *, at: int | None, min_sessions: int,
                min_log_effect: float) -> _Split | None:
    """The best split of [start, end) (or the split `at`), with its Bonferroni p-value; None when
    no split leaves min_sessions on each side with a change of at least the minimum effect."""
    ks, z, change = _split_scan(data, start, end, min_sessions=min_sessions)
    allowed = np.abs(change) >= min_log_effect
    if at is not None:
        allowed &= ks == at
    if not allowed.any():
        return None
    best = int(np.argmax(np.where(allowed, np.abs(z), -1.0)))
    p = min(1.0, len(ks) * _t_two_sided(abs(float(z[best])), data.df))
    return _Split(index=int(ks[best]), z=float(z[best]), log_change=float(change[best]), p_value=p)


def _split(data: _Sessions, *, min_sessions: int, min_log_effect: float, p_weak: float) -> list[int]:
    found: list[int] = []
    pending = [(0, len(data.means))]
    while pending:  # each accepted split leaves two strictly shorter segments: bounded
        start, end = pending.pop()
        best = _test_split(data, start, end, at=None, min_sessions=min_sessions, min_log_effect=min_log_effect)
        if best is not None and best.p_value <= p_weak:
            found.append(best.index)
            pending += [(start, best.index), (best.index, end)]
    return sorted(found)


def _merge(data: _Sessions, indices: list[int], *, min_sessions: int, min_log_effect: float,
           p_threshold: float) -> list[_Split]:
    points = list(indices)
    while points:
        bounds = [0, *points, len(data.means)]
        tested = [_test_split(data, bounds[k], bounds[k + 2], at=index, min_sessions=min_sessions,
                              min_log_effect=min_log_effect) for k, index in enumerate(points)]
        p_values = [t.p_value if t is not None and _sides_hold(data, bounds[k], t.index, bounds[k + 2],
                                                               min_sessions=min_sessions, p_threshold=p_threshold)
                    else math.inf for k, t in enumerate(tested)]
        weakest = int(np.argmax(p_values))
        if p_values[weakest] <= p_threshold:
            return [t for t in tested if t is not None]
        del points[weakest]
    return []


def _sides_hold(data: _Sessions, start: int, index: int, end: int, *, min_sessions: int,
                p_threshold: float) -> bool:
    """A side too short to hold another change point must be one level: no two of its sessions
    differ as significantly as a change point must (Bonferroni over its pairs). Otherwise the
    split is a compromise around a step with too few sessions after it (the newest session
    30% slower would be blamed on the session before it) or around an odd session."""
    for side_start, side_end in ((start, index), (index, end)):
        if side_end - side_start >= 2 * min_sessions:
            continue
        pairs = [(i, j) for i in range(side_start, side_end) for j in range(i + 1, side_end)]
        for i, j in pairs:
            z = (data.means[i] - data.means[j]) / math.sqrt(1 / data.weights[i] + 1 / data.weights[j])
            if len(pairs) * _t_two_sided(abs(float(z)), data.df) <= p_threshold:
                return False
    return True


def _check_options(*, p_threshold: float, min_sessions: int, min_effect_pct: float) -> None:
    if not (0 < p_threshold < 1):
        raise ValueError(f"p_threshold must be in (0, 1), got {p_threshold!r}")
    if not (isinstance(min_sessions, int) and min_sessions >= 1):
        raise ValueError(f"min_sessions must be an integer >= 1, got {min_sessions!r}")
    if not (math.isfinite(min_effect_pct) and min_effect_pct >= 0):
        raise ValueError(f"min_effect_pct must be a number >= 0, got {min_effect_pct!r}")


@dataclass(frozen=True)
class OddSession:
    """A single session unlike the sessions on both sides of it, which agree with each other
    (or, for the first session, the two after it): left out of the change-point search."""

    index: int
    level: float          # geometric mean of its runs
    around: float         # level of the neighbours it is compared with
    delta_pct: float      # (level / around - 1) * 100
    p_value: float        # Bonferroni over the sessions tested


@dataclass(frozen=True)
class Analysis:
    change_points: list[ChangePoint]
    odd_sessions: list[OddSession]
    noise: NoiseModel | None      # None when the series is too short to analyse


def detect_change_points(sessions: Sequence[Sequence[float]], **options) -> list[ChangePoint]:
    """Change points of a series of sessions (each a list of run values), oldest first; the
    options are analyse_sessions'."""
    return analyse_sessions(sessions, **options).change_points


def analyse_sessions(sessions: Sequence[Sequence[float]], *, p_threshold: float = 0.001,
                     min_sessions: int = MIN_SESSIONS,
                     min_effect_pct: float = DEFAULT_MIN_EFFECT_PCT) -> Analysis:
    """Odd sessions, change points and the noise model of a series of sessions, oldest first.

    p_threshold: p-value a change point (or an odd session) must reach. min_sessions: sessions
    at least on each side of a change point. min_effect_pct: smallest change (in percent,
    either direction) worth reporting. Deterministic: no random permutations.
    """
    _check_options(p_threshold=p_threshold, min_sessions=min_sessions, min_effect_pct=min_effect_pct)
    logs = _check_sessions(sessions)
    if len(logs) < 2 * min_sessions:
        return Analysis([], [], None)
    min_log_effect = math.log1p(min_effect_pct / 100.0)
    options = {"min_sessions": min_sessions, "min_log_effect": min_log_effect, "p_threshold": p_threshold}
    found, model = _segment(logs, **options)
    # odd sessions are judged with the noise measured around the levels found (at the weak
    # level: setting one aside is a suspicion, not a finding), then left out
    odd = _odd_sessions(_weighted(logs, model), p_threshold=_weak(p_threshold), min_log_effect=min_log_effect)
    kept = [i for i in range(len(logs)) if i not in {o.index for o in odd}]
    if odd:
        found, model = _segment([logs[i] for i in kept], **options)
    data = _weighted([logs[i] for i in kept], model)
    bounds = [0, *(s.index for s in found), len(kept)]
    result = []
    for k, split in enumerate(found):
        before = _level(data, bounds[k], split.index)
        after = _level(data, split.index, bounds[k + 2])
        result.append(ChangePoint(index=kept[split.index], before=before, after=after,
                                  delta_pct=(after / before - 1.0) * 100.0, p_value=split.p_value))
    return Analysis(result, odd, model)


def _segment(logs: list[np.ndarray], *, min_sessions: int, min_log_effect: float,
             p_threshold: float) -> tuple[list[_Split], NoiseModel]:
    """Split and merge, with the noise re-measured without the suspected steps until they settle."""
    points: list[int] = []
    for round_ in range(_NOISE_ROUNDS):
        # the first round has no levels yet to measure a wander around: steps would look like one
        model = _noise_model(logs, points, wander=round_ > 0)
        data = _weighted(logs, model)
        weak = _split(data, min_sessions=min_sessions, min_log_effect=min_log_effect,
                      p_weak=_weak(p_threshold))
        found = _merge(data, weak, min_sessions=min_sessions, min_log_effect=min_log_effect,
                       p_threshold=p_threshold)
        if round_ and points == weak:
            break
        points = weak  # suspected steps stay out of the next noise estimate
    return found, model


def _weighted(logs: list[np.ndarray], model: NoiseModel) -> _Sessions:
    runs = np.array([len(x) for x in logs], dtype=float)
    return _Sessions(means=np.array([x.mean() for x in logs]), weights=1.0 / model.session_variance(runs),
                     df=model.degrees_of_freedom)


def _odd_sessions(data: _Sessions, *, p_threshold: float, min_log_effect: float) -> list[OddSession]:
    """Sessions that differ significantly from both neighbours while the neighbours agree (are
    _ODD_TO_GAP times closer to each other); the newest session is never odd: it may be the
    first of a new level."""
    n = len(data.means)
    odd = []
    for i in range(n - 1):
        a, b = (i - 1, i + 1) if i > 0 else (1, 2)
        if b >= n:
            continue
        around_weight = data.weights[a] + data.weights[b]
        around = (data.weights[a] * data.means[a] + data.weights[b] * data.means[b]) / around_weight
        change = data.means[i] - around
        z = change / math.sqrt(1 / data.weights[i] + 1 / around_weight)
        p = min(1.0, (n - 1) * _t_two_sided(abs(z), data.df))
        neighbours_agree = abs(data.means[a] - data.means[b]) <= abs(change) / _ODD_TO_GAP
        if neighbours_agree and p <= p_threshold and abs(change) >= min_log_effect:
            odd.append(OddSession(index=i, level=math.exp(float(data.means[i])), around=math.exp(float(around)),
                                  delta_pct=math.expm1(float(change)) * 100.0, p_value=float(p)))
    return odd


def _level(data: _Sessions, start: int, end: int) -> float:
    w = data.weights[start:end]
    return float(math.exp(np.sum(w * data.means[start:end]) / np.sum(w)))


def _weak(p_threshold: float) -> float:
    """The looser level of a suspicion: a weak change point (as in Otava) or an odd session."""
    return min(0.5, 10 * p_threshold)
