"""Scoring (pure): from an entry and what was measured of it (the stored measurement document) to
one table row, and from the rows to the scores and the issue's targets.

A row says, for one entry and one way of measuring (counted, timed):
  sign      improvements and regressions: `right` when a test's verdict on the decision metric
            went the claimed way and none went the other, `wrong` when one went the other way,
            `missed` when none decided; controls: `false verdict` when any test had a verdict of
            change on any compared metric, else `silent`
  band      the measured speed ratio (>1 faster; for a range, the named culprit's own change)
            within the claim's band on one of the tests that found the change, or below or above
            it (the largest), or `no number` claimed
  culprit   ranges: `right` (one the maintainers named), `other mover` (a commit the corpus
            lists as moving the same suites), `wrong`, or `none named` and why
  why       for every miss, a reason read off the data: refused here and why, the effect lives
            where a count cannot see it, the tests were skipped, no change within ±τ (the suite
            may not exercise the path), inconclusive with the smallest detectable change, or
            outside the band because the claim was measured elsewhere

The scores count only each entry's primary measurement (plan.primary_kind) and keep weak entries
apart; the targets are those of issue #32 on the strong entries."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from redline.accuracy.corpus import Entry
from redline.analysis.stats import Verdict
from redline.core import metrics

MEASURED, REFUSED, PENDING, FAILED = "measured", "refused", "pending", "failed"
RIGHT, WRONG, MISSED, FALSE_VERDICT, SILENT = "right", "wrong", "missed", "false verdict", "silent"
WITHIN, BELOW, ABOVE, NO_NUMBER = "within", "below", "above", "no number"
CULPRIT_RIGHT, OTHER_MOVER, CULPRIT_WRONG, NONE_NAMED = "right", "other mover", "wrong", "none named"
CHANGE = (Verdict.IMPROVEMENT, Verdict.REGRESSION)
FOUND_TARGET = 0.9


@dataclass
class Row:
    name: str
    kind: str                        # improvement | regression | control
    weak: bool
    ranged: bool
    measure: str                     # counted | timed
    primary: bool
    claim: str
    status: str                      # measured | refused | pending | failed
    reason: str | None = None        # why refused, failed or still pending
    test: str | None = None          # the test the row shows
    metric: str | None = None
    verdict: str | None = None
    delta_pct: float | None = None
    ci_low_pct: float | None = None
    ci_high_pct: float | None = None
    speed: float | None = None       # the speed ratio the band is judged on
    sign: str | None = None
    band: str | None = None
    culprit: str | None = None
    culprit_sha: str | None = None
    why: str | None = None
    session: int | None = None
    tests: dict = field(default_factory=dict)

    @property
    def is_change(self) -> bool:
        return self.kind in ("improvement", "regression")


def speed_ratio(metric: str, delta_pct: float | None) -> float | None:
    """A change of `metric` as a speed ratio (>1 faster): new/old for a rate, old/new for a cost."""
    if delta_pct is None or delta_pct <= -100:
        return None
    ratio = 1 + delta_pct / 100
    return ratio if metrics.BY_NAME[metric].higher_is_better else 1 / ratio


def row_for(entry: Entry, measure: str, *, primary: bool, document: dict | None = None, refused: str | None = None,
            failed: str | None = None, pending: str | None = None) -> Row:
    row = Row(entry.name, entry.kind, entry.weak, entry.ranged, measure, primary, _short(entry.claim),
              PENDING, pending or "not measured yet")
    if refused:
        row.status, row.reason = REFUSED, refused
        return row
    if failed:
        row.status, row.reason = FAILED, failed
        return row
    if document is None:
        return row
    if document.get("status") != MEASURED:
        row.status, row.reason = FAILED, document.get("error") or "the measurement failed"
        return row
    row.status, row.reason, row.session, row.metric = MEASURED, None, document.get("session"), document.get("metric")
    row.tests = document.get("tests") or {}
    _judge(entry, row)
    if entry.ranged:
        _judge_culprit(entry, row, document.get("bisection") or {})
    _judge_band(entry, row, document)
    row.why = _why(entry, row, document)
    return row


def _judge(entry: Entry, row: Row) -> None:
    results = {test: t for test, t in row.tests.items() if not t.get("skipped")}
    if not results:                 # every test skipped on this machine: nothing to judge
        return
    if entry.kind == "control":
        changed = {test: t for test, t in results.items() if t.get("verdict") in CHANGE or t.get("changes")}
        row.sign = FALSE_VERDICT if changed else SILENT
        shown = changed or results
        _show(row, max(shown.items(), key=lambda item: abs(item[1].get("delta_pct") or 0), default=None))
        return
    wanted = Verdict.IMPROVEMENT if entry.sign == "faster" else Verdict.REGRESSION
    right = {test: t for test, t in results.items() if t.get("verdict") == wanted}
    wrong = {test: t for test, t in results.items() if t.get("verdict") in CHANGE and t.get("verdict") != wanted}
    row.sign = WRONG if wrong else RIGHT if right else MISSED
    shown = wrong or right or {test: t for test, t in results.items() if t.get("delta_pct") is not None}
    _show(row, max(shown.items(), key=lambda item: abs(item[1].get("delta_pct") or 0), default=None)
          or next(iter(results.items()), None))


def _show(row: Row, item) -> None:
    if item is None:
        return
    row.test, shown = item
    row.verdict = shown.get("verdict")
    row.delta_pct, row.ci_low_pct, row.ci_high_pct = shown.get("delta_pct"), shown.get("ci_low_pct"), shown.get("ci_high_pct")


def _judge_culprit(entry: Entry, row: Row, bisection: dict) -> None:
    culprit = bisection.get("culprit")
    row.culprit_sha = culprit
    if culprit in (entry.culprits or []):
        row.culprit = CULPRIT_RIGHT
    elif culprit in (entry.other_movers or []):
        row.culprit = OTHER_MOVER
    elif culprit:
        row.culprit = CULPRIT_WRONG
    else:
        row.culprit = NONE_NAMED


def _judge_band(entry: Entry, row: Row, document: dict) -> None:
    """The band is judged on the tests that found the change: within when one of them measured a
    change of the claimed size (the claim was measured on one workload, the suites are where it
    may show; that test is then the one shown), else below or above by the largest."""
    if entry.kind == "control" or row.sign != RIGHT:
        return
    if entry.band is None:
        row.band = NO_NUMBER
        row.speed = speed_ratio(row.metric, _own_delta(entry, row.test, row.tests[row.test], document))
        return
    low, high = entry.band
    found = {test: t for test, t in row.tests.items() if t.get("verdict") == row.verdict}
    speeds = {test: speed_ratio(row.metric, _own_delta(entry, test, t, document)) for test, t in found.items()}
    within = {test: speed for test, speed in speeds.items() if speed is not None and low <= speed <= high}
    if within:
        centre = math.sqrt(low * high)
        test = min(within, key=lambda t: abs(math.log(within[t] / centre)))
        _show(row, (test, found[test]))
    row.speed = speeds.get(row.test)
    if row.speed is not None:
        row.band = WITHIN if low <= row.speed <= high else BELOW if row.speed < low else ABOVE


def _own_delta(entry: Entry, test: str, result: dict, document: dict) -> float | None:
    """The change the claim is about: for a range, the named culprit's own step on the test."""
    own = ((document.get("bisection") or {}).get("culprit_change") or {}).get(test)
    if entry.ranged and own and own.get("delta_pct") is not None:
        return own["delta_pct"]
    return result.get("delta_pct")


