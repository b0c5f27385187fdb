"""An A/B session's plan and verdicts, as `redline compare` makes them and as the gate, the
accuracy runner and other users of a compare reuse them: the p a lone finding needs to survive
the session's false-discovery control (which sets how long an undecided test keeps getting
runs), and the verdicts of every test × metric after Benjamini–Hochberg, with profile
differences when both sides were profiled, stored with the session."""

from __future__ import annotations

from dataclasses import dataclass, field

from redline.analysis.comparison import (COMPARED_METRICS, FDR_Q, TestComparison, apply_false_discovery_control,
                                         attach_profiles, compare_test, looks_confidence, measured_runs_by_test)
from redline.analysis.stats import benjamini_hochberg_room
from redline.core.run import Run
from redline.engine.run_plan import RunSettings, Side
from redline.lab.session import Session, SessionPlan
from redline.suites import TestSpec


@dataclass
class ComparePlan(SessionPlan):
    """An adaptive A/B session. Its tests run one after another, so when one starts, the p-values
    of every test × metric before it are final, and a finding of it needs only what
    Benjamini–Hochberg over the whole session will grant it whatever the tests still to run turn
    out to be (redline.analysis.stats.benjamini_hochberg_room): q/m for the first test, more as
    earlier tests decide changes (docs/statistics.md §5). `family`: m, every test × topology ×
    metric of the compare, counted before a resume leaves out the tests that ended."""

    family: int = 1
    _p_values: dict[str, list[float]] = field(default_factory=dict, repr=False)    # per test key, once ended

    def __post_init__(self) -> None:
        self.lone_p_value = FDR_Q / self.family          # the first test's room: a lone finding among m

    def lone_p_value_for(self, measured: list[Run]) -> float:
        final = [p for key, runs in measured_runs_by_test(self.carried + measured).items()
                 for p in self._final_p_values(key, runs)]
        return benjamini_hochberg_room(final, family=max(self.family, len(final) + 1), q=FDR_Q)

    def _final_p_values(self, key: str, runs: list[Run]) -> list[float]:
        """A test's p-values once its job has ended, as its verdicts will have them (they no longer
        change: computed once)."""
        if key not in self._p_values:
            self._p_values[key] = [c.result.p_value for c in judged(self, key, runs) if c.result is not None]
        return self._p_values[key]


def judged(plan: SessionPlan, key: str, runs: list[Run]) -> list[TestComparison]:
    """One test's verdicts per metric in a compare (before the session's false-discovery control):
    its p-values too depend on the confidence per look of the plan's adaptive runs."""
    confidence = looks_confidence(plan.settings.runs, plan.max_runs or plan.settings.runs)
    return compare_test(key, runs, plan.floors, confidence=confidence, runs_allowed=plan.max_runs)


def compare_plan(sides: list[Side], tests: list[TestSpec], settings: RunSettings, *, max_runs: int,
                 floors: dict, kind: str = "compare") -> ComparePlan:
    """The plan of an adaptive A/B session over `tests` on every topology of `settings`."""
    comparisons = len(tests) * len(settings.topologies) * len(COMPARED_METRICS)
    return ComparePlan(kind, sides, tests, settings, max_runs=max_runs, floors=floors, family=comparisons)


def session_verdicts(session: Session, plan: SessionPlan) -> list[TestComparison]:
    """Every test × metric of the session judged, false-discovery controlled, with the profiles'
    differences where both sides were profiled; stored with the session."""
    every_run = plan.carried + session.records            # a resumed compare judges the runs it carried too
    comparisons = [c for test, records in measured_runs_by_test(every_run).items()
                   for c in judged(plan, test, records)]
    apply_false_discovery_control(comparisons, q=FDR_Q)
    if plan.settings.profile:
        artifacts = session.store.artifacts(f"compare-{session.session_id}")
        attach_profiles(comparisons, every_run, artifacts)
    session.store.save_comparisons(session.session_id, [c.as_json() for c in comparisons])
    return comparisons
