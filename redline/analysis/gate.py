"""The catalogue gate's decisions, without I/O: which tests counts can screen and why the others go
to time, what a counted screen decided, and one verdict per test with the evidence behind it.

    route        a test is *screened by counts* unless something its effect lives in is invisible
                 to callgrind or cannot run under it (`timed_reasons`); such a test goes straight
                 to time, with the reasons. Pipelining is such a reason only when the gate times
                 pipelines (`gate --pipelines time`); by default a pipelined test's screen also
                 judges the server's reads and writes per request (SYSTEM_CALLS), what it saves
    screen       the counted A/B of a test (redline.analysis.counted's rule on every counted metric,
                 and on SYSTEM_CALLS where the route asked for them):
                   no change   every counted metric says no change
                   moved       a counted metric says regression or improvement, or the estimated
                               cycles alone moved (withheld: layout; see withhold_layout_change)
                   undecided   anything else (too few runs, a spread above 5%, an interval
                               that straddles τ, failed runs)
    confirm      a test whose screen did not say "no change" is measured by time, interleaved and
                 adaptive as `redline compare` (redline.lab.local.compare_policy), on one decision
                 metric (server CPU per operation unless told otherwise; throughput where there
                 is no server CPU, as with tcp://)
    verdict      decided by time when the test was timed; "no change" by counts when the screen
                 said so; a change is never claimed on counts alone — a counted change that time
                 cannot resolve stays inconclusive, with both numbers shown
    false discoveries   Benjamini–Hochberg over every timed decision of the catalogue (the counted
                 rule gives no p-value: it only ever decides "no change" here)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from redline.analysis.comparison import TestComparison, apply_false_discovery_control, compare_test
from redline.analysis.stats import Verdict
from redline.bench.window_fit import fitted_words
from redline.core.run import Run
from redline.instructions.visibility import pipeline_of, visibility_warnings
from redline.instructions.window import BURST_PIPELINES
from redline.suites import roles
from redline.suites.commands import measured_commands
from redline.system.steadiness import probe_of

COUNT, TIME = "count", "time"
NO_CHANGE, MOVED, UNDECIDED = "no change", "moved", "undecided"
# a test's final word, besides the four verdicts of redline.analysis.stats.Verdict
NOT_MEASURED, SKIPPED = "undecided", "skipped"
DECISION_METRIC = "server_cpu_us_per_op"
FALLBACK_METRIC = "ops_per_sec"          # where no server CPU is measured (tcp://)
COUNTED_HEADLINE = "instructions_per_op_command"
# commands whose work is waiting for another client (or a timeout): callgrind sees none of it
BLOCKING = frozenset({"blpop", "brpop", "brpoplpush", "blmove", "blmpop", "bzpopmin", "bzpopmax", "bzmpop",
                      "wait", "waitaof", "subscribe", "psubscribe", "ssubscribe"})
BLOCK_OPTION = frozenset({"xread", "xreadgroup"})     # blocking with BLOCK
# What pipelining saves, per request, counted in the screen's own windows (INFO total_reads_processed
# and total_writes_processed: each a read or write system call on a client connection). Callgrind
# counts no system call, so a pipelined test is screened only with these compared too.
SYSTEM_CALLS = ("server_reads_per_op", "server_writes_per_op")
KERNEL_CYCLES = 10_000       # a request's system calls on loopback (a read, a write: ~4 µs), in cycles
# A request of at least this many instructions hides what pipelining saves it (at most KERNEL_CYCLES,
# under 1%): its screen stands even when its counted window could not hold the pipeline's batching
SYSTEM_CALLS_HIDDEN = 100 * KERNEL_CYCLES


def screened_pipeline(test, *, count_pipelines: bool) -> int:
    """The pipeline whose SYSTEM_CALLS the screen of `test` judges: its own when the gate counts
    pipelines, else 1 (none judged)."""
    return pipeline_of(test) if count_pipelines else 1


def timed_reasons(test, topology, sides, *, count_pipelines: bool = False) -> list[str]:
    """Why this test cannot be screened by counts (empty: it can): what callgrind does not see
    (redline.instructions.visibility), servers it cannot run, work that is waiting. With
    `count_pipelines`, pipelining is not a reason: the screen compares SYSTEM_CALLS."""
    reasons = []
    remote = [side.target.label for side in sides if not side.target.managed]
    if remote:
        reasons.append(f"{remote[0]} is a server redline does not run: it cannot run under callgrind")
    if topology.cluster:
        reasons.append(f"{topology.name}: callgrind counts one server process, a cluster runs several")
    elif topology.replicas:
        reasons.append(f"{topology.name}: callgrind counts one server process, replicas are others")
    reasons += visibility_warnings(test, topology, system_calls_compared=count_pipelines)
    if test.multi_client:
        reasons.append(f"{len(test.clients)} clients at once: the headline client's work waits on the others")
    elif roles.is_role(test.client.tool):
        reasons.append(f"its client plays {test.client.tool}: that work is mostly waiting (blocking pops, "
                       "deliveries)")
    waiting = sorted({command[0].lower() for command in measured_commands(test) if command and (
        command[0].lower() in BLOCKING
        or (command[0].lower() in BLOCK_OPTION and "block" in (arg.lower() for arg in command[1:])))})
    if waiting and not test.multi_client and not roles.is_role(test.client.tool):
        reasons.append(f"{', '.join(name.upper() for name in waiting)} wait for data or a timeout: waiting is "
                       "not counted")
    if test.extensions.get("measure") == "time":
        reasons.append("the suite asks to be measured by time (redline: measure: time)")
    return reasons


@dataclass
class Screen:
    """What the counted A/B of one test decided."""

    decision: str                      # NO_CHANGE, MOVED or UNDECIDED
    comparisons: list[TestComparison]
    note: str | None = None            # why undecided

    @property
    def moved(self) -> list[TestComparison]:
        return moved_counts(self.comparisons)

    @property
    def in_call(self) -> TestComparison | None:
        """The counted comparison of instructions in call(): the command's own execution."""
        return next((c for c in self.comparisons if c.metric == COUNTED_HEADLINE and c.result), None)

    @property
    def headline(self) -> TestComparison | None:
        """The counted comparison the test is shown and judged by: instructions in call(), unless
        only other counted metrics moved (GEOPOS at 7.0.7: call() unchanged, the whole process
        −4.9%; XREADGROUP + XACK: estimated cycles alone, withheld): then the first that moved, in
        the order counts are compared (instructions before the cache model's estimated cycles)."""
        moved, in_call = self.moved, self.in_call
        if moved and in_call not in moved:
            return moved[0]
        return in_call or next((c for c in self.comparisons if c.result), None)


