"""The closed loop (#34): a work item's regression or improvement confirmed, then bisected by the
fleet's agents, and the culprit reported — with no one in the loop. The one place for the concept;
the collector calls it at two moments (redline/fleet/collector.py):

  `trigger`        a work item of a push or pull request is complete and a test moved on it (after
                   false-discovery control): a bisection is opened (or refused, with one line for
                   the work item's comment: caps, a range that is not one repository's git commits)
  `work_complete`  a work item of the loop is complete (its `bisection` field names the bisection),
                   or the work item that opened one: the bisection advances

**A bisection is a store session** of kind `bisect` with two documents: `bisection` (what
`redline bisect` stores: the outcome so far and the context; the report is rendered from it by
redline/output/bisect_report.py) and `fleet_bisection` (the coordinator's state: the range, the tests
followed, the metric and how it is measured, the platform, k, and every measured pair of commits —
or counted commit — with its work item and its answer). Nothing of it lives in the collector's
memory.

**Each measurement is fleet work.** A pair (reference, candidate) of commits is one work item:
`git:REPO@reference` as baseline, `git:REPO@candidate` as comparison, one job per followed test,
on the bisection's platform, with the original work item's settings. So it goes through
everything a work item does: the agents' build caches, XAUTOCLAIM of a killed agent's job,
retries and dead letters, the collector storing each job once. The pair's answer is its runs'
change of the metric per test (redline.bisect.measure.timed_changes); a pair whose jobs died is
"does not build or measure", with the error, and is not queued again.

**How it advances: by replaying the search.** `redline.bisect.search.bisect` is run from the start
with a comparer that answers from the stored pairs (`StoredAnswers`) and raises `Pending` with the
pairs it has no answer for. The search is deterministic given its answers, so each replay reaches
the same point and stops at the first thing not measured yet: the endpoint pair (the
confirmation: GOOD against BAD again, on the moved tests — only if the change is seen again, i.e.
the search finds moved tests, does it go on), then each round's k commits (k = the platform's live
agents when the bisection opened, fixed for it: the planner's rounds split the range into k + 1
parts), then the culprit's own change. Pending pairs become work items, recorded in the state
before they are enqueued (a restart between the two enqueues the same work id: `FleetQueue.submit`
skips a work item Redis already holds). An answer is recorded once per pair: a work item complete
twice (a replayed side effect) changes nothing.

Limits: at most `max_concurrent` open bisections per repository, at most `max_steps` work items
(pairs, counted commits) per bisection (the confirmation included); past the cap the bisection ends
with one line.

A round's step carries its rule as job data (`step_rule`: the search's half-way points, directions,
the endpoints' ratios, which end it is measured against, the metric; checked by
redline.fleet.entries): the agent adds runs while the candidate's interval straddles the half-way
point, as `redline bisect` does on one machine (redline.fleet.execution.step_rule_runs). The timed
confirmation and culprit's own change follow compare's adaptive rule.

**Counted where the tests can be counted** (`measuring`, `--bisect-measure`, default auto). When
every followed test can be counted (`timed_because` finds nothing callgrind does not see or run:
redline.analysis.gate.timed_reasons), the loop measures as `redline bisect --measure instructions`
does, with the same comparer: redline.bisect.measure.CountedComparer over `StoredCounts`, a
CommitCounter that answers from the counts stored in the state and raises `Pending` with `CountAsk`s
for what is not counted yet (the replay of StoredAnswers, for counts). The confirmation is one
counted work item, GOOD and BAD interleaved by `endpoint_runs` runs per side on one agent, deciding
on instructions per op; its τ sets each test's step tolerance and its request count per connection
goes into every later job of the test (the work item's `window_requests`). Each later commit is a
work item of one side, the commit counted by one run, compared with the counts of GOOD or BAD; the
culprit's own change comes from counts already taken. Counted work lives under keys of its own
(`counted:…`) beside the timed pairs, recorded before it is enqueued, answered once, like them. If
the counted confirmation does not see the change (its effect lives where counts do not look:
system calls, waiting, memory latency), sees it too small for one-run steps, or cannot count (its
jobs died), the bisection goes on timed from a timed confirmation (`_fall_back`; with
--bisect-measure instructions it ends "not reproduced"); the comment says why in one line. Tests
counts cannot see are timed from the start.

What is not here (docs/fleet.md "The closed loop"): `redline history` change points as a trigger.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Protocol

from redline.analysis.comparison import TestComparison, looks_confidence, measured_runs_by_test
from redline.analysis.counted import MIN_RUNS as COUNTED_MIN_RUNS
from redline.analysis.stats import Verdict
from redline.bisect import search
from redline.bisect.measure import DEFAULT_METRIC, Count, Counted, CountedComparer, failed_runs_note, timed_changes
from redline.bisect.planner import rounds_needed
from redline.bisect.search import Answer, Ask, Change, Commit, Outcome, Settled, StepRule, Unbuildable
from redline.core import metrics
from redline.core.errors import UsageError
from redline.core.run import Run
from redline.engine.job import Job, JobResolver, SideSpec
from redline.fleet import work as fleet_work
from redline.output.bisect_report import report_markdown
from redline.store.results import Store
from redline.system import machine

STATE = "fleet_bisection"         # the coordinator's document in the bisection's session
DOCUMENT = "bisection"            # the report's document (as `redline bisect` stores it)
OPEN_STAGES = ("confirming", "bisecting", "checking")
CLOSED_STAGES = ("reported", "not reproduced", "failed")
PREFERRED_METRIC = "server_cpu_us_per_op"     # redline bisect's default: the least moved by a noisy neighbour
DEFAULT_MAX_CONCURRENT = 2
DEFAULT_MAX_STEPS = 24
MEASURES = ("auto", metrics.TIME, metrics.INSTRUCTIONS)     # --bisect-measure
DEFAULT_MEASURE = "auto"
COUNTED = "counted:"              # the key prefix of counted work in a bisection's pairs and answers
COUNTED_ENDPOINT_RUNS = 5         # runs per side of the counted confirmation at most (redline bisect's default)


class Pending(Exception):
    """The search asked for pairs (reference, candidate) not measured yet, or (counted) commits not
    counted yet."""

    def __init__(self, pairs: list[tuple[Commit, Commit]], rules: dict[str, StepRule] | None = None,
                 counts: list[CountAsk] | None = None):
        super().__init__(f"{len(pairs) + len(counts or [])} pairs or counts not measured yet")
        self.pairs, self.rules = pairs, rules or {}       # pair key → the step's rule (round steps)
        self.counts = counts or []                        # counted work (StoredCounts)


def pair_key(reference: Commit | str, candidate: Commit | str) -> str:
    sha = lambda c: c if isinstance(c, str) else c.sha     # noqa: E731
    return f"{sha(reference)}..{sha(candidate)}"


class StoredAnswers:
    """redline.bisect.search.Comparer over the answers stored so far: what is not measured yet is
    `Pending` (a round: every missing pair of it at once)."""

    def __init__(self, answers: dict[str, dict]):
        self.answers = answers

    def _answer(self, reference: Commit, candidate: Commit) -> Answer | None:
        stored = self.answers.get(pair_key(reference, candidate))
        if stored is None:
            return None
        if stored.get("unbuildable") is not None:
            return Answer(unbuildable=list(stored["unbuildable"]))
        return Answer({test: Change(**change) for test, change in stored["changes"].items()})

    def compare(self, reference: Commit, candidate: Commit, tests: list[str], settled: Settled, *,
                profile: bool = False) -> dict[str, Change]:
        answer = self._answer(reference, candidate)
        if answer is None:
            raise Pending([(reference, candidate)])
        if answer.unbuildable is not None:
            raise Unbuildable(candidate, answer.unbuildable)
        return {test: change for test, change in answer.changes.items() if test in tests}

    def measure(self, asks: list[Ask], tests: list[str]) -> list[Answer]:
        answers = [self._answer(ask.reference, ask.candidate) for ask in asks]
        missing = [ask for ask, answer in zip(asks, answers) if answer is None]
        if missing:
            raise Pending([(ask.reference, ask.candidate) for ask in missing],
                          {pair_key(ask.reference, ask.candidate): ask.settled for ask in missing
                           if isinstance(ask.settled, StepRule)})
        return answers


def answer_of(runs: list[Run], dead: list[tuple[str, str, str]], *, metric: str, runs_per_side: int,
              max_runs: int) -> dict:
    """A pair's stored answer from its work item: the change of `metric` per test, or — when a job
    of it died (a side does not build, its runs failed on every attempt) — why, as a skipped step."""
    if dead:
        return {"changes": {}, "unbuildable": [f"{job_id}: {' '.join((error or '').split())[:600]}"
                                               for job_id, _, error in dead]}
    changes = timed_changes(runs, metric, {}, confidence=looks_confidence(runs_per_side, max(runs_per_side, max_runs)))
    return {"changes": {test: asdict(change) for test, change in changes.items()}, "unbuildable": None}


# -- counted: the confirmation, the steps and the culprit's own change under callgrind --------------
@dataclass(frozen=True)
class CountAsk:
    """Counted work the search waits for: `commits` counted by `runs` runs each, as one work item —
    one commit alone (a step: one run), or two interleaved on one agent, the first as baseline (the
    confirmation: GOOD and BAD; a profiled own change: one run each)."""

    commits: tuple[Commit, ...]
    runs: int
    purpose: str                      # confirmation | step | own change
    profile: bool = False

    @property
    def key(self) -> str:
        return COUNTED + "..".join(c.sha for c in self.commits) + (":profile" if self.profile else "")


class StoredCounts:
    """redline.bisect.measure.CommitCounter over the counts stored so far, for the CountedComparer a
    replay builds: what is not counted yet is `Pending` (a round: every commit of it at once); a
    work item whose jobs died is a commit that does not build (a round's: its answer; else
    Unbuildable)."""

    def __init__(self, answers: dict[str, dict], good: Commit, bad: Commit):
        self.answers, self.ends = answers, (good.sha, bad.sha)

    def count(self, commits: list[Commit], tests: list[str], *, runs: int, profile: bool = False,
              apart: bool = False) -> Counted:
        if apart:
            asks = [CountAsk((commit,), runs, "step") for commit in commits]
        else:
            ends = tuple(c.sha for c in commits) == self.ends and not profile
            asks = [CountAsk(tuple(commits), runs, "confirmation" if ends else "own change", profile)]
        missing = [ask for ask in asks if ask.key not in self.answers]
        if missing:
            raise Pending([], counts=missing)
        counted = Counted()
        for ask in asks:
            answer = self.answers[ask.key]
            if answer.get("unbuildable") is not None:
                if not apart:
                    raise Unbuildable(ask.commits[-1], list(answer["unbuildable"]))
                counted.unbuildable[ask.commits[0].sha] = list(answer["unbuildable"])
                continue
            for sha, by_test in answer["counts"].items():
                for test, counts in by_test.items():
                    if test in tests:
                        counted.counts[(sha, test)] = [Count(**count) for count in counts]
            for sha, by_test in answer["failures"].items():
                counted.failures.update({(sha, test): why for test, why in by_test.items() if test in tests})
        return counted


def counted_answer_of(runs: list[Run], dead: list[tuple[str, str, str]], *, metric: str, reference: str | None,
                      candidate: str) -> dict:
    """A counted work item's stored answer: each commit's counts of `metric` per test (its baseline
    side is `reference`, its comparison or only side `candidate`), why runs failed, the request count
    per connection each test's runs sent (the confirmation's is carried to every later job of the
    test); or — when a job of it died — why, as a commit that does not build or count."""
    if dead:
        return {"counts": {}, "failures": {}, "requests": {},
                "unbuildable": [f"{job_id}: {' '.join((error or '').split())[:600]}" for job_id, _, error in dead]}
    sha_of = {"baseline": reference, "comparison": candidate, None: candidate}
    counts: dict[str, dict[str, list[dict]]] = {}
    failures: dict[str, dict[str, str]] = {}
    requests: dict[str, int] = {}
    for key, measured in measured_runs_by_test(runs).items():
        for run in measured:
            value = run.metrics.get(metric) if run.status == "ok" else None
            if value and sha_of.get(run.side):
                counts.setdefault(sha_of[run.side], {}).setdefault(key, []).append(
                    {"value": value, "run_id": run.run_id, "state": run.state})
                fixed = (run.facts.get("instructions") or {}).get("requests_per_connection")
                if fixed:
                    requests.setdefault(run.test, int(fixed))
        for side, sha in sha_of.items():
            failed = failed_runs_note([run for run in measured if run.side == side])
            if failed and sha:
                failures.setdefault(sha, {})[key] = failed
    return {"counts": counts, "failures": failures, "requests": requests, "unbuildable": None}


def timed_because(tests: list[list[str]], topologies: list[str]) -> str | None:
    """Why the followed tests are measured by time, in one line (None: every one can be counted):
    what callgrind does not see or cannot run for one of them (redline.analysis.gate.timed_reasons:
    pipelining, large values, io-threads, clusters, replicas, several clients, roles, waiting, a
    suite that asks for time), or a suite file the collector cannot read."""
    from redline.analysis.gate import timed_reasons
    from redline.topology import DEFAULT_TOPOLOGY, parse_topology
    resolver = JobResolver()
    for suite, name in tests:
        try:
            test = resolver.test(Job(suite=suite, test=name, sides=[]))
        except Exception as exc:        # noqa: BLE001 — a suite not readable here is measured as it always was
            return f"the suite file of {name} cannot be read here to tell whether counts see it ({exc})"
        for topology in topologies:
            reasons = timed_reasons(test, parse_topology(topology), [])
            if reasons:
                where = "" if topology == DEFAULT_TOPOLOGY else f"@{topology}"
                return f"counts cannot see {name}{where} ({reasons[0]})"
    return None


def measuring(measure: str, moved: Moved, tests: list[list[str]], topologies: list[str], settings: dict) -> dict:
    """How a bisection opened now measures (its state's fields): counted when `measure` allows it
    and every followed test can be counted, else timed; the timed metric is kept for a fall-back."""
    known = metrics.BY_NAME.get(moved.metric)
    counted_metric = moved.metric if known is not None and known.measure == metrics.INSTRUCTIONS else None
    timed_metric = PREFERRED_METRIC if counted_metric else moved.metric
    timed_settings = {**settings, "window_requests": {},
                      "measure": None if settings.get("measure") == metrics.INSTRUCTIONS else settings.get("measure")}
    fields = {"measure": metrics.TIME, "metric": timed_metric, "timed_metric": timed_metric, "settings": timed_settings,
              "timed_because": None}
    if measure == metrics.TIME:
        return fields
    why = timed_because(tests, topologies)
    if why is not None:
        return {**fields, "timed_because": why}
    counted_metric = counted_metric or DEFAULT_METRIC[metrics.INSTRUCTIONS]
    return {**fields, "measure": metrics.INSTRUCTIONS, "metric": counted_metric, "counted_metric": counted_metric,
            "endpoint_runs": max(COUNTED_MIN_RUNS, min(settings["runs"], COUNTED_ENDPOINT_RUNS)),
            "fall_back": measure == "auto"}


# -- what the coordinator needs of the fleet -----------------------------------------------------
class Fleet(Protocol):
    def submit(self, item: fleet_work.WorkItem) -> None:
        """Enqueue the work item unless Redis holds it already (same work id)."""

    def live_agents(self, platform: str) -> int:
        """Agents of the platform alive now."""

    def results(self, work_id: str) -> tuple[list[Run], list[tuple[str, str, str]]]:
        """The stored runs of a complete work item and its dead jobs (job id, platform, error)."""

    def mirror(self, state: dict) -> None:
        """The bisection's stage where `redline fleet status` reads it."""

    def publish(self, state: dict, markdown: str, *, again: bool) -> str | None:
        """The report as a comment (the comments stream; GitHub when the state names a pull request
        and a token is given); `again`: tried before, look for it first. Returns where it went."""


@dataclass
class Decision:
    """What `trigger` decided for a complete work item: the line for its comment (None: nothing to
    say) and the bisection it opened (None: none)."""

    line: str | None
    bisection: int | None = None


@dataclass
class Moved:
    metric: str
    tests: list[str]              # test keys
    platform: str


def moved_by(comparisons: list[TestComparison], platforms: list[str]) -> Moved | None:
    """The tests whose verdict on one metric survived false-discovery control as a regression or an
    improvement, on one platform: server CPU per op when it moved, else the first metric that did."""
    moved = [c for c in comparisons if c.verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT)]
    if not moved:
        return None
    metrics = [c.metric for c in moved]
    metric = PREFERRED_METRIC if PREFERRED_METRIC in metrics else metrics[0]
    found: dict[str, list[str]] = {}
    for c in moved:
        if c.metric != metric:
            continue
        key, _, platform = c.test.partition(" on ")         # collector.verdict_label with several platforms
        platform = platform or (platforms[0] if platforms else "")
        found.setdefault(platform, []).append(key)
    platform = sorted(found)[0]
    return Moved(metric, sorted(set(found[platform])), platform)


