"""The catalogue gate on this machine: every test of a catalogue, baseline vs comparison, one
verdict each, decided in the time a commit gives (issue #35, docs/gate.md).

    select     the catalogue's suites, tolerant: a broken suite is named (file:line) and skipped,
               the rest run (`select_catalogue`; `run` and `compare` stay strict)
    route      each test on its own topology (oss-standalone where it lists it), screened by counts
               or sent to time with the reasons (redline.analysis.gate.timed_reasons)
    screen     a counted A/B job per countable test, in the scheduler's lanes
    confirm    a timed A/B job per test whose screen did not say "no change" and per test counts
               cannot see, alone on the machine, adaptive as compare; a counted profile job per test
               whose counts moved (its differential flame graph)
    judge      one verdict per test, Benjamini–Hochberg over the catalogue (redline.analysis.gate)

Every job goes through one scheduler (redline.lab.scheduler) and so through execute_job; this
module decides which jobs exist, in what order, and what their runs mean. The gate's document
(plan, every test's stages with the uids of their runs, the verdicts, the phase times) is saved
with the session after every job, so an interrupted gate resumes (`resume`) without redoing the
stages that ended, and a budget that ends says what it left undecided.
"""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Callable

from redline.analysis.comparison import first_paired_look, looks_confidence, profile_differences
from redline.analysis.stats import Verdict, benjamini_hochberg_room
from redline.analysis.gate import (COUNT, DECISION_METRIC, FALLBACK_METRIC, KERNEL_CYCLES, NO_CHANGE, TIME, Evidence,
                                   TestVerdict, counted_rule, judge, screen, screened_pipeline, summary, timed_reasons)
from redline.core.errors import UsageError
from redline.core.numbers import format_duration
from redline.core.metrics import INSTRUCTIONS
from redline.core.metrics import TIME as TIMED
from redline.core.run import Run
from redline.engine.job import Job, JobResolver, SideSpec, suite_reference
from redline.engine.run_plan import Side
from redline.instructions.visibility import pipeline_of
from redline.lab.local import compare_policy
from redline.lab.scheduler import Scheduler
from redline.suites import SpecError, TestSpec, discover, load_test
from redline.suites.discovery import name_pattern
from redline.system.steadiness import summarize
from redline.topology import DEFAULT_TOPOLOGY, TopologySpec, parse_topology

DOCUMENT = "gate"
DOCUMENT_FORMAT = 1
SCREEN, CONFIRM, PROFILE = "screen", "time", "profile"
UNKNOWN_EFFECT_PCT = 5.0     # the change time may see in a test nothing was counted of (expected_effect)
PIPELINED = re.compile(r"-pipeline-\d+")
GATE_WINDOW_INSTRUCTIONS = 50_000_000   # the screen's counted window (redline.instructions.window's default: 150M)
GENERATED_ELEMENT_BYTES = 100           # a generated dataset's element, for the screen's cost (_screen_cost)
SERVER_START_BYTES = 10_000_000         # what starting a server under valgrind costs, as if it restored this much