def moved_counts(comparisons: list[TestComparison]) -> list[TestComparison]:
    """The counted comparisons that send a test to time: a change alone, or a change withheld
    (estimated cycles alone, with the same instructions: layout), which time decides."""
    return [c for c in comparisons
            if c.result and (c.verdict_alone in (Verdict.REGRESSION, Verdict.IMPROVEMENT) or c.withheld)]


def screen(key: str, runs: list[Run], floors: dict, *, pipeline: int = 1) -> Screen:
    """The counted screen's decision from a test's counted runs (both sides); `pipeline` > 1: the
    server's reads and writes per request are judged too, in windows of at least BURST_PIPELINES
    pipelines a connection (`_burst_window`)."""
    measured = [r for r in runs if r.purpose == "measure"]
    failed = [r for r in measured if r.status == "failed"]
    also = SYSTEM_CALLS if pipeline > 1 else ()
    comparisons = compare_test(key, measured, floors, also=also) if measured else []
    missing = [c for c in comparisons if c.result is None]
    if not comparisons or missing:
        note = missing[0].note if missing else "no counted run"
        if failed:
            note = f"{len(failed)} counted runs failed: {failed[0].error}"
        return Screen(UNDECIDED, comparisons, note)
    burst = _burst_window(measured, pipeline)
    if burst:
        return Screen(UNDECIDED, comparisons, burst)
    verdicts = {c.verdict_alone for c in comparisons}
    if verdicts == {Verdict.NO_CHANGE}:
        return Screen(NO_CHANGE, comparisons)
    moved = moved_counts(comparisons)
    if moved:
        return Screen(MOVED, comparisons, ", ".join(f"{c.metric} {c.result.delta_pct:+.1f}%" for c in moved))
    refusal = next((c.state_refusal for c in comparisons if c.state_refusal), None)
    undecided = [c.metric for c in comparisons if c.verdict_alone == Verdict.INCONCLUSIVE]
    return Screen(UNDECIDED, comparisons, refusal or f"counts inconclusive on {', '.join(undecided)}")


