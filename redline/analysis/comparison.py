"""From the runs of an A/B session to verdicts per test and metric (the numbers come from
redline.analysis.stats; this module only decides what is compared with what)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from redline.analysis import same_state
from redline.analysis.counted import MIN_RUNS as INSTRUCTION_MIN_RUNS
from redline.analysis.counted import MIN_EFFECT_PCT, deterministic_verdict
from redline.analysis.stats import (FUTILITY_CHANCE, MetricComparison, Verdict, benjamini_hochberg, compare_metric,
                                    confidence_per_look, needs_more_runs, signed_rank_reaches)
from redline.core import metrics
from redline.core.run import Run

# metric → is a higher value better?
COMPARED_METRICS = {metric.name: metric.higher_is_better for metric in metrics.COMPARED}   # name: higher is better
BASELINE, COMPARISON = "baseline", "comparison"
FDR_Q = 0.05          # Benjamini–Hochberg false-discovery rate for verdicts of change (every command)
MIN_RUNS = 5


@dataclass
class TestComparison:
    test: str
    metric: str
    result: MetricComparison | None
    note: str | None = None                # why there is no result (too few runs, failures)
    survives_fdr: bool = False             # significant after Benjamini–Hochberg over the session
    comparisons_in_session: int = 1        # how many test × metric comparisons FDR control covered
    moved_symbols: list[dict] | None = None   # with --profile: symbols whose self share moved most
    diff_flamegraph: str | None = None        # with --profile: comparison against baseline SVG
    state_refusal: str | None = None          # the sides reached their server state differently: no verdict
    state_flags: list[str] = field(default_factory=list)   # e.g. used_memory differs by more than 5%
    withheld: str | None = None               # a change this metric shows but does not claim, and why

    @property
    def verdict_alone(self) -> str:
        """The verdict of this comparison taken on its own; none on sides whose server states differ,
        none where the change is withheld (`withheld_layout_change`)."""
        if self.result is None or self.state_refusal or self.withheld:
            return Verdict.INCONCLUSIVE
        return self.result.verdict

    @property
    def held_back_by_fdr(self) -> bool:
        """Significant on its own, but not among the session's many comparisons."""
        return self.verdict_alone in (Verdict.REGRESSION, Verdict.IMPROVEMENT) and not self.survives_fdr

    @property
    def verdict(self) -> str:
        """A change is claimed only when it survives Benjamini–Hochberg over every test and metric of
        the session: with 60 comparisons at 95% each, three would otherwise be false alarms."""
        return Verdict.INCONCLUSIVE if self.held_back_by_fdr else self.verdict_alone

    @property
    def significant(self) -> bool:
        return self.verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT)

    def as_json(self) -> dict:
        out = {"test": self.test, "metric": self.metric, "verdict": self.verdict,
               "verdict_alone": self.verdict_alone, "note": self.note, "survives_fdr": self.survives_fdr,
               "comparisons_in_session": self.comparisons_in_session, "moved_symbols": self.moved_symbols,
               "diff_flamegraph": self.diff_flamegraph, "state_refusal": self.state_refusal,
               "state_flags": self.state_flags, "withheld": self.withheld}
        keys = ("baseline_median", "comparison_median", "delta_pct", "ci_low_pct", "ci_high_pct", "p_value")
        if self.result:
            detail = asdict(self.result)
            out.update({k: detail[k] for k in keys})
            out.update({k: v for k, v in detail.items() if k not in out})
        else:
            out.update({k: None for k in keys})
        return out

    @classmethod
    def from_json(cls, detail: dict) -> "TestComparison":
        """The comparison as stored (`as_json`, the store's comparisons.detail) read back."""
        has_result = "tau_pct" in detail          # every MetricComparison field is stored with a result
        optional = {"decision_chance"}             # (but this one only since stopping for futility)
        result = MetricComparison(**{f.name: detail[f.name] for f in fields(MetricComparison)
                                     if f.name in detail or f.name not in optional}) if has_result else None
        return cls(detail["test"], detail["metric"], result, note=detail.get("note"),
                   survives_fdr=bool(detail.get("survives_fdr")),
                   comparisons_in_session=detail.get("comparisons_in_session") or 1,
                   moved_symbols=detail.get("moved_symbols"), diff_flamegraph=detail.get("diff_flamegraph"),
                   state_refusal=detail.get("state_refusal"), state_flags=list(detail.get("state_flags") or []),
                   withheld=detail.get("withheld"))