@dataclass
class GateSettings:
    """How the gate measures. Counted: `counted_runs` per side, one more (up to
    `counted_max_runs`) while the screen is not "no change". Timed: `timed_runs` per side, two more
    while undecided up to `timed_max_runs`, each run `duration_s` after `warmup_s` (as duets, `gate
    --duet` starts at redline.analysis.comparison.first_paired_look instead)."""

    counted_runs: int = 2
    counted_max_runs: int = 3
    timed_runs: int = 5
    timed_max_runs: int = 15
    duration_s: float = 3.0
    warmup_s: float = 1.0
    scale: float | None = None
    window_instructions: int | None = None
    snapshots: bool = True
    metric: str = DECISION_METRIC
    profile: bool = True            # counted profiles of the tests whose counts moved
    duet: bool = False              # timed confirmations as duets (redline.engine.engine)
    # pipelined tests screened by counts and system calls per request (`gate --pipelines count`, the
    # command's default; False here so that a gate stored before it resumes as it began)
    count_pipelines: bool = False
    confirm: bool = True            # False (--screen-only): counts alone, no timed confirmation
    q: float = 0.05

    @classmethod
    def from_json(cls, document: dict) -> GateSettings:
        return cls(**{k: v for k, v in document.items() if k in cls.__dataclass_fields__})

    @classmethod
    def first_look(cls, *, duet: bool, max_runs: int) -> int:
        """Timed runs per side before a confirmation's first look: 5 interleaved; as duets, the fewest
        pairs whose own (signed-rank) interval can decide, since a duet's two sides differ far less
        from each other than from the runs before and after them (docs/statistics.md, Duets)."""
        return first_paired_look(max_runs) if duet else cls.timed_runs

    @classmethod
    def resumed(cls, document: dict, *, duet: bool, pipelines: str | None = None,
                confirm: bool = True) -> GateSettings:
        """The settings of the gate `document` goes on with. `duet` (`--resume --duet`): its timed
        confirmations still to run are duets; when none has run yet, every timed verdict will be
        judged with the same looks, so they may start at the duet's first look too.
        `pipelines` (`--resume --pipelines count|time`): how its pipelined tests are routed from now
        on (those whose stages ended keep them); None keeps the gate's own. `confirm` is this
        session's own: a gate screened with --screen-only is confirmed by resuming without it."""
        settings = cls.from_json(document["settings"])
        settings.duet = settings.duet or duet
        if pipelines is not None:
            settings.count_pipelines = pipelines == "count"
        settings.confirm = confirm
        timed_begun = any(entry.get("timed") or entry.get("timed_all") for entry in document.get("tests", []))
        if settings.duet and not timed_begun:
            settings.timed_runs = max(settings.timed_runs, cls.first_look(duet=True, max_runs=settings.timed_max_runs))
        return settings


@dataclass
class Broken:
    """A suite of the catalogue that cannot run: where and why."""

    location: str
    message: str

    def __str__(self) -> str:
        return f"{self.location}: {self.message}"


def select_catalogue(items: list[str], name: str | None = None) -> tuple[list[TestSpec], list[Broken]]:
    """Every test the catalogue holds whose name matches `name`, and every broken suite with its
    file:line (a file that cannot be read, a suite with errors, a second suite of the same name).
    A path that does not exist, or nothing to run, is a usage error."""
    try:
        files = discover(items).files
    except SpecError as exc:
        raise UsageError(str(exc)) from exc
    pattern = name_pattern(name) if name else None
    tests, broken, seen = [], [], {}
    for path in files:
        try:
            test = load_test(path)
        except SpecError as exc:
            broken.append(Broken(f"{exc.path}:{exc.line}" if exc.line else str(exc.path), exc.message))
            continue
        if pattern is not None and not pattern.search(test.name):
            continue
        if test.has_errors:
            first = next(d for d in test.diagnostics if d.severity == "error")
            broken.append(Broken(first.location, first.message))
            continue
        if test.name in seen:
            broken.append(Broken(str(path), f"a second suite named {test.name!r} (the first is {seen[test.name]})"))
            continue
        seen[test.name] = path
        tests.append(test)
    if not tests:
        raise UsageError(f"no test matches --name {name!r}" if name else "the catalogue holds no test that can run")
    return tests, broken


def topology_of(test: TestSpec) -> TopologySpec:
    """The topology the gate measures a test on: oss-standalone when the suite lists it (or lists
    none), else the first one it lists."""
    listed = test.topologies or [DEFAULT_TOPOLOGY]
    return parse_topology(DEFAULT_TOPOLOGY if DEFAULT_TOPOLOGY in listed else listed[0])


@dataclass
class GatePlan:
    sides: list[Side]                 # baseline, comparison: ready (built)
    tests: list[TestSpec]
    broken: list[Broken]
    settings: GateSettings
    budget_s: float | None = None
    resumed: list[dict] = field(default_factory=list)    # the earlier gate documents this one continues
    argv: list[str] = field(default_factory=list)
    builds_s: float = 0.0              # getting the sides ready (built, or found in the build cache)


@dataclass
class GateResult:
    verdicts: list[TestVerdict]
    document: dict
    records: list[Run]
    interrupted: bool = False