def git_range(baseline: str, comparison: str) -> tuple[str, str, str] | None:
    """(repository as the targets name it, GOOD, BAD) when both sides are git: targets of one
    repository. The collector walks its ancestry path there: it needs the repository at the path
    the agents see it (one machine, or the same path on the collector's)."""
    def split(spec: str):
        if not spec.startswith("git:") or "@" not in spec:
            return None
        repo, _, ref = spec[4:].rpartition("@")
        return (repo, ref) if repo and ref else None
    a, b = split(baseline), split(comparison)
    if a is None or b is None or a[0] != b[0]:
        return None
    return a[0], a[1], b[1]


class Loop:
    """The bisection coordinator over a store and a fleet (see the module docstring)."""

    def __init__(self, store: Store, fleet: Fleet, *, max_concurrent: int = DEFAULT_MAX_CONCURRENT,
                 max_steps: int = DEFAULT_MAX_STEPS, say: Callable[..., None] = lambda event, **fields: None,
                 path_of: Callable[[Path, str, str], tuple[Commit, list[Commit]]] | None = None,
                 measure: str = DEFAULT_MEASURE):
        if max_concurrent < 0:
            raise ValueError(f"max_concurrent must be 0 or more, got {max_concurrent}")
        if max_steps < 2:
            raise ValueError(f"max_steps must be at least 2 (the confirmation and one step), got {max_steps}")
        if measure not in MEASURES:
            raise ValueError(f"measure must be one of {', '.join(MEASURES)}, got {measure!r}")
        self.store, self.fleet, self.say = store, fleet, say
        self.max_concurrent, self.max_steps, self.measure = max_concurrent, max_steps, measure
        self.path_of = path_of or (lambda repo, good, bad: search.ancestry_path(repo, good, bad))

    # -- state ------------------------------------------------------------------------------
    def states(self) -> list[tuple[int, dict]]:
        return self.store.documents_named(STATE)

    def state(self, bisection: int) -> dict:
        state = self.store.session_document(bisection, STATE)
        if state is None:
            raise KeyError(f"no fleet bisection {bisection}")
        return state

    def _save(self, state: dict) -> None:
        state["updated_at"] = time.time()
        self.store.save_session_document(state["bisection"], STATE, state)
        self.fleet.mirror(state)

    def of_work(self, work_id: str) -> int | None:
        """The bisection opened by the work item `work_id`."""
        return next((bisection for bisection, state in self.states() if state["work_id"] == work_id), None)

    # -- opening ----------------------------------------------------------------------------
    def trigger(self, work: "WorkLike", comparisons: list[TestComparison], records: list[Run]) -> Decision:
        """A complete work item: open a bisection when a push's or pull request's change moved a test
        and it names a git range; idempotent (the same work item again: the same bisection)."""
        if work.source not in ("push", "pull_request"):
            return Decision(None)
        moved = moved_by(comparisons, work.platforms)
        if moved is None:
            return Decision(None)
        known = self.of_work(work.work_id)
        if known is not None:
            return Decision(self._opened_line(known), known)
        if self.max_concurrent == 0:
            return Decision("Not bisected: the collector's loop is off (--bisect-max-concurrent 0).")
        found = git_range(work.baseline, work.comparison)
        if found is None:
            return Decision("Not bisected: the two sides are not git commits of one repository.")
        repo, good_ref, bad_ref = found
        running = [s for _, s in self.states() if s["repository"] == repo and s["stage"] in OPEN_STAGES]
        if len(running) >= self.max_concurrent:
            self.say("bisection not opened", work=work.work_id, reason="cap", running=len(running))
            return Decision(f"Not bisected: {len(running)} bisections of this repository are running already "
                            f"(the cap, --bisect-max-concurrent, is {self.max_concurrent}).")
        try:
            good, path = self.path_of(Path(repo).expanduser(), good_ref, bad_ref)
        except UsageError as exc:
            self.say("bisection not opened", work=work.work_id, reason=str(exc))
            return Decision(f"Not bisected: {exc}.")
        suites = {run.key: (fleet_work.suite_of(run), run.topology) for run in records if run.suite_file}
        tests = [[suites[key][0], key.split("@", 1)[0]] for key in moved.tests if key in suites]
        if not tests:
            return Decision("Not bisected: the stored runs of the moved tests do not name their suite files.")
        topologies = sorted({suites[key][1] for key in moved.tests if key in suites}) or ["oss-standalone"]
        sides = {side.name: side for side in work.sides}
        per_round = max(1, self.fleet.live_agents(moved.platform))
        bisection = self.store.begin_session(kind="bisect", argv=["fleet", "bisect", work.work_id],
                                             machine=machine.facts())
        state = {
            "format": 1, "bisection": bisection, "work_id": work.work_id, "repository": repo,
            "github": work.github, "platform": moved.platform, "metric": moved.metric, "keys": moved.tests,
            "tests": tests, "topologies": topologies, "per_round": per_round,
            "sides": {name: side.to_json() for name, side in sides.items()},
            "settings": dict(work.settings) or {"runs": work.runs, "max_runs": work.max_runs},
            "good": asdict(good), "path": [asdict(c) for c in path], "good_ref": good_ref, "bad_ref": bad_ref,
            "max_steps": self.max_steps, "stage": "confirming", "round": 0,
            "rounds": rounds_needed(len(path) - 1, per_round), "pairs": {}, "answers": {}, "note": None,
            "culprit": None, "comment": None, "published": None, "publish_attempts": 0,
            "started_at": time.time(),
        }
        state.update(measuring(self.measure, moved, tests, topologies, state["settings"]))   # counted or timed
        self.store.save_session_document(bisection, DOCUMENT, self._context(state))
        self._save(state)
        self.say("bisection opened", bisection=bisection, work=work.work_id, platform=moved.platform,
                 per_round=per_round, commits=len(path), tests=",".join(moved.tests), metric=state["metric"])
        return Decision(self._opened_line(bisection), bisection)

    @staticmethod
    def _opened_line(bisection: int) -> str:
        return (f"A change moved: the fleet confirms it and bisects the range (fleet bisection {bisection}, its "
                f"stage in `redline fleet status`); the culprit comes as a comment marked "
                f"`redline bisection {bisection}`.")

    @staticmethod
    def _context(state: dict) -> dict:
        """What the report needs besides the outcome (as redline bisect's)."""
        variant = (state["sides"].get("comparison") or {}).get("variant")
        return {"repository": state["repository"], "metric": state["metric"], "variant": variant or "default",
                "tests": state["keys"], "selection": ["--name", "|".join(f"^{key}$" for key in state["keys"])],
                "store": "", "all_parents": False, "good_ref": state["good_ref"], "bad_ref": state["bad_ref"],
                "measure": state.get("measure"), "fleet": {"work_id": state["work_id"], "platform": state["platform"],
                                           "per_round": state["per_round"]},
                "session": state["bisection"]}

    # -- advancing --------------------------------------------------------------------------
    def work_complete(self, work: "WorkLike") -> None:
        """A complete work item: a pair's answer recorded (once) and its bisection advanced, or the
        bisection a moved work item opened started."""
        if work.bisection:
            bisection = int(work.bisection)
            state = self.state(bisection)
            key = next((k for k, pair in state["pairs"].items() if pair["work_id"] == work.work_id), None)
            if key is None:
                self.say("work item of a bisection it did not ask for, ignored", work=work.work_id, bisection=bisection)
                return
            if key not in state["answers"]:
                runs, dead = self.fleet.results(work.work_id)
                settings, pair = state["settings"], state["pairs"][key]
                state["answers"][key] = (
                    counted_answer_of(runs, dead, metric=state["counted_metric"], reference=pair["reference"],
                                      candidate=pair["candidate"]) if key.startswith(COUNTED) else
                    answer_of(runs, dead, metric=state["metric"], runs_per_side=settings["runs"],
                              max_runs=settings["max_runs"]))
                state["pairs"][key]["state"] = "failed" if dead else "done"
                self._save(state)
            self.advance(bisection)
            return
        opened = self.of_work(work.work_id)
        if opened is not None:
            self.advance(opened)

    def advance(self, bisection: int) -> None:
        """Replay the search over the stored answers: queue what it asks next, or end it."""
        state = self.state(bisection)
        if state["stage"] in CLOSED_STAGES:
            return self._publish(state)
        good, path = Commit(**state["good"]), [Commit(**c) for c in state["path"]]
        so_far: list[Outcome] = []
        counted = state.get("measure") == metrics.INSTRUCTIONS
        comparer = StoredAnswers(state["answers"]) if not counted else CountedComparer(
            StoredCounts(state["answers"], good, path[-1]), metric=state["metric"], endpoint_runs=state["endpoint_runs"])
        try:
            outcome = search.bisect(comparer, good, path, state["keys"], per_round=state["per_round"],
                                    on_step=so_far.append)
        except Pending as pending:
            self._document(state, so_far[-1] if so_far else None)
            if pending.counts:
                return self._queue_counted(state, pending.counts, so_far[-1] if so_far else None)
            return self._queue(state, pending.pairs, so_far[-1] if so_far else None, pending.rules)
        except Unbuildable as failure:
            tail = " ".join(failure.tail[-1:])[:300]
            if counted and not so_far and state.get("fall_back"):
                return self._fall_back(state, f"the counted confirmation did not count "
                                              f"({failure.commit.short}: {tail})")
            return self._end(state, "failed", f"an end of the range does not build or measure "
                                              f"({failure.commit.short}: {tail}); nothing to bisect", None)
        self._document(state, outcome)
        if not outcome.endpoints.moved and counted:
            if state.get("fall_back"):
                return self._fall_back(state, unseen(state["metric"], outcome))
            return self._end(state, "not reproduced", f"{unseen(state['metric'], outcome)}; not bisected "
                                                      "(--bisect-measure instructions)", outcome)
        if not outcome.endpoints.moved:
            verdicts = "; ".join(f"{test} {c.verdict}" for test, c in outcome.endpoints.changes.items()) or "no runs"
            return self._end(state, "not reproduced", f"the confirmation did not see the change again "
                                                      f"({state['metric']}: {verdicts}); not bisected", outcome)
        state["culprit"] = asdict(outcome.culprit) if outcome.culprit else None
        self._end(state, "reported", None, outcome)

    def _document(self, state: dict, outcome: Outcome | None) -> None:
        if outcome is not None:
            self.store.save_session_document(state["bisection"], DOCUMENT, {**self._context(state),
                                                                            **outcome.as_json()})

    def _queue(self, state: dict, pairs: list[tuple[Commit, Commit]], outcome: Outcome | None,
               rules: dict[str, StepRule]) -> None:
        good, bad = state["good"]["sha"], state["path"][-1]["sha"]
        new = [(r, c) for r, c in pairs if pair_key(r, c) not in state["pairs"]]
        if len(state["pairs"]) + len(new) > state["max_steps"]:
            return self._end(state, "failed", f"the step cap (--bisect-max-steps {state['max_steps']}) is reached "
                                              f"with {len(state['pairs'])} pairs measured; no culprit named", outcome)
        confirming = any(pair_key(r, c) == pair_key(good, bad) for r, c in pairs)
        state["stage"] = "confirming" if confirming else ("checking" if self._checking(outcome, pairs) else "bisecting")
        purpose = {"confirming": "confirmation", "checking": "own change", "bisecting": "step"}[state["stage"]]
        for reference, candidate in new:
            state["pairs"][pair_key(reference, candidate)] = {
                "work_id": fleet_work.new_work_id(), "reference": reference.sha, "candidate": candidate.sha,
                "state": "queued", "round": outcome.rounds if outcome else 0, "purpose": purpose,
                "step_rule": ({**rules[key].as_json(), "metric": state["metric"]}
                              if (key := pair_key(reference, candidate)) in rules else None)}
        state["round"] = outcome.rounds if outcome else 0
        state["rounds"] = max(state["round"], rounds_needed(len(state["path"]) - 1, state["per_round"]))
        self._save(state)            # the work ids are recorded before anything is enqueued
        for key in [pair_key(r, c) for r, c in pairs]:
            pair = state["pairs"][key]
            if pair["state"] == "queued":
                self.fleet.submit(self._work_item(state, pair))
        self.say("bisection waits", bisection=state["bisection"], stage=state["stage"], round=state["round"],
                 pairs=",".join(state["pairs"][pair_key(r, c)]["work_id"] for r, c in pairs))

    @staticmethod
    def _checking(outcome: Outcome | None, pairs: list[tuple[Commit, Commit]]) -> bool:
        """The search has ended its rounds and asks for the culprit's own change (the commit before
        it against it)."""
        if outcome is None or not outcome.steps:
            return False
        measured = {s.candidate.sha for s in outcome.steps}
        return all(candidate.sha in measured for _, candidate in pairs)

    def _queue_counted(self, state: dict, asks: list[CountAsk], outcome: Outcome | None) -> None:
        """Counted work as _queue does pairs: each ask a work item (recorded before it is enqueued,
        under its own key; one already recorded is enqueued again under its work id)."""
        new = [ask for ask in asks if ask.key not in state["pairs"]]
        if len(state["pairs"]) + len(new) > state["max_steps"]:
            return self._end(state, "failed", f"the step cap (--bisect-max-steps {state['max_steps']}) is reached "
                                              f"with {len(state['pairs'])} pairs measured; no culprit named", outcome)
        state["stage"] = {"confirmation": "confirming", "step": "bisecting", "own change": "checking"}[asks[0].purpose]
        for ask in new:
            state["pairs"][ask.key] = {
                "work_id": fleet_work.new_work_id(), "reference": ask.commits[0].sha if len(ask.commits) == 2 else None,
                "candidate": ask.commits[-1].sha, "state": "queued", "round": outcome.rounds if outcome else 0,
                "purpose": ask.purpose, "step_rule": None, "measure": metrics.INSTRUCTIONS, "runs": ask.runs,
                "profile": ask.profile}
        state["round"] = outcome.rounds if outcome else 0
        state["rounds"] = max(state["round"], rounds_needed(len(state["path"]) - 1, state["per_round"]))
        self._save(state)            # the work ids are recorded before anything is enqueued
        for ask in asks:
            pair = state["pairs"][ask.key]
            if pair["state"] == "queued":
                self.fleet.submit(self._counted_work_item(state, pair))
        self.say("bisection waits", bisection=state["bisection"], stage=state["stage"], round=state["round"],
                 counted=",".join(state["pairs"][ask.key]["work_id"] for ask in asks))

    def _counted_work_item(self, state: dict, pair: dict) -> fleet_work.WorkItem:
        """A counted work item: the reference and the candidate interleaved (the confirmation), or the
        candidate alone (a step), under callgrind, `runs` runs each; every job but the
        confirmation's sends the confirmation's request count per connection."""
        repository, sides = state["repository"], state["sides"]

        def side(name: str, sha: str, as_name: str | None) -> SideSpec:
            spec = SideSpec.from_json(sides.get(name) or {"name": name, "target": ""})
            return SideSpec(as_name, f"git:{repository}@{sha}", spec.config, spec.variant)
        confirmation = CountAsk((Commit(state["good"]["sha"]), Commit(state["path"][-1]["sha"])),
                                state["endpoint_runs"], "confirmation").key
        fixed = {} if pair["purpose"] == "confirmation" else dict((state["answers"].get(confirmation) or {}).get(
            "requests") or {})
        two = pair["reference"] is not None
        return fleet_work.WorkItem(
            work_id=pair["work_id"], source="bisect",
            sides=([side("baseline", pair["reference"], "baseline"),
                    side("comparison", pair["candidate"], "comparison")] if two else
                   [side("comparison", pair["candidate"], None)]),
            platforms=[state["platform"]], tests=[tuple(t) for t in state["tests"]], topologies=state["topologies"],
            settings=fleet_work.Settings(**{**state["settings"], "runs": pair["runs"], "max_runs": pair["runs"],
                                            "profile": pair["profile"], "measure": metrics.INSTRUCTIONS,
                                            "window_requests": fixed}),
            bisection=str(state["bisection"]))

    def _fall_back(self, state: dict, why: str) -> None:
        """The counted confirmation did not see the change (or could not count it): the bisection
        goes on timed, from its confirmation, as if it had opened so; the comment says why."""
        state.update(measure=metrics.TIME, metric=state["timed_metric"], timed_because=why)
        self.store.save_session_document(state["bisection"], DOCUMENT, self._context(state))
        self._save(state)
        self.say("bisection measured by time", bisection=state["bisection"], why=why)
        self.advance(state["bisection"])

    def _work_item(self, state: dict, pair: dict) -> fleet_work.WorkItem:
        repository, sides = state["repository"], state["sides"]

        def side(name: str, sha: str) -> SideSpec:
            spec = SideSpec.from_json(sides.get(name) or {"name": name, "target": ""})
            return SideSpec(name, f"git:{repository}@{sha}", spec.config, spec.variant)
        return fleet_work.WorkItem(
            work_id=pair["work_id"], source="bisect",
            sides=[side("baseline", pair["reference"]), side("comparison", pair["candidate"])],
            platforms=[state["platform"]], tests=[tuple(t) for t in state["tests"]], topologies=state["topologies"],
            settings=fleet_work.Settings(**state["settings"]), bisection=str(state["bisection"]),
            step_rule=pair.get("step_rule"))

    def _end(self, state: dict, stage: str, note: str | None, outcome: Outcome | None) -> None:
        state["stage"], state["note"] = stage, note
        state["comment"] = self._comment(state, outcome)
        self._save(state)
        self.store.finish_session(state["bisection"], "finished" if stage == "reported" else "failed")
        self.say("bisection ended", bisection=state["bisection"], stage=stage,
                 culprit=(state["culprit"] or {}).get("sha"), note=note)
        self._publish(state)

    def _comment(self, state: dict, outcome: Outcome | None) -> str:
        head = (f"### redline: fleet bisection {state['bisection']} of work item `{state['work_id']}`\n\n"
                f"{len(state['path'])} commits after `{state['good']['sha'][:12]}`, on platform "
                f"`{state['platform']}`, {state['per_round']} commit(s) per round, "
                f"{len(state['pairs'])} work items measured on the fleet.\n\n") + measured_line(state)
        if state["stage"] != "reported" or outcome is None:
            body = f"**Not bisected:** {state['note']}\n"
        else:
            body = report_markdown({**self._context(state), **outcome.as_json()})
        return head + body + f"\n{marker(state['bisection'])}\n"

    def _publish(self, state: dict) -> None:
        """The report's comment, once: attempts are counted (and saved) before each try; a try that
        may have happened is looked for first."""
        if state.get("published") or not state.get("comment"):
            return
        again = state["publish_attempts"] > 0
        state["publish_attempts"] += 1
        self._save(state)
        state["published"] = self.fleet.publish(state, state["comment"], again=again) or "comments"
        self._save(state)