def _burst_window(runs: list[Run], pipeline: int) -> str | None:
    """Why these runs' system calls are not the pipeline's (a window of fewer than BURST_PIPELINES
    pipelines per connection: one burst, on requests cheap enough for system calls to matter), or
    None. The window asks for more (redline.instructions.window.PIPELINES_PER_WINDOW) where it can
    afford them."""
    if pipeline <= 1:
        return None
    least = BURST_PIPELINES * pipeline
    ok = [r for r in runs if r.status == "ok"]
    sent = [(r.facts.get("instructions") or {}).get("requests_per_connection") or 0 for r in ok]
    costs = [r.metrics.get("instructions_per_op") for r in ok if r.metrics.get("instructions_per_op")]
    if costs and min(costs) >= SYSTEM_CALLS_HIDDEN:
        return None
    if sent and min(sent) < least:
        return (f"its counted window sent {min(sent)} requests a connection, fewer than {BURST_PIPELINES} pipelines "
                f"of {pipeline}: its system calls are one burst's, not the pipeline's")
    return None


def counted_rule(floors: dict, max_runs: int, *, pipeline: int = 1):
    """The screen's adaptive rule (an engine MoreRuns): one more counted run per side while the
    screen is undecided (an interval that straddles τ, a stray run) and the runs allow. A screen
    that says "moved" gets none: a change is confirmed by time, not by more counts."""
    def more_runs(test, records, runs_so_far):
        key = records[-1].key if records else test.name
        found = screen(key, [r for r in records if r.key == key], floors, pipeline=pipeline)
        undecided = found.decision == UNDECIDED
        return 1 if undecided and runs_so_far < max_runs else 0
    return more_runs


@dataclass
class Evidence:
    """Everything measured for one test of the gate, by stage."""

    test: str
    key: str
    route: str                                      # COUNT or TIME
    why_timed: list[str] = field(default_factory=list)
    pipeline: int = 1                               # > 1: its screen judges SYSTEM_CALLS at this pipeline
    counted: list[Run] = field(default_factory=list)
    timed: list[Run] = field(default_factory=list)
    profiles: list[Run] = field(default_factory=list)
    profile_diff: tuple[list[dict], str] | None = None    # moved symbols, differential flame graph
    lost: str | None = None                          # a job of the test ended without runs, and why
    not_measured: str | None = None                  # why a stage the test needs did not run (budget)


@dataclass
class TestVerdict:
    """One test's verdict and the evidence that decided it."""

    test: str
    verdict: str                   # a Verdict constant, NOT_MEASURED or SKIPPED
    decided_by: str | None         # "counts", "time" or None
    why: str
    route: str
    why_timed: list[str]
    screen: Screen | None
    timed: TestComparison | None
    timed_all: list[TestComparison] = field(default_factory=list)
    moved_symbols: list[dict] | None = None
    diff_flamegraph: str | None = None

    @property
    def effect_pct(self) -> float | None:
        """The change of the evidence that decided (or would decide) the test."""
        if self.timed and self.timed.result:
            return self.timed.result.delta_pct
        head = self.screen.headline if self.screen else None
        return head.result.delta_pct if head and head.result else None

    def as_json(self) -> dict:
        head = self.screen.headline if self.screen else None
        return {
            "test": self.test, "verdict": self.verdict, "decided_by": self.decided_by, "why": self.why,
            "route": self.route, "why_timed": self.why_timed, "effect_pct": self.effect_pct,
            "counted": None if self.screen is None else {
                "decision": self.screen.decision, "note": self.screen.note,
                "headline_metric": head.metric if head else None,
                "metrics": [c.as_json() for c in self.screen.comparisons]},
            "timed": None if self.timed is None else self.timed.as_json(),
            "timed_all": [c.as_json() for c in self.timed_all],
            "moved_symbols": self.moved_symbols, "diff_flamegraph": self.diff_flamegraph,
        }


def _decision(comparisons: list[TestComparison], metric: str) -> TestComparison | None:
    chosen = next((c for c in comparisons if c.metric == metric and c.result), None)
    return chosen or next((c for c in comparisons if c.metric == FALLBACK_METRIC and c.result), None) \
        or next((c for c in comparisons if c.metric == metric), None)


def _interval(c: TestComparison) -> str:
    r = c.result
    return f"{r.delta_pct:+.1f}% [{r.ci_low_pct:+.1f}%, {r.ci_high_pct:+.1f}%]"


def judge(evidence: list[Evidence], *, floors: dict, metric: str = DECISION_METRIC, confidence: float = 0.95,
          q: float = 0.05, runs_allowed: int | None = None) -> list[TestVerdict]:
    """One verdict per test (see the module docstring), Benjamini–Hochberg over every timed
    decision of the catalogue; `runs_allowed` (the timed most runs per side) so that a test whose
    timed runs stopped as futile says so."""
    screens = {e.key: screen(e.key, e.counted, floors, pipeline=e.pipeline) if e.counted else None
               for e in evidence}
    timed_all = {e.key: compare_test(e.key, [r for r in e.timed if r.purpose == "measure"], floors,
                                     confidence=confidence, runs_allowed=runs_allowed) if e.timed else []
                 for e in evidence}
    decisions = {key: _decision(comparisons, metric) for key, comparisons in timed_all.items()}
    apply_false_discovery_control([d for d in decisions.values() if d is not None], q=q)
    return [_verdict(e, screens[e.key], decisions[e.key], timed_all[e.key]) for e in evidence]


