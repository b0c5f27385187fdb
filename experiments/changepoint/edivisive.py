"""Reference for the simulations in docs/history.md: the E-Divisive change points redline used
before #25 (one value per session), kept here to measure the session-block method against.

Method: E-Divisive means (Matteson & James, 2014) on ranks, with the split/merge structure
of Apache Otava (Hunter, Fleming et al. 2023):

1. Split. Recursive binary segmentation. In a segment, every candidate split tau is scored
   with the energy statistic
       Q(X, Y) = m n / (m + n) * (2 mean|X - Y| - mean|X - X'| - mean|Y - Y'|)
   between X = segment[:tau] and Y = segment[tau:], computed on the ranks of the
   segment's values (ranks tame heavy tails: one wild run cannot create a change point).
   The best candidate is kept if a permutation test of the maximal Q gives p <= 10x the
   final threshold ("weak" change points, as in Otava), and both halves are split again.
   Long series are split in windows of 2 x ``window`` points overlapping by half, as in
   Otava, so the cost grows linearly with the length of the history.
2. Merge. Each weak change point is re-tested on the window between its neighbours
   (at most ``window`` points on each side),
   the observed Q at its position against the permutation distribution of the maximal Q
   in that window. The weakest (largest p) is removed while it exceeds the threshold;
   its neighbours are then re-tested. What is left is reported.

Every segment on each side of a change point has at least ``min_size`` points.
Permutation tests are seeded, so results are reproducible.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

__all__ = ["ChangePoint", "detect_change_points"]

_PERMUTATION_BATCH_CELLS = 2_000_000  # cells of the (batch, n, n) array per numpy step


@dataclass(frozen=True)
class ChangePoint:
    index: int  # first point of the new regime
    before_median: float  # median of the points since the previous change point
    after_median: float  # median of the points up to the next change point
    delta_pct: float  # (after / before - 1) * 100
    p_value: float  # permutation p-value of this change point against its neighbours


@dataclass(frozen=True)
class _Candidate:
    index: int  # absolute index of the first point after the split
    q: float


def _ranks(values: np.ndarray) -> np.ndarray:
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values))
    sorted_vals = values[order]
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and sorted_vals[j + 1] == sorted_vals[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return ranks


def _q_scan(distances: np.ndarray, *, min_size: int) -> np.ndarray:
    """Q(segment[:tau], segment[tau:]) for every tau; distances has shape (..., L, L).

    Returns shape (..., L + 1) indexed by tau; taus leaving fewer than min_size points on a
    side are -inf.
    """
    length = distances.shape[-1]
    lower = np.tril(np.ones((length, length), dtype=bool), k=-1)
    # within[t] = sum of distances among the first t points; rows[t] = all distances of them
    within = np.zeros(distances.shape[:-2] + (length + 1,))
    within[..., 1:] = np.cumsum(np.where(lower, distances, 0.0).sum(axis=-1), axis=-1)
    rows = np.zeros_like(within)
    rows[..., 1:] = np.cumsum(distances.sum(axis=-1), axis=-1)
    total = within[..., -1:]
    cross = rows - 2.0 * within  # pairs (i < tau <= j)
    within_y = total - within - cross

    n_x = np.arange(length + 1, dtype=float)
    n_y = length - n_x
    valid = (n_x >= min_size) & (n_y >= min_size)
    safe_x = np.where(valid, n_x, 2.0)
    safe_y = np.where(valid, n_y, 2.0)
    q = (safe_x * safe_y / (safe_x + safe_y)) * (
        2.0 * cross / (safe_x * safe_y)
        - within / (safe_x * (safe_x - 1) / 2.0)
        - within_y / (safe_y * (safe_y - 1) / 2.0)
    )
    return np.where(valid, q, -np.inf)


def _distance_matrix(segment: np.ndarray) -> np.ndarray:
    ranks = _ranks(segment)
    return np.abs(ranks[:, None] - ranks[None, :])


def _permutation_pvalue(distances: np.ndarray, *, observed: float, min_size: int,
                        p_threshold: float, rng: np.random.Generator) -> float:
    """p-value of the observed statistic against the max-Q permutation distribution.

    Stops early once the p-value can no longer reach p_threshold (then the returned
    value is the running estimate, which is above the threshold).
    """
    permutations = max(99, math.ceil(2.0 / p_threshold) - 1)
    allowed_exceedances = math.floor(p_threshold * (permutations + 1)) - 1
    length = distances.shape[0]
    batch = max(1, min(permutations, _PERMUTATION_BATCH_CELLS // (length * length)))
    tolerance = 1e-9 * max(1.0, abs(observed))
    exceed = done = 0
    while done < permutations:
        size = min(batch, permutations - done)
        perms = np.argsort(rng.random((size, length)), axis=1)
        shuffled = distances[perms[:, :, None], perms[:, None, :]]
        best = _q_scan(shuffled, min_size=min_size).max(axis=-1)
        exceed += int(np.sum(best >= observed - tolerance))
        done += size
        if exceed > allowed_exceedances:
            break
    return (1 + exceed) / (1 + done)


def _best_split(values: np.ndarray, *, start: int, end: int, min_size: int) -> _Candidate | None:
    if end - start < 2 * min_size:
        return None
    q = _q_scan(_distance_matrix(values[start:end]), min_size=min_size)
    tau = int(np.argmax(q))
    return _Candidate(index=start + tau, q=float(q[tau]))


def _split_segment(values: np.ndarray, *, start: int, end: int, min_size: int,
                   p_threshold: float, rng: np.random.Generator) -> list[int]:
    found: list[int] = []
    pending = [(start, end)]
    while pending:  # each accepted split adds two strictly smaller segments: bounded
        seg_start, seg_end = pending.pop()
        candidate = _best_split(values, start=seg_start, end=seg_end, min_size=min_size)
        if candidate is None:
            continue
        p = _permutation_pvalue(_distance_matrix(values[seg_start:seg_end]),
                                observed=candidate.q, min_size=min_size,
                                p_threshold=p_threshold, rng=rng)
        if p <= p_threshold:
            found.append(candidate.index)
            pending.append((candidate.index, seg_end))
            pending.append((seg_start, candidate.index))
    return found


def _split(values: np.ndarray, *, min_size: int, p_threshold: float, window: int,
           rng: np.random.Generator) -> list[int]:
    """Weak change points: binary segmentation in windows of 2 x window points that
    overlap by half (as Otava does), so long histories cost linear time."""
    found: set[int] = set()
    start = 0
    while True:
        end = min(start + 2 * window, len(values))
        found.update(_split_segment(values, start=start, end=end, min_size=min_size,
                                    p_threshold=p_threshold, rng=rng))
        if end == len(values):
            return sorted(found)
        start += window


def _window_pvalue(values: np.ndarray, *, start: int, index: int, end: int, min_size: int,
                   p_threshold: float, rng: np.random.Generator) -> float:
    distances = _distance_matrix(values[start:end])
    observed = float(_q_scan(distances, min_size=min_size)[index - start])
    return _permutation_pvalue(distances, observed=observed, min_size=min_size,
                               p_threshold=p_threshold, rng=rng)


def _merge(values: np.ndarray, indices: list[int], *, min_size: int, p_threshold: float,
           window: int, rng: np.random.Generator) -> list[tuple[int, float]]:
    points = list(indices)
    cache: dict[tuple[int, int, int], float] = {}
    for _ in range(len(indices) + 1):  # one removal per round at most
        bounds = [0, *points, len(values)]
        pvalues = []
        for k, index in enumerate(points):
            key = (max(bounds[k], index - window), index, min(bounds[k + 2], index + window))
            if key not in cache:
                cache[key] = _window_pvalue(values, start=key[0], index=index, end=key[2],
                                            min_size=min_size, p_threshold=p_threshold, rng=rng)
            pvalues.append(cache[key])
        if not points:
            return []
        weakest = int(np.argmax(pvalues))
        if pvalues[weakest] <= p_threshold:
            return list(zip(points, pvalues))
        del points[weakest]
    raise AssertionError("merge did not terminate")  # unreachable: points shrink each round


def _check_inputs(values: Sequence[float], *, p_threshold: float, min_size: int) -> np.ndarray:
    try:
        series = np.asarray(values, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"values must be numbers ({exc})") from None
    if series.ndim != 1:
        raise ValueError(f"values must be a flat series, got shape {series.shape}")
    for i, v in enumerate(series):
        if not math.isfinite(v):
            raise ValueError(f"values[{i}] = {float(v)!r}: values must be finite")
    if not (isinstance(min_size, int) and min_size >= 2):
        raise ValueError(f"min_size must be an integer >= 2, got {min_size!r}")
    if not (0 < p_threshold < 1):
        raise ValueError(f"p_threshold must be in (0, 1), got {p_threshold!r}")
    return series


def _delta_pct(before: float, after: float) -> float:
    if before == 0:
        return math.nan
    return (after / before - 1.0) * 100.0


def detect_change_points(values: Sequence[float], *, p_threshold: float = 0.001,
                         min_size: int = 3, window: int = 50,
                         seed: int = 0) -> list[ChangePoint]:
    """Change points of a series, oldest first (see the module docstring for the method).

    p_threshold: permutation p-value a change point must reach. min_size: points at least
    on each side. window: points at most on each side that a change point is tested on
    (and half the split window). seed: seeds the permutations.
    """
    series = _check_inputs(values, p_threshold=p_threshold, min_size=min_size)
    if not (isinstance(window, int) and window >= 2 * min_size):
        raise ValueError(f"window must be an integer >= 2 x min_size, got {window!r}")
    if len(series) < 2 * min_size:
        return []
    rng = np.random.default_rng(seed)
    weak_threshold = min(0.5, 10 * p_threshold)
    weak = _split(series, min_size=min_size, p_threshold=weak_threshold, window=window, rng=rng)
    kept = _merge(series, weak, min_size=min_size, p_threshold=p_threshold, window=window,
                  rng=rng)
    bounds = [0, *(index for index, _ in kept), len(series)]
    result = []
    for k, (index, p) in enumerate(kept):
        before = float(np.median(series[bounds[k]:index]))
        after = float(np.median(series[index:bounds[k + 2]]))
        result.append(ChangePoint(index=index, before_median=before, after_median=after,
                                  delta_pct=_delta_pct(before, after), p_value=p))
    return result