def unseen(metric: str, outcome: Outcome) -> str:
    """Why a counted confirmation leaves the change to time, in one line."""
    endpoints = outcome.endpoints
    if endpoints.too_close:
        return "the counted confirmation saw it move too little to follow by one counted run per commit (" + \
            "; ".join(f"{test}: {why}" for test, why in endpoints.too_close.items()) + ")"
    verdicts = "; ".join(f"{test} {c.verdict}" + (f" {c.delta_pct:+.1f}%" if c.delta_pct is not None else "")
                         for test, c in endpoints.changes.items()) or "no runs"
    unmoved = endpoints.changes and all(c.verdict == Verdict.NO_CHANGE for c in endpoints.changes.values())
    return (f"the counted confirmation did not see the change ({metric}: {verdicts})"
            + (": it lives where counts do not look (system calls, waiting, memory latency)" if unmoved else ""))


def measured_line(state: dict) -> str:
    """The comment's line on why a bisection that could have been counted was timed (a counted
    one is said by the report itself)."""
    if state.get("measure") != metrics.INSTRUCTIONS and state.get("timed_because"):
        return f"Measured by time: {' '.join(state['timed_because'].split())}.\n\n"
    return ""


def marker(bisection: int) -> str:
    """The invisible line that identifies a bisection's comment."""
    return f"<!-- redline bisection {bisection} -->"


class WorkLike(Protocol):
    work_id: str
    source: str
    baseline: str
    comparison: str
    github: str
    runs: int
    max_runs: int
    sides: list[SideSpec]
    settings: dict
    bisection: str
    platforms: list[str]