def _verdict(e: Evidence, found: Screen | None, timed: TestComparison | None,
             timed_all: list[TestComparison]) -> TestVerdict:
    moved, svg = e.profile_diff or (None, None)

    def verdict(word: str, by: str | None, why: str) -> TestVerdict:
        return TestVerdict(e.key, word, by, why, e.route, e.why_timed, found, timed, timed_all, moved, svg)

    every = e.counted + e.timed
    if every and all(r.status == "skipped" for r in every):
        return verdict(SKIPPED, None, every[0].error or "skipped")
    counted_word = None
    if found is not None and found.decision == MOVED:
        counted_word = f"counts moved ({found.note})"
    elif found is not None and found.decision == UNDECIDED:
        counted_word = f"counts undecided ({found.note})"
    if timed is not None and timed.result is not None:
        word = timed.verdict
        basis = f"time: {timed.metric} {_interval(timed)}, τ {timed.result.tau_pct:.1f}%"
        if word == Verdict.INCONCLUSIVE:
            held = " (significant alone, not among the catalogue's comparisons)" if timed.held_back_by_fdr else ""
            why = f"{basis}{held}; smallest detectable change {timed.result.min_detectable_pct:.1f}%"
            why += f"; {timed.result.futility_note}" if timed.result.futility_note else ""
            probe = probe_of(e.timed)
            why += f"; the machine was {probe.describe()} as its timed runs began" if probe and not probe.steady else ""
        else:
            why = basis
        fitted = fitted_words(e.timed)
        why += f"; {fitted}" if fitted else ""
        why += "".join(f"; {flag}" for flag in timed.state_flags)     # redline.analysis.same_state
        if e.route == TIME:
            why += f"; timed because {e.why_timed[0]}" if e.why_timed else ""
        elif counted_word:
            why += f"; {counted_word}"
            if found.decision == MOVED and word in (Verdict.REGRESSION, Verdict.IMPROVEMENT):
                head = found.headline
                if head and head.result and (head.result.delta_pct > 0) != (timed.result.delta_pct > 0) \
                        and timed.result.higher_is_better == head.result.higher_is_better:
                    why += "; counts and time moved in opposite directions"
                why += _around_the_command(found)
        return verdict(word, "time" if word != Verdict.INCONCLUSIVE else None, why)
    if found is not None and found.decision == NO_CHANGE:
        head = found.headline
        return verdict(Verdict.NO_CHANGE, "counts",
                       f"counts: every counted metric inside ±τ ({head.metric} {_interval(head)}, "
                       f"τ {head.result.tau_pct:.1f}%)")
    # measured too little to decide
    failed = [r for r in every if r.status == "failed"]
    if timed is not None:           # timed runs, but no comparison of the decision metric
        why = timed.note or "no timed comparison"
        timed_failed = [r for r in e.timed if r.status == "failed"]
        if timed_failed:
            why += f"; {len(timed_failed)} timed runs failed: {timed_failed[0].error}"
        return verdict(Verdict.INCONCLUSIVE, None, why + (f"; {counted_word}" if counted_word else ""))
    reasons = [x for x in (counted_word, e.lost, e.not_measured) if x]
    if failed and not reasons:
        reasons.append(f"{len(failed)} runs failed: {failed[0].error}")
    if e.route == TIME and e.why_timed and not e.timed:
        reasons.append(f"needs time: {e.why_timed[0]}")
    return verdict(NOT_MEASURED, None, "; ".join(reasons) or "not measured")


def _around_the_command(found: Screen) -> str:
    """Where a change confirmed by time lies, when the counts tell: the command's own execution
    (`call()`) unchanged while the whole process moved means the change is in the work around the
    command (reading, parsing, replying, per-client bookkeeping), not in the command's code. A GEOHASH
    that got 2.6% cheaper only because 7.0.6 stopped tracking client memory per request says so."""
    command = found.in_call
    if command is None or command.verdict_alone != Verdict.NO_CHANGE:
        return ""
    return (f"; the command itself did not change by counts (call() {_interval(command)}): "
            f"the change is in the work around it")


def summary(verdicts: list[TestVerdict]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for v in verdicts:
        counts[v.verdict] = counts.get(v.verdict, 0) + 1
    return counts