def _values(records: list[Run], metric: str) -> tuple[list[float], list[float], bool]:
    """Baseline and comparison values; paired (run i with run i) when both runs of every pair succeeded."""
    by_side: dict[str, dict[int, float]] = {BASELINE: {}, COMPARISON: {}}
    for r in records:
        value = r.metrics.get(metric) if r.status == "ok" else None
        if r.side in by_side and value is not None and value > 0:
            by_side[r.side][r.run_index] = value
    common = sorted(set(by_side[BASELINE]) & set(by_side[COMPARISON]))
    if len(common) >= MIN_RUNS:
        return ([by_side[BASELINE][i] for i in common], [by_side[COMPARISON][i] for i in common], True)
    return list(by_side[BASELINE].values()), list(by_side[COMPARISON].values()), False


def looks_confidence(runs: int, max_runs: int, confidence: float = 0.95) -> float:
    """Confidence per look when inconclusive tests get 2 more runs per look up to max_runs, so that
    peeking does not inflate false alarms (redline.analysis.stats.confidence_per_look)."""
    looks = 1 + math.ceil(max(0, max_runs - runs) / 2)
    return confidence_per_look(looks, confidence)


def first_paired_look(max_runs: int, confidence: float = 0.95) -> int:
    """The fewest pairs at which the paired signed-rank interval can decide, when inconclusive tests
    get 2 more runs per look up to max_runs (7 of at most 15: below it the confidence per look
    cannot be reached by any signed-rank result and the unpaired interval is used instead).
    A duet starts there: its pairs share the machine's speed, and only the paired interval sees
    how little they differ."""
    for runs in range(2, max_runs + 1):
        if signed_rank_reaches(runs, 1 - looks_confidence(runs, max_runs, confidence)):
            return runs
    return max_runs


def _states_by_side(records: list[Run]) -> dict[str, list[dict | None]]:
    """The state facts of each side's successful runs."""
    by_side: dict[str, list[dict | None]] = {BASELINE: [], COMPARISON: []}
    for r in records:
        if r.side in by_side and r.status == "ok":
            by_side[r.side].append(r.state)
    return by_side


def compare_test(test: str, records: list[Run], noise_floors: dict[tuple[str, str], float], *,
                 confidence: float = 0.95, runs_allowed: int | None = None,
                 also: tuple[str, ...] = ()) -> list[TestComparison]:
    """Verdicts per compared metric of one test: timed runs by the rank statistics of redline.analysis.stats;
    runs under callgrind (--measure instructions) by the near-deterministic rule of
    redline.analysis.counted, on their own metrics only (never against timed ones). `runs_allowed`
    (the adaptive rule's most runs per side) asks timed results for their chance to decide. `also`:
    metrics the registry does not compare that this caller judges too, by the same rule (the gate's
    screen of a pipelined test: the server's reads and writes per request)."""
    out = []
    states = _states_by_side(records)
    refusal = same_state.state_refusal(states)
    flags = [flag for flag in (same_state.memory_flag(states), same_state.prepared_once_flag(states)) if flag]
    instructions = metrics.measure_of(r.metrics for r in records if r.status == "ok") == metrics.INSTRUCTIONS
    least = INSTRUCTION_MIN_RUNS if instructions else MIN_RUNS
    judged = metrics.compared(metrics.INSTRUCTIONS if instructions else metrics.TIME)
    for metric in judged + tuple(metrics.BY_NAME[name] for name in also if metrics.BY_NAME[name] not in judged):
        baseline, comparison, paired = _values(records, metric.name)
        if not baseline and not comparison and metric.name in also:
            out.append(TestComparison(test, metric.name, None, note=f"no run recorded {metric.name} (the server's "
                                      "INFO lacks it: Redis before 6.0, or runs from before redline kept it)"))
            continue
        if min(len(baseline), len(comparison)) < least:
            out.append(TestComparison(test, metric.name, None, note=f"too few successful runs "
                                      f"({len(baseline)} baseline, {len(comparison)} comparison; need {least})"))
            continue
        floor = noise_floors.get((test, metric.name))
        if instructions:
            result = deterministic_verdict(baseline, comparison, higher_is_better=metric.higher_is_better,
                                           aa_spread_pct=floor,
                                           least_change_pct=metric.least_change_pct or MIN_EFFECT_PCT)
        else:
            result = compare_metric(baseline, comparison, paired=paired, higher_is_better=metric.higher_is_better,
                                    noise_floor_pct=floor, confidence=confidence, runs_allowed=runs_allowed)
        out.append(TestComparison(test, metric.name, result, state_refusal=refusal, state_flags=flags))
    if instructions:
        withhold_layout_change(out)
    return out


ESTIMATED_CYCLES = "est_cycles_per_op"
INSTRUCTION_METRICS = ("instructions_per_op", "instructions_per_op_command")


