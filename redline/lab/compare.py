"""An A/B session's plan and verdicts, as `redline compare` makes them and as the gate, the
accuracy runner and other users of a compare reuse them: the p a lone finding needs to survive
the session's false-discovery control (which sets how long an undecided test keeps getting
runs), and the verdicts of every test × metric after Benjamini–Hochberg, with profile
differences when both sides were profiled, stored with the session."""

from __future__ import annotations

from redline.analysis.comparison import (COMPARED_METRICS, FDR_Q, TestComparison, apply_false_discovery_control,
                                         attach_profiles, compare_test, looks_confidence, measured_runs_by_test)
from redline.engine.run_plan import RunSettings, Side
from redline.lab.session import Session, SessionPlan
from redline.suites import TestSpec


def compare_plan(sides: list[Side], tests: list[TestSpec], settings: RunSettings, *, max_runs: int,
                 floors: dict, kind: str = "compare") -> SessionPlan:
    """The plan of an adaptive A/B session over `tests` on every topology of `settings`."""
    comparisons = len(tests) * len(settings.topologies) * len(COMPARED_METRICS)
    return SessionPlan(kind, sides, tests, settings, max_runs=max_runs, lone_p_value=FDR_Q / comparisons,
                       floors=floors)


def session_verdicts(session: Session, plan: SessionPlan) -> list[TestComparison]:
    """Every test × metric of the session judged, false-discovery controlled, with the profiles'
    differences where both sides were profiled; stored with the session."""
    confidence = looks_confidence(plan.settings.runs, plan.max_runs or plan.settings.runs)
    judged = plan.carried + session.records            # a resumed compare judges the runs it carried too
    comparisons = [c for test, records in measured_runs_by_test(judged).items()
                   for c in compare_test(test, records, plan.floors, confidence=confidence, runs_allowed=plan.max_runs)]
    apply_false_discovery_control(comparisons, q=FDR_Q)
    if plan.settings.profile:
        artifacts = session.store.artifacts(f"compare-{session.session_id}")
        attach_profiles(comparisons, judged, artifacts)
    session.store.save_comparisons(session.session_id, [c.as_json() for c in comparisons])
    return comparisons