def _why(entry: Entry, row: Row, document: dict) -> str | None:
    notes = [n for n in document.get("notes") or []]
    if not row.tests or all(t.get("skipped") for t in row.tests.values()):
        skipped = next((t["skipped"] for t in row.tests.values() if t.get("skipped")), "no test was measured")
        return f"not measured here: {skipped}"
    reasons = []
    if row.sign in (MISSED, WRONG, FALSE_VERDICT):
        if row.measure == "counted" and not entry.countable:
            reasons.append(f"the effect lives in {entry.effect_lives_in}, measured here by counts")
        shown = row.tests.get(row.test) or {}
        if row.sign == MISSED and row.verdict == Verdict.NO_CHANGE:
            reasons.append(f"no change within ±{_pct(shown.get('tau_pct'))} on {row.test}: the suite may not exercise "
                           f"the path ({entry.effect_reason})")
        elif row.sign == MISSED:
            reasons.append(f"inconclusive on {row.test}" + (f": the smallest change these runs could show is "
                                                            f"{_pct(shown.get('min_detectable_pct'))}"
                                                            if shown.get("min_detectable_pct") else "")
                           + (f" ({shown['note']})" if shown.get("note") else ""))
        elif row.sign == WRONG:
            reasons.append("a verdict against the claim: to be explained (docs/accuracy.md)")
        elif row.sign == FALSE_VERDICT:
            reasons.append("a verdict of change on a control: to be explained (docs/accuracy.md)")
    if row.band in (BELOW, ABOVE):
        reasons.append(f"outside the claimed band [{entry.band[0]:.3f}, {entry.band[1]:.3f}]"
                       + (f"; the claim: {entry.expected.get('note')}" if entry.expected.get("note") else ""))
    if row.culprit in (OTHER_MOVER, CULPRIT_WRONG, NONE_NAMED):
        reasons.append(_culprit_why(row, document.get("bisection") or {}))
    return "; ".join(reasons + notes) or None