class Gate:
    """One gate session: its jobs through `scheduler`, its document saved with session `session_id`."""

    def __init__(self, plan: GatePlan, *, store, session_id: int, scheduler: Scheduler, floors: dict,
                 progress=None, clock: Callable[[], float] = time.monotonic):
        self.plan, self.store, self.session_id, self.scheduler = plan, store, session_id, scheduler
        self.floors, self.progress, self.clock = floors, progress, clock
        self.settings = plan.settings
        self.started = clock()
        self.deadline = self.started + plan.budget_s if plan.budget_s else None
        self.resolver = JobResolver(tests=plan.tests, sides=plan.sides)
        self.evidence: dict[str, Evidence] = {}
        self.tests: dict[str, TestSpec] = {}
        self.topology: dict[str, str] = {}
        self.stages: dict[str, dict[str, dict]] = {}       # key -> stage -> {"runs": [uids], "s": seconds}
        self.job_stage: dict[str, tuple[str, str]] = {}    # job_id -> (key, stage)
        self.records: list[Run] = []
        self.phase_s: dict[str, float] = {"screen": 0.0, "time": 0.0, "profile": 0.0}
        self.first_screen_at: float | None = None
        self.last_screen_at: float | None = None
        self.profile_span: tuple[float, float] | None = None   # first profile run's start, last one's end
        self.budget_left: list[str] = []                   # keys whose next stage the budget cut
        self.budget_unprofiled: list[str] = []             # keys decided, whose profile the budget cut
        self._verdicts: list[TestVerdict] = []              # the latest: run() sets them, then each _done
        self.countable: dict[str, bool] = {}               # callgrind can run it (a profile after a timed change)
        self._screens: dict[str, tuple] = {}
        self._costs: dict[str, float] = {}
        for test in plan.tests:
            topology = topology_of(test)
            key = test.name if topology.name == DEFAULT_TOPOLOGY else f"{test.name}@{topology.name}"
            pipelines = self.settings.count_pipelines
            reasons = timed_reasons(test, topology, plan.sides, count_pipelines=pipelines)
            self.countable[key] = not (topology.cluster or topology.replicas or topology.io_threads) and \
                all(side.target.managed for side in plan.sides)
            self.evidence[key] = Evidence(test.name, key, TIME if reasons else COUNT, reasons,
                                          pipeline=1 if reasons else screened_pipeline(test, count_pipelines=pipelines))
            self.tests[key], self.topology[key] = test, topology.name
            self.stages[key] = {}
        self._take_earlier(plan.resumed)

    # -- resuming ----------------------------------------------------------------------------------
    def _take_earlier(self, documents: list[dict]) -> None:
        """The stages that ended in the gates this one continues, with their runs."""
        sessions = {session for document in documents
                    for session in document.get("sessions", [document.get("session_id")])}
        runs_by_uid = {run.uid: run for session in sorted(sessions) for run in self.store.load_runs(session)}
        for document in documents:
            for entry in document.get("tests", []):
                key = entry["key"]
                if key not in self.evidence:
                    continue
                for stage, done in (entry.get("stages") or {}).items():
                    runs = [runs_by_uid[uid] for uid in done["runs"] if uid in runs_by_uid]
                    if len(runs) != len(done["runs"]):
                        continue          # a run is gone from the store: measure the stage again
                    self.stages[key][stage] = done
                    self._add(key, stage, runs)

    def _add(self, key: str, stage: str, runs: list[Run]) -> None:
        e = self.evidence[key]
        if stage == SCREEN:
            e.counted = runs
        elif stage == CONFIRM:
            e.timed = runs
        elif stage == PROFILE:
            e.profiles = runs
            artifacts = self.store.artifacts(f"gate-{self.session_id}")
            diffs = profile_differences(runs, artifacts)
            e.profile_diff = diffs.get(key)

    # -- what to run ---------------------------------------------------------------------------------
    def _job(self, key: str, stage: str) -> Job:
        s, test = self.settings, self.tests[key]
        common = {"scale": s.scale, "snapshots": s.snapshots, "profile": False}
        # a pipelined test's counted runs: the screen judges its reads and writes per request too
        judged = {"system_calls_judged": self.evidence[key].pipeline > 1}
        if stage == SCREEN:
            # the request count this store's earlier counted runs of the test used, kept while it fits
            # (redline.lab.session.carry_request_counts): sessions of one store count alike
            window = s.window_instructions or GATE_WINDOW_INSTRUCTIONS
            settings = {**common, "measure": INSTRUCTIONS, "runs": s.counted_runs, "window_instructions": window,
                        "earlier_window_requests": self.store.earlier_window_requests(test.name, self.topology[key],
                                                                                       window),
                        **judged}
            max_runs = s.counted_max_runs
        elif stage == PROFILE:
            requests = next((r.facts.get("instructions", {}).get("requests_per_connection")
                             for r in self.evidence[key].counted if r.status == "ok"), None)
            settings = {**common, "measure": INSTRUCTIONS, "runs": 0, "profile": True,
                        "window_instructions": s.window_instructions or GATE_WINDOW_INSTRUCTIONS,
                        "window_requests": requests, **judged}
            max_runs = None
        else:
            settings = {**common, "measure": TIMED, "runs": s.timed_runs, "duration_s": s.duration_s,
                        "warmup_s": s.warmup_s, "duet": s.duet}
            # the p its change needs to survive the catalogue's false-discovery control is set as the
            # job starts (_rule), from the timed decisions that ended before it
            max_runs = s.timed_max_runs
        job = Job(suite=suite_reference(test.path), test=test.name, sides=[SideSpec.of(side) for side in self.plan.sides],
                  topology=self.topology[key], settings=settings, max_runs=max_runs)
        self.job_stage[job.job_id] = (key, stage)
        return job

    def _room_for_a_change(self) -> float:
        """The p a timed change needs now to survive the catalogue's Benjamini-Hochberg whatever the
        tests still to be timed turn out to be (redline.analysis.stats.benjamini_hochberg_room): q/m
        for the first, more as earlier timed confirmations decide changes. So a test that moved a
        lot stops as soon as its runs are that sure, not when they would be sure alone among m."""
        decided = [v.timed.result.p_value for v in self._verdicts if v.timed is not None and v.timed.result is not None]
        return benjamini_hochberg_room(decided, family=max(self._timed_family_bound(), len(decided) + 1),
                                       q=self.settings.q)

    def _timed_family_bound(self) -> int:
        """At most how many tests the catalogue's timed decisions will cover: every test but those
        whose counted screen ended them without time."""
        return sum(1 for key in self.evidence if CONFIRM in self.stages[key] or self._needs(key))

    def _needs(self, key: str, verdicts: dict[str, TestVerdict] | None = None) -> list[str]:
        """The stages a test needs next, given what it has: its counted screen; a timed
        confirmation unless the screen said "no change" (or the test cannot run, or its data cannot
        be prepared); after a timed change, a counted profile where callgrind can run the test."""
        e, done = self.evidence[key], self.stages[key]
        if e.route == COUNT:
            if SCREEN not in done:
                return [SCREEN]
            found = self._screen_of(key)
            if found.decision == NO_CHANGE or _skipped(e.counted) or _data_failed(e.counted):
                return []
        if CONFIRM not in done:
            return [CONFIRM]
        verdict = (verdicts or {}).get(key)
        changed = verdict is not None and verdict.verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT)
        return [PROFILE] if changed and self.settings.profile and self.countable[key] and PROFILE not in done else []

    def _next_jobs(self, key: str, verdicts: dict[str, TestVerdict] | None = None) -> list[Job]:
        return [self._job(key, stage) for stage in self._needs(key, verdicts)
                if stage != CONFIRM or self.settings.confirm]

    def _priority(self, job: Job) -> tuple:
        """Counted screens first (they decide most tests, in every lane; the cheapest first), then
        the timed jobs, the likeliest decisions first: by the change time is expected to see
        (`expected_effect`), then the profiles of what changed. A profile never decides a verdict,
        and one started between timed jobs holds the machine with one lane while the others wait
        for the next timed job: last, they run side by side in every lane."""
        key, stage = self.job_stage[job.job_id]
        if stage == SCREEN:
            if key not in self._costs:
                self._costs[key] = self._screen_cost(key)
            return (0, self._costs[key])
        if stage == PROFILE:
            return (2,)
        test = self.tests[key]
        return (1, -self.expected_effect(key), test.priority if test.priority is not None else 1 << 30)

    def expected_effect(self, key: str) -> float:
        """|Δ| % that time may see for this test, for the order of timed jobs only: its counted move
        (the largest counted metric's) scaled by the share of a request's cost that is user space
        (est. cycles per op ÷ (that + KERNEL_CYCLES per request at its pipeline)); a test only time
        can measure borrows the screen of its sibling at pipeline 1 (the same suite name without
        "-pipeline-N", or with "-pipeline-1"), else UNKNOWN_EFFECT_PCT."""
        e = self.evidence[key]
        found = self._screen_of(key) if e.route == COUNT else None
        pipeline = pipeline_of(self.tests[key])
        if found is None:
            siblings = [PIPELINED.sub(end, key) for end in ("", "-pipeline-1")]
            sibling = next((k for k in siblings if k != key and k in self.evidence and self.evidence[k].route == COUNT),
                           None)
            if sibling is None:
                return UNKNOWN_EFFECT_PCT
            found = self._screen_of(sibling)
        if found is None or not found.comparisons:
            return UNKNOWN_EFFECT_PCT
        results = {c.metric: c.result for c in found.comparisons if c.result}
        if not results:
            return UNKNOWN_EFFECT_PCT
        move = max(abs(r.delta_pct) for r in results.values())
        cycles = results.get("est_cycles_per_op")
        share = cycles.comparison_median / (cycles.comparison_median + KERNEL_CYCLES / pipeline) if cycles else 1.0
        return move * share

    def _screen_of(self, key: str):
        """The key's screen, remembered while its counted runs stay the same."""
        e = self.evidence[key]
        if not e.counted:
            return None
        mark = tuple(r.uid for r in e.counted)
        if self._screens.get(key, (None,))[0] != mark:
            self._screens[key] = (mark, screen(key, e.counted, self.floors, pipeline=e.pipeline))
        return self._screens[key][1]

    def _screen_cost(self, key: str) -> float:
        """What a test's counted screen costs, roughly, for its place in the queue: the data every
        server start under valgrind restores (the preload's estimate, a generated dataset's
        elements), times the starts (both sides; each run when the commands write). Cheap screens
        first, so a budget decides as many tests as it can."""
        from redline.bench.admission import estimated_preload_bytes
        from redline.datasets import lookup
        from redline.server.traits import writing_commands
        test = self.tests[key]
        data = estimated_preload_bytes(test)
        generated = lookup(test.db.dataset_name) if test.db.dataset_name else None
        if generated is not None:
            from redline.bench.preparation import dataset_scale
            data += generated.plan(dataset_scale(test, self.settings.scale)).element_count * GENERATED_ELEMENT_BYTES
        writes = any(writing_commands(test, side.target.binary) for side in self.plan.sides
                     if side.target.managed and side.target.binary is not None and side.target.binary.is_file())
        return (data + SERVER_START_BYTES) * len(self.plan.sides) * (self.settings.counted_runs if writes else 1)

    def _rule(self, job: Job):
        key, stage = self.job_stage[job.job_id]
        if stage == SCREEN:
            return counted_rule(self.floors, job.max_runs, pipeline=self.evidence[key].pipeline)
        if stage == PROFILE:
            return None
        metric = self.settings.metric if all(side.target.managed for side in self.plan.sides) else FALLBACK_METRIC
        return compare_policy(replace(job, lone_p_value=self._room_for_a_change()), self.floors, metrics={metric})

    # -- running ------------------------------------------------------------------------------------
    def run(self) -> GateResult:
        self._verdicts = self.verdicts()
        verdicts = {v.test: v for v in self._verdicts}
        jobs = [job for key in self.evidence for job in self._next_jobs(key, verdicts)]
        self._tell_progress()
        completed = False
        try:
            self.scheduler.run(jobs, session_id=self.session_id, resolver=self.resolver, floors=self.floors,
                               more_runs=self._rule, on_done=self._done, stop=self._stop, priority=self._priority)
            completed = True
        finally:
            for job in self.scheduler.not_started:
                key, stage = self.job_stage[job.job_id]
                if stage == PROFILE:        # its verdict stands; only the profile of its change is missing
                    self.budget_unprofiled.append(key)
                    continue
                self.budget_left.append(key)
                what = "counted screen" if stage == SCREEN else "timed runs"
                self.evidence[key].not_measured = f"the budget ({format_duration(self.plan.budget_s)}) ended before its {what}"
            if not completed:
                for key, e in self.evidence.items():
                    if not e.not_measured and self._next_jobs_pending(key):
                        e.not_measured = "the gate stopped before it was decided (resume with --resume)"
            elif not self.settings.confirm:
                for key, e in self.evidence.items():
                    if CONFIRM in self._needs(key):
                        e.not_measured = "not confirmed by time (--screen-only; resume without it to confirm)"
            result = self._result(finished=completed)
        return result

    def _next_jobs_pending(self, key: str) -> bool:
        return any(stage != PROFILE for stage in self._needs(key))

    def _stop(self) -> bool:
        return self.deadline is not None and self.clock() >= self.deadline

    def _done(self, job: Job, runs: list[Run]) -> list[Job]:
        key, stage = self.job_stage[job.job_id]
        now = self.clock()
        self.records += runs
        lost = self.scheduler.lost.get(job.job_id)
        if lost:
            self.evidence[key].lost = lost
        else:
            seconds = sum((r.finished_at or 0) - (r.started_at or 0) for r in runs)
            self.stages[key][stage] = {"runs": [r.uid for r in runs], "run_s": round(seconds, 1),
                                       "session": self.session_id}
            self._add(key, stage, runs)
        if stage == SCREEN:
            self.first_screen_at = self.first_screen_at or now
            self.last_screen_at = now
        self.phase_s[stage] += _job_seconds(runs)
        if stage == PROFILE:
            self.profile_span = _span(runs, self.profile_span)
        verdicts = self._verdicts = self.verdicts()
        follow = [] if lost else self._next_jobs(key, {v.test: v for v in verdicts})
        self.store.save_session_document(self.session_id, DOCUMENT, self._document(verdicts, finished=False))
        self._tell_progress(verdicts)
        return follow

    # -- the verdicts and the document -------------------------------------------------------------------
    def verdicts(self) -> list[TestVerdict]:
        s = self.settings
        return judge(list(self.evidence.values()), floors=self.floors, metric=s.metric,
                     confidence=looks_confidence(s.timed_runs, s.timed_max_runs), q=s.q, runs_allowed=s.timed_max_runs)

    def _tell_progress(self, verdicts: list[TestVerdict] | None = None) -> None:
        if self.progress is not None:
            counts = summary(verdicts if verdicts is not None else self.verdicts())
            self.progress.decided(counts, len(self.evidence),
                                  None if self.deadline is None else self.deadline - self.clock())

    def _document(self, verdicts: list[TestVerdict], *, finished: bool) -> dict:
        by_key = {v.test: v for v in verdicts}
        sessions = [self.session_id] + [s for d in self.plan.resumed for s in d.get("sessions", [d["session_id"]])]
        return {
            "format": DOCUMENT_FORMAT, "kind": "gate", "session_id": self.session_id,
            "sessions": sorted(set(sessions)), "resumes": self.plan.resumed[0]["session_id"] if self.plan.resumed else None,
            "finished": finished, "argv": self.plan.argv,
            "sides": [SideSpec.of(side).to_json() for side in self.plan.sides],
            "settings": asdict(self.settings), "budget_s": self.plan.budget_s,
            "suites": sorted({suite_reference(t.path) for t in self.plan.tests}),
            "broken": [{"location": b.location, "message": b.message} for b in self.plan.broken],
            "elapsed_s": round(self.clock() - self.started, 1),
            "phases": self._phases(),
            "steadiness": self._steadiness(),
            "summary": summary(verdicts),
            "budget_left_undecided": sorted(set(self.budget_left)),
            "budget_left_unprofiled": sorted(set(self.budget_unprofiled)),
            "tests": [{"key": key, "test": e.test, "topology": self.topology[key], "route": e.route,
                       "why_timed": e.why_timed, "stages": self.stages[key],
                       **{k: v for k, v in by_key[key].as_json().items() if k not in ("test", "route", "why_timed")}}
                      for key, e in self.evidence.items()],
        }

    def _steadiness(self) -> dict | None:
        """How steady the machine was as each timed confirmation began (redline.system.steadiness)."""
        found = summarize(run for e in self.evidence.values() for run in e.timed)
        return found.as_json() if found else None

    def _phases(self) -> dict:
        """Where the time went: the counted screen's wall time (first to last screen job), the
        sum of the timed and profile jobs (they hold the machine or a lane), the profiles' wall
        time (they run side by side, last), and the preparation inside them (datasets prepared,
        snapshots saved)."""
        screen_wall = (self.last_screen_at - self.started) if self.last_screen_at else 0.0
        prepared, seen = 0.0, set()
        for r in self.records:
            dataset = r.facts.get("dataset") or {}
            made_here = "snapshot_save_s" in dataset or not dataset.get("restored_from")
            mark = (r.test, r.side, dataset.get("prepared_s"), dataset.get("snapshot_save_s"), r.facts.get("server_port"))
            if made_here and dataset.get("prepared_s") and mark not in seen:
                seen.add(mark)
                prepared += dataset["prepared_s"] + (dataset.get("snapshot_save_s") or 0.0)
        return {"builds_s": round(self.plan.builds_s, 1), "screen_wall_s": round(screen_wall, 1), "screen_job_s": round(self.phase_s["screen"], 1),
                "timed_s": round(self.phase_s["time"], 1), "profile_s": round(self.phase_s["profile"], 1),
                "profile_wall_s": round(self.profile_span[1] - self.profile_span[0], 1) if self.profile_span else 0.0,
                "preparation_s": round(prepared, 1)}

    def _result(self, *, finished: bool) -> GateResult:
        verdicts = self.verdicts()
        document = self._document(verdicts, finished=finished)
        self.store.save_session_document(self.session_id, DOCUMENT, document)
        return GateResult(verdicts, document, self.records, interrupted=not finished)


