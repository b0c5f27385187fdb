"""`redline history`: the store as series of sessions, their change points, and the builds around them.

A series is one test × topology × target (the target's label includes its configuration); a
point is one session: every run's value, when it ran, and the build it measured
(redline.server.identity). Change points come from redline.analysis.changepoint on all the runs.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone

from redline.analysis.changepoint import (DEFAULT_MIN_EFFECT_PCT, MIN_SESSIONS, ChangePoint, NoiseModel, OddSession,
                                          analyse_sessions)
from redline.analysis.stats import MIN_TAU_PCT

DEFAULT_P_VALUE = 0.001       # `redline history --p-value`, and the closed loop's history trigger
NEEDS = f"needs {2 * MIN_SESSIONS} sessions ({MIN_SESSIONS} on each side of a change)"


@dataclass
class Point:
    session: int
    started_at: float
    runs: list[float]
    identity: dict | None

    @property
    def level(self) -> float:
        """Geometric mean of the runs (the method works on logarithms)."""
        return math.exp(sum(math.log(v) for v in self.runs) / len(self.runs)) if min(self.runs) > 0 else math.nan


@dataclass
class Series:
    test: str
    topology: str
    target: str
    points: list[Point] = field(default_factory=list)
    min_effect_pct: float = DEFAULT_MIN_EFFECT_PCT
    noise: NoiseModel | None = None
    change_points: list[ChangePoint] = field(default_factory=list)
    odd_sessions: list[OddSession] = field(default_factory=list)
    problem: str | None = None       # why there are no change points to look for

    @property
    def name(self) -> str:
        return f"{self.test} · {self.topology} · {self.target}"


def load_series(rows, pattern: re.Pattern | None) -> list[Series]:
    """Store.history rows (oldest first) grouped into series of sessions."""
    found: dict[tuple[str, str, str], Series] = {}
    for row in rows:
        if pattern is not None and not pattern.search(row["test"]):
            continue
        key = (row["test"], row["topology"], row["target"])
        series = found.setdefault(key, Series(*key))
        if not series.points or series.points[-1].session != row["session_id"]:
            series.points.append(Point(row["session_id"], row["started_at"], [], _identity(row)))
        series.points[-1].runs.append(row["value"])
    return [found[key] for key in sorted(found)]


def analysed_series(store, *, metric: str, pattern: re.Pattern | None, p_threshold: float) -> list[Series]:
    """Every stored series of `metric` (on this machine) whose test matches, with its change points
    (the minimum effect from the test's calibrated noise floor, where there is one)."""
    return analyse_all(load_series(store.history(metric), pattern), floors=store.noise_floors(), metric=metric,
                       p_threshold=p_threshold)


def analyse_all(all_series: list[Series], *, floors: dict, metric: str, p_threshold: float) -> list[Series]:
    """Each series analysed with its test's calibrated noise floor of `metric` (`floors`, as
    Store.noise_floors gives them) where there is one."""
    for series in all_series:
        analyse(series, p_threshold=p_threshold, noise_floor_pct=floors.get((series.test, metric)))
    return all_series


def _identity(row) -> dict | None:
    if row["identity"]:
        return json.loads(row["identity"])
    return {"version": row["server_version"]} if row["server_version"] else None


def analyse(series: Series, *, p_threshold: float, noise_floor_pct: float | None) -> None:
    """Fill in the series' noise model and change points (minimum effect as for A/B verdicts:
    max(2%, 2 × the calibrated noise floor), else the default)."""
    series.min_effect_pct = (max(MIN_TAU_PCT, 2.0 * noise_floor_pct) if noise_floor_pct
                             else DEFAULT_MIN_EFFECT_PCT)
    if len(series.points) < 2 * MIN_SESSIONS:
        series.problem = NEEDS
        return
    try:
        analysis = analyse_sessions([p.runs for p in series.points], p_threshold=p_threshold,
                                    min_effect_pct=series.min_effect_pct)
    except ValueError as exc:  # e.g. a metric that can be 0: no ratios to work on
        series.problem = f"cannot analyse: {exc}"
        return
    series.change_points, series.odd_sessions, series.noise = (analysis.change_points, analysis.odd_sessions,
                                                               analysis.noise)


def describe_build(identity: dict | None) -> str:
    """A build in a few words: the commit for git: targets, else what the server says and its digest."""
    if not identity:
        return "unknown build (stored before redline recorded builds)"
    commit = identity.get("commit")
    if commit:
        subject = f" \"{commit['subject']}\"" if commit.get("subject") else ""
        date = f" ({commit['date'][:10]})" if commit.get("date") else ""
        return f"commit {commit['sha'][:12]}{subject}{date}"
    words = [f"version {identity.get('version') or '?'}"]
    if identity.get("git_sha1") and set(identity["git_sha1"]) != {"0"}:
        dirty = "-dirty" if str(identity.get("git_dirty") or "0") != "0" else ""
        words.append(f"git {identity['git_sha1']}{dirty}")
    if identity.get("build_id"):
        words.append(f"build id {identity['build_id']}")
    if identity.get("binary_sha256"):
        words.append(f"sha256 {identity['binary_sha256'][:12]}")
    return ", ".join(words)


def builds_around(series: Series, index: int) -> tuple[dict | None, dict | None]:
    """The builds of the last session before `index` and of the session at it."""
    return series.points[index - 1].identity, series.points[index].identity


def nearest_build_change(series: Series, index: int) -> int | None:
    """The session index nearest to `index` whose build differs from the session's before it."""
    changes = [i for i in range(1, len(series.points))
               if None not in builds_around(series, i) and len(set(map(_key, builds_around(series, i)))) == 2]
    return min(changes, key=lambda i: (abs(i - index), i)) if changes else None


def _key(identity: dict) -> str:
    return json.dumps(identity, sort_keys=True)


def change_lines(series: Series, cp: ChangePoint, format_number) -> list[str]:
    """A change point as a person reads it: where, how much, how sure, and which builds."""
    point = series.points[cp.index]
    before, after = builds_around(series, cp.index)
    lines = [f"session {point.session} ({_time(point.started_at)}): {format_number(cp.before)} → "
             f"{format_number(cp.after)} ({cp.delta_pct:+.1f}%, p {cp.p_value:.2g})"]
    if before is None and after is None:
        return lines + ["  builds unknown (runs stored before redline recorded builds)"]
    if before != after:
        return lines + [f"  before: {describe_build(before)}", f"  after:  {describe_build(after)}"]
    lines.append(f"  same build on both sides ({describe_build(after)}): the change is not this session's build")
    nearest = nearest_build_change(series, cp.index)
    if nearest is not None:
        away = cp.index - nearest
        before, after = builds_around(series, nearest)
        lines += [f"  the nearest build change is at session {series.points[nearest].session} "
                  f"({abs(away)} session{'s' if abs(away) != 1 else ''} {'earlier' if away > 0 else 'later'}):",
                  f"    before: {describe_build(before)}", f"    after:  {describe_build(after)}"]
    return lines


def odd_line(series: Series, odd: OddSession, format_number) -> str:
    point = series.points[odd.index]
    return (f"session {point.session} ({_time(point.started_at)}) is odd: {format_number(odd.level)} against "
            f"{format_number(odd.around)} around it ({odd.delta_pct:+.1f}%, p {odd.p_value:.2g}); "
            f"{describe_build(point.identity)}; left out of the change-point search")


def _time(started_at: float) -> str:
    return datetime.fromtimestamp(started_at, tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def as_json(all_series: list[Series], *, metric: str, p_threshold: float) -> dict:
    return {"metric": metric, "p_value": p_threshold, "series": [_series_json(s) for s in all_series]}


def _series_json(series: Series) -> dict:
    return {
        "test": series.test, "topology": series.topology, "target": series.target,
        "min_effect_pct": series.min_effect_pct, "problem": series.problem,
        "noise": None if series.noise is None else {
            "within_pct": 100 * series.noise.within, "between_pct": 100 * series.noise.between,
            "degrees_of_freedom": series.noise.degrees_of_freedom},
        "points": [{"session": p.session, "time": _iso(p.started_at), "runs": p.runs,
                    "level": p.level, "identity": p.identity} for p in series.points],
        "change_points": [_change_json(series, cp) for cp in series.change_points],
        "odd_sessions": [{"session": series.points[o.index].session, "index": o.index, "level": o.level,
                          "around": o.around, "delta_pct": o.delta_pct, "p_value": o.p_value}
                         for o in series.odd_sessions],
    }


def _change_json(series: Series, cp: ChangePoint) -> dict:
    before, after = builds_around(series, cp.index)
    nearest = nearest_build_change(series, cp.index)
    return {"session": series.points[cp.index].session, "index": cp.index,
            "last_session_before": series.points[cp.index - 1].session,
            "time": _iso(series.points[cp.index].started_at), "before": cp.before, "after": cp.after,
            "delta_pct": cp.delta_pct, "p_value": cp.p_value,
            "build_before": before, "build_after": after,
            "same_build": before == after if before is not None else None,
            "nearest_build_change": None if nearest is None else series.points[nearest].session}


def _iso(started_at: float) -> str:
    return datetime.fromtimestamp(started_at, tz=timezone.utc).isoformat()