def _culprit_why(row: Row, bisection: dict) -> str:
    if row.culprit == OTHER_MOVER:
        return f"named {row.culprit_sha[:12]}, another commit of the range that moves these suites"
    if row.culprit == CULPRIT_WRONG:
        return f"named {row.culprit_sha[:12]}, which the maintainers did not name"
    if bisection.get("no_change"):
        return "no culprit: the ends of the range showed no change to bisect"
    if bisection.get("too_close"):
        return "no culprit: " + "; ".join(f"{t}: {why}" for t, why in bisection["too_close"].items())
    if bisection.get("candidates"):
        return f"no culprit: one of {len(bisection['candidates'])} commits (skips in the way)"
    return "no culprit named"


def _pct(value) -> str:
    return f"{value:.1f}%" if isinstance(value, (int, float)) and math.isfinite(value) else "?"


def _short(text: str | None, limit: int = 160) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


# -- scores -----------------------------------------------------------------------------------
@dataclass
class Tally:
    measured: int = 0
    right: int = 0
    wrong: int = 0
    missed: int = 0
    banded: int = 0          # found right, with a band to judge
    within: int = 0
    not_measured: int = 0    # refused, failed or pending

    @property
    def found_share(self) -> float | None:
        return self.right / self.measured if self.measured else None


@dataclass
class Scores:
    strong: Tally
    weak: Tally
    controls_measured: int
    false_verdicts: int
    controls_not_measured: int
    ranges_bisected: int
    culprits_right: int
    ranges_not_measured: int

    @property
    def targets(self) -> dict[str, bool | None]:
        """The issue's targets on the strong entries (None while nothing was measured)."""
        share = self.strong.found_share
        return {"found_90": None if share is None else share >= FOUND_TARGET,
                "none_wrong": None if not self.strong.measured else self.strong.wrong == 0,
                "controls_silent": None if not self.controls_measured else self.false_verdicts == 0,
                "culprits_right": None if not self.ranges_bisected else self.culprits_right == self.ranges_bisected}


def score(rows: list[Row]) -> Scores:
    strong, weak = Tally(), Tally()
    controls = false = controls_missing = ranges = culprits = ranges_missing = 0
    for row in rows:
        if not row.primary:
            continue
        measured = row.status == MEASURED and row.sign is not None and row.test is not None
        if row.kind == "control":
            controls += measured
            false += measured and row.sign == FALSE_VERDICT
            controls_missing += not measured
            continue
        tally = weak if row.weak else strong
        if not measured:
            tally.not_measured += 1
        else:
            tally.measured += 1
            tally.right += row.sign == RIGHT
            tally.wrong += row.sign == WRONG
            tally.missed += row.sign == MISSED
            tally.banded += row.sign == RIGHT and row.band in (WITHIN, BELOW, ABOVE)
            tally.within += row.sign == RIGHT and row.band == WITHIN
        if row.ranged:
            bisected = row.status == MEASURED and row.culprit is not None
            ranges += bisected
            culprits += bisected and row.culprit == CULPRIT_RIGHT
            ranges_missing += not bisected
    return Scores(strong, weak, controls, false, controls_missing, ranges, culprits, ranges_missing)