def _skipped(runs: list[Run]) -> bool:
    return bool(runs) and all(r.status == "skipped" for r in runs)


DATA_FAILURES = ("keyspace check failed", "init command failed")


def _data_failed(runs: list[Run]) -> bool:
    """Every side failed to prepare the test's data in a way that does not depend on how the
    server is measured (the suite's own keyspace check, its init commands): a timed run would
    fail the same way, so the test is not confirmed by time."""
    return bool(runs) and all(r.status == "failed" and any(f in (r.error or "") for f in DATA_FAILURES)
                              for r in runs)


def _job_seconds(runs: list[Run]) -> float:
    span = _span(runs)
    return span[1] - span[0] if span else 0.0


def _span(runs: list[Run], earlier: tuple[float, float] | None = None) -> tuple[float, float] | None:
    """(first start, last end) of `runs`, widened by `earlier`'s."""
    starts = [r.started_at for r in runs if r.started_at] + ([earlier[0]] if earlier else [])
    ends = [r.finished_at for r in runs if r.finished_at] + ([earlier[1]] if earlier else [])
    return (min(starts), max(ends)) if starts and ends else None




def earlier_documents(store, session_id: int) -> list[dict]:
    """The gate document of `session_id` and of every gate it resumed, newest first; UsageError
    when the session is not a gate of this store."""
    documents, seen = [], set()
    while session_id is not None and session_id not in seen:
        seen.add(session_id)
        document = store.session_document(session_id, DOCUMENT)
        if document is None or document.get("kind") != "gate":
            raise UsageError(f"--resume {session_id}: {store.path} holds no gate session {session_id}")
        documents.append(document)
        session_id = document.get("resumes")
    return documents