def withhold_layout_change(comparisons: list[TestComparison]) -> None:
    """A counted change of the estimated cycles alone is not claimed: when every instruction count
    says "no change", the program runs the same instructions and what moved is where the code or
    data sits, seen by callgrind's simulated caches — not this machine's (a change to a file a
    standalone server never runs moved `est_cycles_per_op` 6% on the accuracy corpus's
    sentinel control). Such a comparison stays inconclusive with the reason; time can tell whether
    real caches notice."""
    by_metric = {c.metric: c for c in comparisons}
    cycles = by_metric.get(ESTIMATED_CYCLES)
    counts = [by_metric.get(name) for name in INSTRUCTION_METRICS]
    if cycles is None or cycles.result is None or cycles.result.verdict not in (Verdict.REGRESSION,
                                                                                Verdict.IMPROVEMENT):
        return
    if all(c is not None and c.result is not None and c.result.verdict == Verdict.NO_CHANGE for c in counts):
        cycles.withheld = (f"est. cycles {cycles.result.delta_pct:+.1f}% with the same instructions: the code's or "
                           "data's layout moved under callgrind's simulated caches, not a change of the work "
                           "done; measure by time to see it on this machine's caches")


def extra_runs_needed(comparisons: list[TestComparison], runs_so_far: int, max_runs: int, *,
                      lone_p_value: float = 0.05, futility_chance: float = FUTILITY_CHANCE) -> int:
    """Two more runs per side (one more A B B A block) while the budget allows and a metric is
    undecided: inconclusive with at least `futility_chance` that the runs up to `max_runs` decide it
    (redline.analysis.stats.decision_chance; 0 adds runs while any is inconclusive), or significant
    alone with a p-value too large to survive the session's false-discovery control on its own
    (`lone_p_value` = q / number of comparisons). 0 when decided, or when more runs are futile."""
    def undecided(c: TestComparison) -> bool:
        if c.result is None or c.state_refusal:
            return False
        too_weak_alone = c.verdict_alone in (Verdict.REGRESSION, Verdict.IMPROVEMENT) and c.result.p_value > lone_p_value
        return needs_more_runs(c.result, futility_chance) or too_weak_alone
    if runs_so_far >= max_runs or not any(undecided(c) for c in comparisons):
        return 0
    return min(2, max_runs - runs_so_far)


def profile_differences(records: list[Run], artifacts: Path) -> dict[str, tuple[list[dict], str]]:
    """Per test (key) whose two sides were both profiled: the symbols whose share of the server's
    CPU moved most, and the differential flame graph (comparison against baseline) written in
    `artifacts`."""
    from redline.profile import diff_flamegraph, moved_symbols
    profiled: dict[str, dict[str, dict]] = {}
    for r in records:
        if r.purpose == "profile" and r.status == "ok" and r.profile:
            profiled.setdefault(r.key, {})[r.side] = r.profile     # the key, as comparisons name the test
    found = {}
    for test, sides in profiled.items():
        if set(sides) != {BASELINE, COMPARISON} or any(side.get("samples") == 0 for side in sides.values()):
            continue        # a side without a sample has no shares: its "moves" would be noise or nothing
        base, comp = Path(sides[BASELINE]["folded_path"]), Path(sides[COMPARISON]["folded_path"])
        artifacts.mkdir(parents=True, exist_ok=True)
        svg = diff_flamegraph(base, comp, artifacts / f"{test}.diff.svg", title=f"{test}: comparison against baseline")
        found[test] = (moved_symbols(base, comp, top=5), str(svg))
    return found


def attach_profiles(comparisons: list[TestComparison], records: list[Run], artifacts: Path) -> None:
    """Where both sides of a test were profiled: a differential flame graph, and for each verdict
    the symbols whose share of the server's CPU moved most."""
    differences = profile_differences(records, artifacts)
    for c in comparisons:
        if c.test in differences:
            c.moved_symbols, c.diff_flamegraph = differences[c.test]


def apply_false_discovery_control(comparisons: list[TestComparison], q: float = 0.05) -> None:
    """Benjamini–Hochberg across every test and metric of the session."""
    tested = [c for c in comparisons if c.result is not None]
    for c, rejected in zip(tested, benjamini_hochberg([c.result.p_value for c in tested], q=q)):
        c.survives_fdr = rejected and c.verdict_alone in (Verdict.REGRESSION, Verdict.IMPROVEMENT)
        c.comparisons_in_session = len(tested)


def measured_runs_by_test(records: list[Run]) -> dict[str, list[Run]]:
    """The measured runs (not the profiled ones) grouped by test (and topology)."""
    by_test: dict[str, list[Run]] = {}
    for r in records:
        if r.purpose == "measure":
            by_test.setdefault(r.key, []).append(r)
    return by_test
