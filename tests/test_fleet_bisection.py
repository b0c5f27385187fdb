"""The closed loop's coordinator (redline/fleet/bisection.py) on in-process fakes: a fake fleet whose
"agents" answer each queued work item with runs made from a model of the repository (the metric's
value at each commit; under callgrind, its count), a real SQLite store. What is tested is the real
coordinator — the trigger on real verdicts, work items through the work hash's own check
(entries.work_summary), the search replayed over stored answers (timed pairs, or counts through the
real CountedComparer), the store as the only state — not timing."""

from __future__ import annotations

import hashlib
import json

import pytest

from redline.analysis.comparison import FDR_Q, apply_false_discovery_control, compare_test
from redline.bisect.search import Commit
from redline.core.errors import UsageError
from redline.core.run import Run
from redline.engine.job import SideSpec
from redline.fleet import admission, bisection, branch_history, entries, work
from redline.output.markdown_text import literal
from redline.store.fleet_ledger import Ledger
from redline.store.results import Store
from redline.suites.discovery import builtin_suites_dir

REPO = "/srv/fixture"
TEST, OTHER = "quick-string-get-100B-pipeline-10", "quick-string-set-100B-pipeline-10"
SUITE = "/srv/suites/quick/string.yml"
METRIC = "server_cpu_us_per_op"
COUNTED_METRIC = "instructions_per_op"
# tests counts can see (pipeline 1), from redline's built-in suites: the loop reads them to decide
GET1, SET1 = "quick-string-get-100B-pipeline-1", "quick-string-set-100B-pipeline-1"
GET10 = "quick-string-get-100B-pipeline-10"
BUILTIN = {name: str(builtin_suites_dir() / "quick" / f"{name.removeprefix('quick-')}.yml")
           for name in (GET1, SET1, GET10)}
REQUESTS = 1234             # the request count per connection the counted "runner" chooses


def commits(n: int) -> list[Commit]:
    return [Commit(hashlib.sha1(str(i).encode()).hexdigest(), f"commit {i}", "2026-11-25T00:00:00Z")
            for i in range(n + 1)]


class Model:
    """The repository: commit 0 is GOOD, 1..n the path; the metric of `test` (TEST) multiplied by
    `steps` (commit index → factor) from that commit on, its count under callgrind by `counted`
    (default: the same steps); the other tests never move."""

    def __init__(self, n: int, steps: dict[int, float], unbuildable: set[int] = frozenset(), *, test: str = TEST,
                 counted: dict[int, float] | None = None, suites: dict[str, str] | None = None):
        self.commits, self.steps, self.unbuildable = commits(n), steps, set(unbuildable)
        self.test, self.counted = test, steps if counted is None else counted
        self.suites = suites or {}            # test → its suite file (default SUITE)
        self.index = {c.sha: i for i, c in enumerate(self.commits)}

    def value(self, sha: str, test: str, steps: dict[int, float] | None = None) -> float:
        value = 10.0
        if test == self.test:
            for at, factor in (self.steps if steps is None else steps).items():
                if self.index[sha] >= at:
                    value *= factor
        return value

    def runs(self, baseline: str, comparison: str, tests: list[str], per_side: int = 5) -> list[Run]:
        out = []
        for test in tests:
            for index in range(per_side):
                for side, sha in (("baseline", baseline), ("comparison", comparison)):
                    noise = int(hashlib.sha1(f"{sha}{test}{side}{index}".encode()).hexdigest()[:4], 16) / 65535
                    out.append(Run(test=test, target=f"git:{REPO}@{sha}", side=side, run_index=index, status="ok",
                                   suite_file=self.suites.get(test, SUITE),
                                   metrics={METRIC: self.value(sha, test) * (0.99 + 0.02 * noise),
                                            "ops_per_sec": 1000.0}))
        return out

    def counted_runs(self, item: work.WorkItem) -> list[Run]:
        """A counted work item's runs as an agent under callgrind gives them: each job's sides (one
        or two) by its runs, the count within ±0.05%, the request count per connection the job was
        given (else the runner's own choice)."""
        out = []
        for _, job in item.job_documents():
            requests = job["settings"].get("window_requests") or REQUESTS
            for index in range(job["settings"]["runs"]):
                for side in job["sides"]:
                    sha = side["target"].rsplit("@", 1)[1]
                    noise = int(hashlib.sha1(f"{sha}{job['test']}{side['name']}{index}".encode()).hexdigest()[:4],
                                16) / 65535
                    out.append(Run(test=job["test"], target=side["target"], side=side["name"], run_index=index,
                                   status="ok", suite_file=self.suites.get(job["test"], SUITE),
                                   metrics={COUNTED_METRIC: 250 * self.value(sha, job["test"], self.counted)
                                            * (0.9995 + 0.001 * noise)},
                                   facts={"instructions": {"requests_per_connection": requests}}))
        return out


class FakeFleet:
    """redline.fleet.bisection.Fleet: work items kept in a dict (as Redis keeps their hashes), each
    answered from the model when an agent "takes" it. With `profiles` (a Profiles), a profiled work
    item's answer also holds a profiled run per test and side, through the fleet's real path."""

    def __init__(self, model: Model, agents: int = 1, profiles: "Profiles | None" = None, *,
                 counts_die: bool = False):
        self.model, self.agents, self.profiles, self.counts_die = model, agents, profiles, counts_die
        self.items: dict[str, work.WorkItem] = {}
        self.submitted: list[str] = []
        self.complete: list[str] = []
        self.mirrored: list[dict] = []
        self.comments: list[tuple[str, bool]] = []
        self.submits = 0
        self.seconds_per_item = 60.0        # what agents spent on each work item (the agent-time budget)

    def submit(self, item: work.WorkItem) -> None:
        self.submits += 1
        if item.work_id not in self.items:
            self.items[item.work_id] = item
            self.submitted.append(item.work_id)

    def live_agents(self, platform: str) -> int:
        return self.agents

    def agent_seconds(self, work_id: str) -> float:
        return self.seconds_per_item

    def results(self, work_id: str):
        item = self.items[work_id]
        shas = [side.target.rsplit("@", 1)[1] for side in item.sides]
        broken = [sha for sha in shas if self.model.index[sha] in self.model.unbuildable]
        if broken:
            return [], [(f"{work_id}:p:1", "p", f"build of {broken[0][:12]} failed: #error fixture")]
        tests = [name for _, name in item.tests]
        if item.settings.measure == "instructions":
            if self.counts_die:
                return [], [(f"{work_id}:p:1", "p", "valgrind: not found (install valgrind)")]
            runs = self.model.counted_runs(item)
        else:
            runs = self.model.runs(shas[0], shas[1], tests)
        if item.settings.profile and self.profiles is not None:
            runs += self.profiles.runs(self.model, shas, tests)
        return runs, []

    def mirror(self, state: dict) -> None:
        self.mirrored.append({k: state.get(k) for k in ("bisection", "stage", "round", "rounds", "position",
                                                        "queue_length", "frees_at")})

    def publish(self, state: dict, markdown: str, *, again: bool) -> str | None:
        self.comments.append((markdown, again))
        return "comments"

    def waiting(self) -> list[str]:
        return [w for w in self.submitted if w not in self.complete]


def summary_of(item: work.WorkItem) -> entries.WorkSummary:
    """The work hash as the collector reads it: written by WorkItem.summary, checked by entries."""
    return entries.work_summary(item.summary(len(item.job_documents())), item.work_id)


def source_work(model: Model, *, moved: bool = True, tests: tuple[str, str] = (TEST, OTHER),
                runs: int = 5) -> tuple[entries.WorkSummary, list, list[Run]]:
    """A push work item GOOD → BAD with its verdicts (real compare + FDR on model runs)."""
    good, bad = model.commits[0].sha, model.commits[-1].sha
    item = work.WorkItem(work_id=work.new_work_id(), source="push",
                         sides=[SideSpec("baseline", f"git:{REPO}@{good}", (), "libc-malloc"),
                                SideSpec("comparison", f"git:{REPO}@{bad}", (), "libc-malloc")],
                         platforms=["p"], tests=[(model.suites.get(test, SUITE), test) for test in tests],
                         topologies=["oss-standalone"],
                         settings=work.Settings(runs=runs, max_runs=max(runs, 5), duration_s=1.0, warmup_s=0.0))
    records = model.runs(good, bad if moved else good, list(tests))
    comparisons = [c for test in tests for c in compare_test(test, [r for r in records if r.test == test], {})]
    apply_false_discovery_control(comparisons, q=FDR_Q)
    return summary_of(item), comparisons, records


def make_loop(store: Store, fleet: FakeFleet, **kwargs) -> bisection.Loop:
    model = fleet.model
    return bisection.Loop(store, fleet, path_of=lambda repo, good, bad: (model.commits[0], model.commits[1:]),
                          **kwargs)


def restarted_after_losing(tmp_path, store: Store, fleet: FakeFleet, lost: str, bisection_id: int) -> bisection.Loop:
    """Redis lost the queued work item `lost`, and the collector restarts: a new store handle and
    coordinator over the same file, which advances the bisection; the new coordinator."""
    del fleet.items[lost]
    fleet.submitted.remove(lost)
    store.close()
    store2 = Store(tmp_path / "fleet.db")
    loop2 = make_loop(store2, fleet)
    loop2.advance(bisection_id)
    return loop2


def drain(loop: bisection.Loop, fleet: FakeFleet, *, reverse: bool = False, limit: int = 100) -> None:
    """The agents take every queued work item (a round's in any order) until none is left."""
    for _ in range(limit):
        waiting = fleet.waiting()
        if not waiting:
            return
        for work_id in (reversed(waiting) if reverse else waiting):
            fleet.complete.append(work_id)
            loop.work_complete(summary_of(fleet.items[work_id]))
    raise AssertionError("the bisection never ended")


def run_loop(tmp_path, model: Model, agents: int = 1, *, tests: tuple[str, str] = (TEST, OTHER),
             counts_die: bool = False, **kwargs):
    store, fleet = Store(tmp_path / "fleet.db"), FakeFleet(model, agents, counts_die=counts_die)
    loop = make_loop(store, fleet, **kwargs)
    summary, comparisons, records = source_work(model, tests=tests)
    decision = loop.trigger(summary, comparisons, records)
    assert decision.bisection is not None, decision.line
    loop.work_complete(summary)              # the effect after the work item's own comment
    drain(loop, fleet)
    return store, fleet, loop, loop.state(decision.bisection), decision


def rounds_of(state: dict) -> dict[int, int]:
    """Round → how many commits it queued (round 0: the confirmation; the culprit's own change is
    not a round's)."""
    counted: dict[int, int] = {}
    for pair in state["pairs"].values():
        if pair["purpose"] != "own change":
            counted[pair["round"]] = counted.get(pair["round"], 0) + 1
    return counted


@pytest.mark.parametrize("agents", [1, 2, 3])
def test_one_step_is_found_with_k_commits_per_round(tmp_path, agents):
    model = Model(16, {12: 5.0})
    store, fleet, loop, state, decision = run_loop(tmp_path, model, agents)
    assert state["stage"] == "reported" and state["per_round"] == agents
    assert state["culprit"]["sha"] == model.commits[12].sha
    document = store.session_document(state["bisection"], "bisection")
    assert document["culprit"]["sha"] == model.commits[12].sha and document["per_round"] == agents
    assert list(document["endpoints"]["moved"]) == [TEST]          # OTHER did not move and is not followed
    # each round asked for at most k commits, and k of them while the range allowed
    per_round = rounds_of(state)
    assert per_round[0] == 1                                        # the confirmation
    steps = {r: n for r, n in per_round.items() if r > 0}
    assert max(steps.values()) <= agents and steps[1] == agents
    # k + 1 parts a round: more agents, no more rounds
    assert len(steps) <= {1: 5, 2: 3, 3: 2}[agents] + 1
    markdown, again = fleet.comments[-1]
    assert not again and f"culprit: {model.commits[12].sha[:12]}" in markdown
    assert bisection.marker(state["bisection"]) in markdown and len(fleet.comments) == 1
    assert fleet.mirrored[0]["stage"] == "confirming" and fleet.mirrored[-1]["stage"] == "reported"


@pytest.mark.parametrize("agents", [1, 2])
def test_two_steps_of_unequal_size_name_the_larger_and_say_where_the_rest_lies(tmp_path, agents):
    model = Model(16, {5: 1.5, 12: 3.0})
    store, fleet, loop, state, _ = run_loop(tmp_path, model, agents)
    assert state["culprit"]["sha"] == model.commits[12].sha
    document = store.session_document(state["bisection"], "bisection")
    share = document["remainder"]["explained"][TEST]
    assert 0.6 < share < 0.85 and document["remainder"]["large"]       # log 3 / log 4.5 = 0.73
    markdown = fleet.comments[-1][0]
    assert "73%" in markdown or "72%" in markdown or "74%" in markdown, markdown


def test_three_steps_of_unequal_size_with_places_against_both_ends(tmp_path):
    """Three steps; with k = 3, commits of one round are measured against GOOD and against BAD
    (the nearer end): every place is taken on the whole change, and the commit across the middle is
    named with its own share."""
    model = Model(15, {3: 1.3, 9: 2.0, 14: 1.6})
    store, fleet, loop, state, _ = run_loop(tmp_path, model, 3)
    document = store.session_document(state["bisection"], "bisection")
    assert state["culprit"]["sha"] == model.commits[9].sha, document["steps"]
    references = {step["reference_state"] for step in document["steps"] if step["reference"]}
    assert references == {"good", "bad"}
    share = document["remainder"]["explained"][TEST]
    assert 0.4 < share < 0.6                                             # log 2 / log 4.16 = 0.49


def test_an_unbuildable_commit_is_a_skipped_step_not_a_retry(tmp_path):
    model = Model(16, {12: 5.0}, unbuildable={8})
    store, fleet, loop, state, _ = run_loop(tmp_path, model, 1)
    document = store.session_document(state["bisection"], "bisection")
    skipped = [s for s in document["steps"] if s["outcome"] == "skipped"]
    assert [s["candidate"]["sha"] for s in skipped] == [model.commits[8].sha]
    assert "#error fixture" in skipped[0]["note"]
    assert state["culprit"]["sha"] == model.commits[12].sha
    pairs_with_8 = [p for p in state["pairs"].values() if p["candidate"] == model.commits[8].sha]
    assert len(pairs_with_8) == 1 and pairs_with_8[0]["state"] == "failed"       # asked once, never again


def test_an_end_that_does_not_build_ends_with_one_line(tmp_path):
    model = Model(6, {3: 5.0}, unbuildable={6})
    store, fleet, loop, state, _ = run_loop(tmp_path, model, 2)
    assert state["stage"] == "failed" and len(state["pairs"]) == 1         # the confirmation only
    assert "does not build" in state["note"] and len(fleet.comments) == 1
    assert state["note"] in fleet.comments[0][0] and "\n" not in state["note"]


def test_a_change_the_confirmation_does_not_see_again_is_not_bisected(tmp_path):
    model = Model(8, {})                          # the repository has no change ...
    store, fleet = Store(tmp_path / "fleet.db"), FakeFleet(model, 2)
    loop = make_loop(store, fleet)
    summary, comparisons, records = source_work(Model(8, {4: 5.0}))      # ... the work item said it had
    # the work item's commits are the model's (same shas): only the measured values differ
    decision = loop.trigger(summary, comparisons, records)
    loop.work_complete(summary)
    drain(loop, fleet)
    state = loop.state(decision.bisection)
    assert state["stage"] == "not reproduced" and len(state["pairs"]) == 1
    assert "did not see the change again" in fleet.comments[0][0]


def test_every_answer_counts_once_and_a_restarted_coordinator_goes_on(tmp_path):
    """A work item complete twice (a side effect replayed after a collector restart) changes nothing;
    a new Loop over the same store (the collector restarted) goes on from the stored state; a work
    id recorded but not enqueued (killed in between) is enqueued again under the same id."""
    model = Model(16, {12: 5.0})
    store, fleet = Store(tmp_path / "fleet.db"), FakeFleet(model, 2)
    loop = make_loop(store, fleet)
    summary, comparisons, records = source_work(model)
    decision = loop.trigger(summary, comparisons, records)
    assert loop.trigger(summary, comparisons, records).bisection == decision.bisection     # idempotent
    loop.work_complete(summary)
    loop.work_complete(summary)
    assert len(fleet.submitted) == 1
    confirmation = fleet.submitted[0]
    fleet.complete.append(confirmation)
    loop.work_complete(summary_of(fleet.items[confirmation]))
    first_round = fleet.waiting()
    assert len(first_round) == 2
    loop.work_complete(summary_of(fleet.items[confirmation]))          # again: nothing new
    assert fleet.waiting() == first_round
    # the collector restarts: a new store handle and coordinator; Redis lost one queued work item
    lost = first_round[0]
    loop2 = restarted_after_losing(tmp_path, store, fleet, lost, decision.bisection)
    assert lost in fleet.items                                           # the same work id again
    drain(loop2, fleet, reverse=True)
    state = loop2.state(decision.bisection)
    assert state["culprit"]["sha"] == model.commits[12].sha
    assert len({p["work_id"] for p in state["pairs"].values()}) == len(state["pairs"]) == len(state["answers"])
    assert len(fleet.comments) == 1


def test_caps_on_concurrent_bisections_and_on_steps(tmp_path):
    model = Model(16, {12: 5.0})
    store, fleet = Store(tmp_path / "fleet.db"), FakeFleet(model, 1)
    loop = make_loop(store, fleet, max_concurrent=1, max_steps=3, max_queued=0)
    first = loop.trigger(*source_work(model))
    second = loop.trigger(*source_work(model))
    assert first.bisection is not None and second.bisection is None          # no queue: refused
    assert "1 bisections of this repository are open" in second.line and "--bisect-max-queued" in second.line
    assert "\n" not in second.line and len(loop.states()) == 1
    assert fleet.submitted == []
    loop.advance(first.bisection)
    drain(loop, fleet)
    state = loop.state(first.bisection)
    assert state["stage"] == "failed" and "step cap" in state["note"] and len(state["pairs"]) == 3
    # the first one ended: a new change may be bisected
    assert loop.trigger(*source_work(model)).bisection is not None
    with pytest.raises(ValueError):
        bisection.Loop(store, fleet, max_steps=1)


def max_open_at_once(fleet: FakeFleet) -> int:
    """The most bisections in a slot-holding stage at any moment, from the mirrored stages in order."""
    stages: dict[int, str] = {}
    most = 0
    for mirrored in fleet.mirrored:
        stages[mirrored["bisection"]] = mirrored["stage"]
        most = max(most, sum(1 for stage in stages.values() if stage in admission.SLOT_STAGES))
    return most


def opening_order(fleet: FakeFleet) -> list[int]:
    order = []
    for mirrored in fleet.mirrored:
        if mirrored["stage"] == "confirming" and mirrored["bisection"] not in order:
            order.append(mirrored["bisection"])
    return order


def test_changes_past_the_cap_queue_in_arrival_order_and_a_freed_slot_opens_the_next(tmp_path):
    """Cap 1, queue of 3: the second to fourth changes are queued with their places (the work item's
    line and the stored state), the fifth is refused in one line with nothing stored; the queued
    work item's own completion does not start it; each end opens the oldest queued one, never two
    at once; all four name the culprit."""
    model = Model(16, {12: 5.0})
    store, fleet = Store(tmp_path / "fleet.db"), FakeFleet(model, 1)
    loop = make_loop(store, fleet, max_concurrent=1, max_queued=3)
    works = [source_work(model) for _ in range(5)]
    decisions = [loop.trigger(*work_) for work_ in works]
    first, queued, refused = decisions[0], decisions[1:4], decisions[4]
    assert loop.state(first.bisection)["stage"] == "confirming"
    for place, decision in enumerate(queued, 1):
        assert loop.state(decision.bisection)["stage"] == "queued"
        assert f"{admission.ordinal(place)} of {place} waiting for this repository" in decision.line
        assert "1 bisections of this repository are open" in decision.line and "\n" not in decision.line
    assert [(loop.state(d.bisection)["position"], loop.state(d.bisection)["queue_length"]) for d in queued] == \
        [(1, 3), (2, 3), (3, 3)]
    assert refused.bisection is None and "\n" not in refused.line
    assert "3 changes wait already" in refused.line and "--bisect-max-queued, is 3" in refused.line
    assert len(loop.states()) == 4                                  # the refused one stored nothing
    # the collector's effect for each work item: only the open one starts
    for summary, _, _ in works[:4]:
        loop.work_complete(summary)
    assert len(fleet.submitted) == 1
    again = loop.trigger(*works[2])                             # idempotent, with its place now
    assert again.bisection == queued[1].bisection and "2nd of 3 waiting" in again.line
    drain(loop, fleet)
    assert opening_order(fleet) == [first.bisection] + [d.bisection for d in queued]
    assert max_open_at_once(fleet) == 1
    for decision in decisions[:4]:
        state = loop.state(decision.bisection)
        assert state["stage"] == "reported" and state["culprit"]["sha"] == model.commits[12].sha
    # while the first ran, the second moved up as it was opened: the last one's place went 3 → 2 → 1
    last = [(m["position"], m["queue_length"]) for m in fleet.mirrored
            if m["bisection"] == queued[2].bisection and m["stage"] == "queued"]
    assert last == [(3, 3), (2, 2), (1, 1)]
    assert len(fleet.comments) == 4


class Clock:
    def __init__(self, now: float = 1_800_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_the_agent_time_cap_holds_new_pairs_and_bisections_until_the_window_frees(tmp_path):
    """Each work item costs its agents 120 s; the cap is 300 s per 24 h: after three pairs the open
    bisection enqueues nothing (stage `waiting`, with when it frees), a new change queues; the
    periodic check before then changes nothing, after it resumes the bisection and opens the
    queued one; both end naming the culprit, each window spent in turn."""
    model = Model(16, {12: 5.0})
    store, fleet, clock = Store(tmp_path / "fleet.db"), FakeFleet(model, 1), Clock()
    fleet.seconds_per_item = 120.0
    loop = make_loop(store, fleet, agent_time_s=300.0, clock=clock)
    summary, comparisons, records = source_work(model)
    first = loop.trigger(summary, comparisons, records)
    loop.work_complete(summary)
    answered_at = []
    while fleet.waiting():
        work_id = fleet.waiting()[0]
        fleet.complete.append(work_id)
        clock.now += 100.0
        answered_at.append(clock.now)
        loop.work_complete(summary_of(fleet.items[work_id]))
    state = loop.state(first.bisection)
    assert len(answered_at) == 3 and state["stage"] == "waiting"             # 360 s spent ≥ 300 s
    assert state["frees_at"] == answered_at[0] + admission.WINDOW_S   # the oldest 120 s leave: 240 < 300
    assert "waiting for agent time" in state["note"] and "6m00s spent" in state["note"]
    assert sum(p["agent_s"] for p in state["pairs"].values()) == 360.0
    second_work = source_work(model)
    second = loop.trigger(*second_work)
    loop.work_complete(second_work[0])
    assert loop.state(second.bisection)["stage"] == "queued" and "1st of 1 waiting" in second.line
    assert "its agent time is spent (6m00s spent in the last 24 h, the cap (--bisect-agent-time) is 5m00s" in second.line
    submitted = len(fleet.submitted)
    clock.now = state["frees_at"] - 1.0
    loop.tick()
    assert len(fleet.submitted) == submitted and loop.state(first.bisection)["stage"] == "waiting"
    assert loop.state(second.bisection)["stage"] == "queued"
    clock.now = state["frees_at"] + 1.0
    loop.tick()
    assert loop.state(first.bisection)["stage"] == "bisecting" and loop.state(first.bisection)["note"] is None
    assert loop.state(second.bisection)["stage"] == "confirming"
    assert len(fleet.submitted) == submitted + 2                          # a step of the first, the second's confirmation
    for _ in range(40):                       # each day's 300 s, then the next window
        drain(loop, fleet)
        if all(loop.state(d.bisection)["stage"] == "reported" for d in (first, second)):
            break
        assert {loop.state(d.bisection)["stage"] for d in (first, second)} <= {"waiting", "reported"}
        clock.now += admission.WINDOW_S
        loop.tick()
    for decision in (first, second):
        assert loop.state(decision.bisection)["culprit"]["sha"] == model.commits[12].sha
    # never more than one window's worth beyond the cap: a check comes before each round
    spent = sorted((p["done_at"], p["agent_s"]) for d in (first, second)
                   for p in loop.state(d.bisection)["pairs"].values())
    for start, _ in spent:
        in_window = sum(s for t, s in spent if start <= t < start + admission.WINDOW_S)
        assert in_window <= 300.0 + 2 * 120.0


def test_a_platform_without_live_agents_stalls_frees_its_slot_and_resumes(tmp_path):
    """Cap 1: the open bisection's platform loses every agent; after `stall_after_s` without one
    (seen by the periodic check) it is `stalled`, holds no slot (the queued change opens) and its
    work item stays where it was; an agent back, it resumes and both end naming the culprit."""
    model = Model(16, {12: 5.0})
    store, fleet, clock = Store(tmp_path / "fleet.db"), FakeFleet(model, 1), Clock()
    loop = make_loop(store, fleet, max_concurrent=1, stall_after_s=600.0, clock=clock)
    summary, comparisons, records = source_work(model)
    first = loop.trigger(summary, comparisons, records)
    loop.work_complete(summary)
    confirmation = list(fleet.submitted)
    second_work = source_work(model)
    second = loop.trigger(*second_work)
    loop.work_complete(second_work[0])
    fleet.agents = 0
    loop.tick()                                  # the first check that sees no agent
    clock.now += 599.0
    loop.tick()
    assert loop.state(first.bisection)["stage"] == "confirming" and loop.state(second.bisection)["stage"] == "queued"
    clock.now += 1.0
    loop.tick()
    state = loop.state(first.bisection)
    assert state["stage"] == "stalled" and "no live agent of platform p for 10m00s" in state["note"]
    assert "1 work item(s) stay in the stream" in state["note"]
    assert loop.state(second.bisection)["stage"] == "confirming"           # its slot went to the queued one
    assert fleet.waiting()[0] == confirmation[0] and len(fleet.waiting()) == 2      # nothing lost, nothing twice
    clock.now += 3600.0
    loop.tick()                                  # still no agent: the second one stalls too
    assert [loop.state(d.bisection)["stage"] for d in (first, second)] == ["stalled", "stalled"]
    assert len(fleet.waiting()) == 2
    fleet.agents = 1
    loop.tick()
    for decision in (first, second):
        state = loop.state(decision.bisection)
        assert state["stage"] == "confirming" and state["note"] is None and state["no_agents_since"] is None
    assert fleet.submits == len(fleet.submitted) + 2 == 4     # each resumed pair submitted again, skipped: held
    drain(loop, fleet)
    for decision in (first, second):
        assert loop.state(decision.bisection)["culprit"]["sha"] == model.commits[12].sha


def test_a_stalled_bisection_resumes_when_an_agent_completes_its_work(tmp_path):
    """Without waiting for the check: an agent of the platform takes the stalled bisection's work
    item and completes it, and the bisection goes on from its answer."""
    model = Model(16, {12: 5.0})
    store, fleet, clock = Store(tmp_path / "fleet.db"), FakeFleet(model, 2), Clock()
    loop = make_loop(store, fleet, stall_after_s=60.0, clock=clock)
    summary, comparisons, records = source_work(model)
    first = loop.trigger(summary, comparisons, records)
    loop.work_complete(summary)
    fleet.agents = 0
    loop.tick()
    clock.now += 60.0
    loop.tick()
    assert loop.state(first.bisection)["stage"] == "stalled"
    fleet.agents = 1                             # registers, takes the work item at once
    drain(loop, fleet)
    state = loop.state(first.bisection)
    assert state["stage"] == "reported" and state["culprit"]["sha"] == model.commits[12].sha
    assert state["per_round"] == 2                                      # k stays what it was when it opened
    assert state["no_agents_since"] is None                             # its answers showed an agent alive


def test_a_restarted_coordinator_keeps_the_queue(tmp_path):
    """A new coordinator over the same store (the collector restarted) has the same queue in the same
    order; at its start (the first periodic check) it opens what its cap allows — here a cap raised
    from 1 to 2 opens the oldest queued change — and the rest follow as bisections end."""
    model = Model(16, {12: 5.0})
    store, fleet = Store(tmp_path / "fleet.db"), FakeFleet(model, 1)
    loop = make_loop(store, fleet, max_concurrent=1)
    works = [source_work(model) for _ in range(4)]
    decisions = [loop.trigger(*work_) for work_ in works]
    for summary, _, _ in works:
        loop.work_complete(summary)
    store.close()
    store2 = Store(tmp_path / "fleet.db")
    loop2 = make_loop(store2, fleet, max_concurrent=2)
    assert [(s["bisection"], s["position"]) for s in loop2.admission.queue([s for _, s in loop2.states()], REPO)] == \
        [(d.bisection, place) for place, d in enumerate(decisions[1:], 1)]
    loop2.tick()
    assert [loop2.state(d.bisection)["stage"] for d in decisions] == ["confirming", "confirming", "queued", "queued"]
    assert loop2.state(decisions[3].bisection)["position"] == 2
    drain(loop2, fleet)
    assert opening_order(fleet) == [d.bisection for d in decisions]
    assert all(loop2.state(d.bisection)["stage"] == "reported" for d in decisions)
    assert max_open_at_once(fleet) == 2


def test_an_opened_bisection_whose_pairs_were_never_enqueued_is_started_by_the_periodic_check(tmp_path):
    """Opened (from the queue, or by its trigger) and the collector stopped before its first pairs
    were enqueued: nothing would ever complete for it; the check at the next start enqueues them,
    and a second check enqueues nothing more."""
    model = Model(16, {12: 5.0})
    store, fleet = Store(tmp_path / "fleet.db"), FakeFleet(model, 1)
    opened = make_loop(store, fleet).trigger(*source_work(model))
    assert loop_stage(make_loop(store, fleet), opened) == "confirming" and fleet.submitted == []
    restarted = make_loop(Store(tmp_path / "fleet.db"), fleet)
    restarted.tick()
    assert len(fleet.submitted) == 1 and fleet.items[fleet.submitted[0]].bisection == str(opened.bisection)
    restarted.tick()
    assert fleet.submits == 1


def loop_stage(loop: bisection.Loop, decision) -> str:
    return loop.state(decision.bisection)["stage"]


def test_what_fleet_status_says_of_each_new_stage():
    from redline.fleet.status import bisection_line
    base = {"bisection": "7", "work_id": "w1", "repository": "/srv/r", "platform": "p", "per_round": 2, "round": 0,
            "rounds": 3, "steps": 0, "culprit": "", "note": "", "position": 0, "queued": 0, "frees_at": 0.0}
    assert "): queued: 2nd of 3 for /srv/r;" in bisection_line({**base, "stage": "queued", "position": 2,
                                                                 "queued": 3}, 0.0)
    assert "waiting for agent time, frees in 3h10m" in bisection_line(
        {**base, "stage": "waiting", "frees_at": 1000.0 + 3 * 3600 + 600}, 1000.0)
    assert "stalled: no live agent" in bisection_line({**base, "stage": "stalled", "note": "no live agent"}, 0.0)
    assert [admission.ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 111)] == \
        ["1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "111th"]


def test_what_is_not_bisected_says_why(tmp_path):
    model = Model(4, {2: 5.0})
    store, fleet = Store(tmp_path / "fleet.db"), FakeFleet(model, 1)
    summary, comparisons, records = source_work(model)
    assert make_loop(store, fleet, max_concurrent=0).trigger(summary, comparisons, records).line.startswith(
        "Not bisected: the collector's loop is off")
    cli = entries.work_summary({**summary.fields, "source": "cli"}, summary.work_id)
    assert make_loop(store, fleet).trigger(cli, comparisons, records).line is None
    unmoved = source_work(model, moved=False)
    assert make_loop(store, fleet).trigger(*unmoved).line is None

    def no_path(repo, good, bad):
        raise UsageError("--good x is not an ancestor of --bad y")
    loop = bisection.Loop(store, fleet, path_of=no_path)
    assert "not an ancestor" in loop.trigger(summary, comparisons, records).line
    binaries = entries.work_summary({**summary.fields, "baseline": "bin:/usr/bin/redis-server"}, summary.work_id)
    assert "not git commits" in make_loop(store, fleet).trigger(binaries, comparisons, records).line
    for run in records:
        run.suite_file = None
    assert "do not name their suite files" in make_loop(store, fleet).trigger(summary, comparisons, records).line
    assert fleet.submitted == []


def test_a_work_hash_with_bad_loop_fields_is_malformed():
    item = work.WorkItem(work_id="w1", source="push", sides=[SideSpec("baseline", "git:/r@a")], platforms=["p"],
                         tests=[], topologies=["oss-standalone"], settings=work.Settings())
    fields = item.summary(1)
    assert entries.work_summary(fields, "w1").settings["runs"] == 7
    for name, value in (("settings", json.dumps({"runs": 0})), ("settings", json.dumps({"shell": "rm"})),
                        ("settings", json.dumps({"runs": 3, "max_runs": 2})), ("bisection", "1 2"),
                        ("source", "cron"), ("sides", json.dumps([{"name": "x", "target": "t"}])),
                        ("branch", "main..x"), ("branch", "-x"), ("branch", "b" * 201), ("branch", "a b"),
                        ("platforms", json.dumps(["bad name"]))):
        with pytest.raises(entries.Malformed):
            entries.work_summary({**fields, name: value}, "w1")


def test_each_round_step_carries_its_rule_as_job_data(tmp_path):
    """A round's pair is measured against GOOD or BAD with its search's half-way point: its jobs
    carry that rule (checked as every job entry is); the confirmation and the culprit's own change
    carry none (compare's adaptive rule)."""
    model = Model(16, {12: 5.0})
    store, fleet, loop, state, _ = run_loop(tmp_path, model, 2)
    good, bad = model.commits[0].sha, model.commits[-1].sha
    for pair in state["pairs"].values():
        item = fleet.items[pair["work_id"]]
        documents = [document for _, document in item.job_documents()]
        checked = [entries.job_document(json.loads(json.dumps(document))) for document in documents]
        if pair["purpose"] != "step":
            assert pair["step_rule"] is None and all("step_rule" not in d for d in documents)
            continue
        rule = checked[0].step_rule
        assert rule["metric"] == METRIC and rule["against_bad"] == (pair["reference"] == bad)
        assert pair["reference"] in (good, bad) and rule["halves"] == {TEST: 0.5} and rule["rising"] == {TEST: True}
        assert rule["steps"][TEST] > 4                                       # the confirmation's GOOD→BAD ratio


@pytest.mark.parametrize("change, why", [
    ({"metric": "nonsense"}, "not a compared metric"),
    ({"against_bad": "yes"}, "true or false"),
    ({"halves": {TEST: 99}}, "outside"),
    ({"steps": {TEST: 1.0}}, "exactly 1"),
    ({"rising": {OTHER: True}}, "the same tests"),
    ({"shell": "rm -rf /"}, "unknown field"),
    ({"halves": {}}, "1 to"),
])
def test_a_malformed_step_rule_is_a_malformed_job(change, why):
    rule = {"metric": METRIC, "halves": {TEST: 0.5}, "rising": {TEST: True}, "steps": {TEST: 5.0},
            "against_bad": False}
    item = work.WorkItem(work_id="w1", source="bisect", sides=[SideSpec("baseline", "git:/r@a"),
                                                               SideSpec("comparison", "git:/r@b")],
                         platforms=["p"], tests=[(SUITE, TEST)], topologies=["oss-standalone"],
                         settings=work.Settings(runs=5, max_runs=9), step_rule={**rule, **change})
    document = item.job_documents()[0][1]
    with pytest.raises(entries.Malformed, match=why):
        entries.job_document(document)
    assert entries.job_document({**document, "step_rule": rule}).step_rule == rule


def test_an_agent_adds_runs_while_a_step_straddles_its_half_way_point():
    """The agent's extra-runs rule from a job's step rule (redline.fleet.execution.step_rule_runs):
    more runs while the candidate's interval straddles the half-way point, none once it is on one
    side or at max_runs; a job without a rule keeps compare's adaptive rule."""
    from redline.engine.job import Job
    from redline.fleet.execution import step_rule_runs

    def job(rule):
        return Job(suite=SUITE, test=TEST, sides=[], settings={"runs": 5}, max_runs=9, step_rule=rule)
    rule = {"metric": METRIC, "halves": {TEST: 0.5}, "rising": {TEST: True}, "steps": {TEST: 5.0}, "against_bad": False}
    more = step_rule_runs(job(rule))
    model = Model(2, {1: 5.0})
    good, middle = model.commits[0].sha, model.commits[1].sha
    decided = model.runs(good, middle, [TEST], per_side=5)             # 5x against GOOD: beyond the half-way point
    assert more(None, decided, 5) == 0
    pairs = [(10, 12), (10, 60), (10, 30), (10, 14), (10, 50)]         # its interval reaches both sides of √5x
    straddling = [Run(test=TEST, target="t", side=side, run_index=i, status="ok", suite_file=SUITE,
                      metrics={METRIC: value}) for i, (a, b) in enumerate(pairs)
                  for side, value in (("baseline", a), ("comparison", b))]
    assert more(None, straddling, 5) == 2 and more(None, straddling, 9) == 0
    assert more(None, decided[:6], 3) == 2                              # too few runs for an interval yet
    assert step_rule_runs(job(None)) is None


# -- the culprit's own change, profiled: moved functions and the differential flame graph ----------
GET_CODE_PATH = "getGenericCommand"


class Profiles:
    """Profiled runs as an agent ships them and the collector keeps them: each side's folded stacks
    (a model: the moved function's samples follow TEST's metric) written where perf leaves them, the
    document made by redline.fleet.profiles.shipped, checked by entries.run_document after a JSON
    round trip, kept next to the store by profiles.kept."""

    def __init__(self, tmp_path, store: Store, *, moved: str = GET_CODE_PATH, samples: bool = True,
                 with_stacks: bool = True, error: str | None = None, still: bool = False):
        self.dir, self.store, self.moved = tmp_path / "agent-profiles", store, moved
        self.samples, self.with_stacks, self.error, self.still = samples, with_stacks, error, still
        self.dir.mkdir(exist_ok=True)

    def stacks(self, model: Model, sha: str, test: str) -> dict[str, int]:
        if not self.samples:
            return {}
        weight = 1000 if self.still else round(100 * model.value(sha, test))
        return {f"main;aeMain;processCommand;call;{self.moved}": weight,
                "main;aeMain;aeProcessEvents;epoll_wait_[k]": 3000, "main;aeMain;readQueryFromClient;read_[k]": 2000}

    def runs(self, model: Model, shas: list[str], tests: list[str]) -> list[Run]:
        from redline.fleet import profiles
        from redline.profile.folding import write_folded
        out = []
        for test in tests:
            for side, sha in zip(("baseline", "comparison"), shas):
                stacks = self.stacks(model, sha, test)
                run = Run(test=test, target=f"git:{REPO}@{sha}", side=side, run_index=5, purpose="profile",
                          status="failed" if self.error else "ok", error=self.error, suite_file=SUITE)
                if not self.error:
                    folded = write_folded(stacks, self.dir / f"{run.uid}.folded.gz")
                    run.profile = {"folded_path": str(folded), "svg_path": "/agent/flamegraph.svg",
                                   "samples": sum(stacks.values()), "event": "cycles"}
                document = json.loads(json.dumps(profiles.shipped(run)))
                if not self.with_stacks and document.get("profile"):
                    del document["profile"]["stacks"]          # an agent of an older redline
                out.append(profiles.kept(entries.run_document(document, "runs[0]"), self.store))
        return out


def profiled_loop(tmp_path, model: Model, agents: int = 2, *, tests: tuple[str, str] = (TEST, OTHER), **options):
    store = Store(tmp_path / "fleet.db")
    fleet = FakeFleet(model, agents, Profiles(tmp_path, store, **options))
    loop = make_loop(store, fleet)
    summary, comparisons, records = source_work(model, tests=tests)
    decision = loop.trigger(summary, comparisons, records)
    loop.work_complete(summary)
    drain(loop, fleet)
    return store, fleet, loop.state(decision.bisection)


def test_the_culprits_own_change_is_profiled_and_the_report_names_its_moved_functions(tmp_path):
    from pathlib import Path

    from redline.output import renderer
    model = Model(16, {12: 5.0})
    store, fleet, state = profiled_loop(tmp_path, model)
    assert state["culprit"]["sha"] == model.commits[12].sha
    # the own change alone is profiled (one profiled run per side after the measured ones); no step is
    own = [key for key, pair in state["pairs"].items() if pair["purpose"] == "own change"]
    assert own == [f"{model.commits[11].sha}..{model.commits[12].sha}+profile"]
    for key, pair in state["pairs"].items():
        item = fleet.items[pair["work_id"]]
        documents = [entries.job_document(json.loads(json.dumps(d))) for _, d in item.job_documents()]
        assert all(job.settings["profile"] == (key in own) for job in documents), pair
    # the bisection's document has them, as `redline bisect --profile` stores them
    bisection_id = state["bisection"]
    change = store.session_document(bisection_id, "bisection")["remainder"]["changes"][TEST]
    top = change["moved_symbols"][0]
    assert top["symbol"] == GET_CODE_PATH
    assert top["baseline_share"] == pytest.approx(1000 / 6000)
    assert top["comparison_share"] == pytest.approx(5000 / 10000)
    svg = Path(change["diff_flamegraph"])
    assert svg == store.artifacts(f"bisect-{bisection_id}") / f"{TEST}.diff.svg" and GET_CODE_PATH in svg.read_text()
    # the comment: the moved functions quoted, where the flame graph is and the command that shows it
    markdown = fleet.comments[-1][0]
    assert f"| {literal(TEST)} | {literal(GET_CODE_PATH)} | 16.7% | 50.0% |" in markdown, markdown
    assert f"Differential flame graph of {literal(TEST)}" in markdown and literal(str(svg)) in markdown
    assert f"redline report {bisection_id} --store {store.path}" in markdown
    assert "No moved functions" not in markdown and "moved: " not in markdown      # listed once, quoted
    # `redline report SESSION` embeds the flame graph with the bisection
    html = renderer("html")(store.load_session(bisection_id))
    assert "data-payload" in html and "culprit against" in html


def test_a_one_commit_push_measures_its_profiled_own_change_apart_from_the_confirmation(tmp_path):
    """GOOD → BAD of one commit: the confirmation and the culprit's own change are the same two
    commits; the own change is a pair of its own (profiled), not the confirmation's answer again."""
    model = Model(1, {1: 5.0})
    store, fleet, state = profiled_loop(tmp_path, model, agents=1)
    assert state["culprit"]["sha"] == model.commits[1].sha
    assert sorted(pair["purpose"] for pair in state["pairs"].values()) == ["confirmation", "own change"]
    assert f"| {literal(GET_CODE_PATH)} |" in fleet.comments[-1][0]


@pytest.mark.parametrize("options, why", [
    ({"samples": False}, "the baseline's profile has no samples"),
    ({"with_stacks": False}, "the baseline's profiled run came without its stacks"),
    ({"error": "perf: `@octocat` not permitted"}, "the baseline's profiled run failed"),
    ({"still": True}, "no function's share of the server's CPU differs between the two profiles"),
])
def test_without_a_usable_profile_the_report_says_why_not_an_empty_table(tmp_path, options, why):
    model = Model(16, {12: 5.0})
    store, fleet, state = profiled_loop(tmp_path, model, **options)
    assert state["culprit"]["sha"] == model.commits[12].sha            # the measured runs still answer
    change = store.session_document(state["bisection"], "bisection")["remainder"]["changes"][TEST]
    assert not change["moved_symbols"]
    markdown = fleet.comments[-1][0]
    line = f"No moved functions for {literal(TEST)}: {why}"
    assert line in markdown and "| function |" not in markdown, markdown
    # the flame graph exists only where both sides had samples to draw (and is then named)
    assert bool(change["diff_flamegraph"]) == bool(options.get("still"))
    assert ("Differential flame graph of" in markdown) == bool(options.get("still"))
    if options.get("error"):                                           # the agent's text, quoted
        assert f"{line} ({literal(options['error'])})." in markdown


def test_no_profile_run_at_all_is_said_too(tmp_path):
    """A fleet whose agents return no profiled run (the test-played agents of test_fleet_loop)."""
    store, fleet, loop, state, _ = run_loop(tmp_path, Model(16, {12: 5.0}), 2)
    assert (f"No moved functions for {literal(TEST)}: no profiled run of the baseline and the comparison came back"
            in fleet.comments[-1][0])


def test_a_hostile_function_name_is_inert_in_the_comment(tmp_path):
    hostile = "@octocat ![x](http://evil.example/x.png) <img src=x> `|"
    model = Model(16, {12: 5.0})
    store, fleet, state = profiled_loop(tmp_path, model, moved=hostile)
    markdown = fleet.comments[-1][0]
    assert literal(hostile) in markdown
    outside = markdown.replace(literal(hostile), "")
    for live in ("@octocat", "![x]", "](http://evil.example", "<img"):
        assert live not in outside, live
# -- the second trigger: a change point of a branch's history (redline.fleet.branch_history) ---------
def path_between(model: Model):
    """The ancestry path GOOD..BAD in the model's linear history (as `git log --ancestry-path`)."""
    def path_of(repo, good, bad):
        return model.commits[model.index[good]], model.commits[model.index[good] + 1:model.index[bad] + 1]
    return path_of


def store_push(store: Store, model: Model, at: int, *, target: str = f"git:{REPO}@{{sha}}",
               branch: str = "main") -> entries.WorkSummary:
    """The push of commit `at` (its first parent before it) stored as the collector stores a work item:
    its session, each job's runs through the ledger's sink, the job rows, the finished work item."""
    before, after = model.commits[at - 1].sha, model.commits[at].sha
    item = work.WorkItem(work_id=work.new_work_id(), source="push", branch=branch,
                         sides=[SideSpec("baseline", target.format(sha=before), (), "libc-malloc"),
                                SideSpec("comparison", target.format(sha=after), (), "libc-malloc")],
                         platforms=["p"], tests=[(SUITE, TEST), (SUITE, OTHER)], topologies=["oss-standalone"],
                         settings=work.Settings(runs=5, max_runs=5, duration_s=1.0, warmup_s=0.0))
    ledger = Ledger(store)
    session = ledger.session_of(item.work_id, item.summary(2))
    for number, test in enumerate((TEST, OTHER), 1):
        job_id = f"{item.work_id}:p:{number}"
        sink = ledger.job_runs(session, job_id)
        for run in model.runs(before, after, [test]):
            run.status, run.started_at = "ok", 1_764_000_000.0 + at * 100 + run.run_index
            sink.run_started(run)
            sink.run_finished(run)
        ledger.add_job(work_id=item.work_id, entry={"job_id": job_id, "platform": "p", "agent": "a", "attempt": "1"})
    ledger.finish(item.work_id, state="done", comment="", effects=[])
    return summary_of(item)


def history_loop(tmp_path, model: Model, **kwargs) -> tuple[Store, FakeFleet, bisection.Loop, list[str]]:
    store, fleet, lines = Store(tmp_path / "fleet.db"), FakeFleet(model, 1), []
    loop = bisection.Loop(store, fleet, path_of=path_between(model),
                          say=lambda event, **fields: lines.append(f"{event} {fields}"), **kwargs)
    return store, fleet, loop, lines


def test_a_step_in_a_branch_history_opens_one_bisection_from_the_builds_around_it(tmp_path):
    """Ten pushes of one commit each; TEST's CPU per op is 6% higher from commit 6 on (OTHER never
    moves): the check after the last push opens exactly one bisection, the push of commit 5's head
    GOOD and commit 6 BAD, on TEST and CPU per op; its confirmation is the first pair; it reports
    commit 6 under a heading naming the history change point."""
    model = Model(10, {6: 1.06})
    store, fleet, loop, lines = history_loop(tmp_path, model)
    pushes = [store_push(store, model, at) for at in range(1, 11)]
    opened = loop.history_check(pushes[-1])
    assert len(opened) == 1 and len(loop.states()) == 1
    state = loop.state(opened[0])
    assert state["good"]["sha"] == model.commits[5].sha and [c["sha"] for c in state["path"]] == [model.commits[6].sha]
    assert state["keys"] == [TEST] and state["metric"] == METRIC and state["tests"] == [[SUITE, TEST]]
    assert state["origin"]["kind"] == "history" and state["origin"]["checked_by"] == pushes[-1].work_id
    assert state["work_id"] == pushes[5].work_id and 4 < state["origin"]["delta_pct"] < 8
    # the check advanced it: the confirmation (GOOD against BAD again) is queued as a work item
    assert len(fleet.submitted) == 1
    confirmation = fleet.items[fleet.submitted[0]]
    assert [s.target for s in confirmation.sides] == [f"git:{REPO}@{model.commits[5].sha}",
                                                      f"git:{REPO}@{model.commits[6].sha}"]
    assert loop.of_work(pushes[5].work_id) is None        # not a work item's own verdict's bisection
    drain(loop, fleet)
    state = loop.state(opened[0])
    assert state["stage"] == "reported" and state["culprit"]["sha"] == model.commits[6].sha
    markdown = fleet.comments[-1][0]
    assert f"fleet bisection {opened[0]} of a `redline history` change point" in markdown
    assert f"{TEST} · oss-standalone · git:{REPO} branch main variant libc-malloc on p" in markdown
    assert "server_cpu_us_per_op +" in markdown and pushes[5].work_id in markdown


def test_a_flat_branch_history_opens_nothing(tmp_path):
    model = Model(10, {})
    store, fleet, loop, lines = history_loop(tmp_path, model)
    pushes = [store_push(store, model, at) for at in range(1, 11)]
    assert loop.history_check(pushes[-1]) == []
    assert loop.states() == [] and fleet.submitted == [] and store.documents_named(branch_history.SEEN) == []


def test_a_change_point_seen_again_opens_nothing_new(tmp_path):
    """The same check again (a replayed effect), a later push, and a restarted coordinator over the
    same store: the change point is decided once."""
    model = Model(12, {6: 1.06})
    store, fleet, loop, lines = history_loop(tmp_path, model)
    pushes = [store_push(store, model, at) for at in range(1, 11)]
    first = loop.history_check(pushes[-1])
    assert len(first) == 1
    assert loop.history_check(pushes[-1]) == []                       # the effect done again
    pushes.append(store_push(store, model, 11))
    assert loop.history_check(pushes[-1]) == []                       # a later push
    store.close()
    store2 = Store(tmp_path / "fleet.db")
    loop2 = bisection.Loop(store2, fleet, path_of=path_between(model))
    pushes.append(store_push(store2, model, 12))
    assert loop2.history_check(pushes[-1]) == []                      # after a restart
    assert [b for b, _ in loop2.states()] == first and len(fleet.submitted) == 1
    seen = [d for _, doc in store2.documents_named(branch_history.SEEN) for d in doc["change_points"]]
    assert len(seen) == 1 and seen[0]["bisection"] == first[0]


def test_a_change_point_between_builds_that_are_not_git_commits_is_one_log_line(tmp_path):
    model = Model(10, {6: 1.06})
    store, fleet, loop, lines = history_loop(tmp_path, model)
    pushes = [store_push(store, model, at, target="bin:/srv/redis-server") for at in range(1, 11)]
    assert loop.history_check(pushes[-1]) == []
    said = [line for line in lines if "not git commits" in line]
    assert len(said) == 1 and "bin:/srv/redis-server → bin:/srv/redis-server" in said[0]
    assert loop.states() == [] and fleet.submitted == []
    assert loop.history_check(pushes[-1]) == [] and len([line for line in lines if "not git commits" in line]) == 1


def test_a_change_point_inside_a_pushs_bisection_is_not_opened_twice(tmp_path):
    """A push of commits 0..12 moved TEST and opened its own bisection; the branch's history then shows
    the step at commit 12 between two of its pushes: inside that range, it is not opened again."""
    model = Model(16, {12: 1.06})
    store, fleet, loop, lines = history_loop(tmp_path, model)
    wide = Model(12, {12: 1.06})                       # the same commits 0..12
    own = loop.trigger(*source_work(wide))
    assert own.bisection is not None
    pushes = [store_push(store, model, at) for at in range(7, 17)]
    assert loop.history_check(pushes[-1]) == []
    assert [b for b, _ in loop.states()] == [own.bisection]
    assert any("already bisected" in line and f"'bisection': {own.bisection}" in line for line in lines)
    seen = [d for _, doc in store.documents_named(branch_history.SEEN) for d in doc["change_points"]]
    assert len(seen) == 1 and seen[0]["line"] == f"inside the range of fleet bisection {own.bisection}"


def test_the_history_trigger_is_off_with_its_flag_and_for_other_work(tmp_path):
    model = Model(10, {6: 1.06})
    store, fleet, loop, lines = history_loop(tmp_path, model, history=False)
    pushes = [store_push(store, model, at) for at in range(1, 11)]
    assert not loop.checks_history(pushes[-1]) and loop.history_check(pushes[-1]) == []
    on = bisection.Loop(store, fleet, path_of=path_between(model))
    assert on.checks_history(pushes[-1])
    assert not on.checks_history(entries.work_summary({**pushes[-1].fields, "branch": ""}, pushes[-1].work_id))
    assert not on.checks_history(entries.work_summary({**pushes[-1].fields, "source": "cli"}, pushes[-1].work_id))
    assert not bisection.Loop(store, fleet, max_concurrent=0).checks_history(pushes[-1])
    assert loop.states() == []
# -- counted: the confirmation, the steps and the culprit's own change under callgrind ------------
def counted_model(n: int, steps: dict[int, float], **kwargs) -> Model:
    return Model(n, steps, test=GET1, suites=BUILTIN, **kwargs)


def items_of(fleet: FakeFleet, state: dict, purpose: str) -> list[work.WorkItem]:
    return [fleet.items[p["work_id"]] for p in state["pairs"].values() if p["purpose"] == purpose]


def assert_counted_throughout(fleet: FakeFleet, state: dict, model: Model) -> None:
    """The confirmation: GOOD and BAD interleaved by the endpoints' runs in one work item (its jobs
    choose their request count); every other commit counted once, alone, by one run, its jobs sending
    the confirmation's request count; every job document is one an agent accepts."""
    good, bad = model.commits[0].sha, model.commits[-1].sha
    assert all(key.startswith(bisection.COUNTED) for key in state["pairs"])         # no timed pair at all
    confirmation, = items_of(fleet, state, "confirmation")
    assert [s.target for s in confirmation.sides] == [f"git:{REPO}@{good}", f"git:{REPO}@{bad}"]
    assert confirmation.settings.measure == "instructions" and confirmation.settings.runs == state["endpoint_runs"] == 5
    assert confirmation.settings.window_requests == {}
    steps = items_of(fleet, state, "step")
    assert steps
    for item in steps:
        side, = item.sides
        assert side.name is None and side.variant == "libc-malloc" and item.settings.runs == item.settings.max_runs == 1
        assert item.settings.window_requests == {GET1: REQUESTS}
        documents = [entries.job_document(json.loads(json.dumps(d))) for _, d in item.job_documents()]
        assert [(d.test, d.settings["measure"], d.settings["window_requests"]) for d in documents] == \
            [(GET1, "instructions", REQUESTS)]
        assert summary_of(item).settings["window_requests"] == {GET1: REQUESTS}       # the work hash's own check
    counted = [item.sides[0].target for item in steps]
    assert len(counted) == len(set(counted))                                        # each commit once
    assert not {f"git:{REPO}@{good}", f"git:{REPO}@{bad}"} & set(counted)           # the ends: by the confirmation


@pytest.mark.parametrize("agents", [1, 2])
def test_a_counted_bisection_finds_one_step_counting_each_commit_once(tmp_path, agents):
    model = counted_model(16, {12: 5.0})
    store, fleet, loop, state, _ = run_loop(tmp_path, model, agents, tests=(GET1, SET1))
    assert state["stage"] == "reported" and state["culprit"]["sha"] == model.commits[12].sha, state["note"]
    assert state["measure"] == "instructions" and state["metric"] == COUNTED_METRIC and state["timed_because"] is None
    assert_counted_throughout(fleet, state, model)
    own, = items_of(fleet, state, "own change")          # the culprit's own change: once more, with its profile
    assert len(own.sides) == 2 and own.settings.profile and own.settings.runs == 1
    document = store.session_document(state["bisection"], "bisection")
    assert document["measure"] == "instructions" and list(document["endpoints"]["moved"]) == [GET1]
    measured = [step for step in document["steps"] if step["outcome"] in ("good", "bad")]
    assert measured and all(step["changes"][GET1]["runs"] == 1 and step["changes"][GET1]["step_tolerance_pct"]
                            for step in measured)
    assert document["remainder"]["explained"][GET1] > 0.95
    per_round = rounds_of(state)
    assert per_round[0] == 1 and max(n for r, n in per_round.items() if r > 0) <= agents
    markdown = fleet.comments[-1][0]
    assert f"culprit: {model.commits[12].sha[:12]}" in markdown
    assert "Counted under callgrind: the endpoints by interleaved runs, every other commit by one run." in markdown
    assert "Measured by time" not in markdown


@pytest.mark.parametrize("agents", [1, 2])
def test_a_counted_bisection_names_the_larger_of_two_unequal_steps(tmp_path, agents):
    model = counted_model(16, {5: 1.5, 12: 3.0})
    store, fleet, loop, state, _ = run_loop(tmp_path, model, agents, tests=(GET1, SET1))
    assert state["measure"] == "instructions" and state["culprit"]["sha"] == model.commits[12].sha
    assert_counted_throughout(fleet, state, model)
    document = store.session_document(state["bisection"], "bisection")
    share = document["remainder"]["explained"][GET1]
    assert 0.6 < share < 0.85 and document["remainder"]["large"]       # log 3 / log 4.5 = 0.73


@pytest.mark.parametrize("counted, why", [
    ({}, "the counted confirmation did not see the change (instructions_per_op: quick-string-get-100B-pipeline-1 "
         "no_change"),
    ({12: 1.05}, "the counted confirmation saw it move too little to follow by one counted run per commit"),
])
def test_a_change_counts_do_not_see_is_bisected_by_time(tmp_path, counted, why):
    """The work item's timed change is not in the counts (it lives in system calls, say), or is too
    small there for one-run steps (+5%: they follow 8.2% and more): the bisection goes on timed from
    a timed confirmation, as the loop without counts does; the comment says so in one line."""
    model = counted_model(16, {12: 5.0}, counted=counted)
    store, fleet, loop, state, _ = run_loop(tmp_path, model, 2, tests=(GET1, SET1))
    assert state["stage"] == "reported" and state["culprit"]["sha"] == model.commits[12].sha
    assert state["measure"] == "time" and state["metric"] == METRIC
    assert state["timed_because"].startswith(why), state["timed_because"]
    good, bad = model.commits[0].sha, model.commits[-1].sha
    counted = [key for key in state["pairs"] if key.startswith(bisection.COUNTED)]
    assert counted == [f"{bisection.COUNTED}{good}..{bad}"]                 # the counted confirmation alone
    assert state["pairs"][f"{good}..{bad}"]["purpose"] == "confirmation"    # then the timed one
    assert all(fleet.items[p["work_id"]].settings.measure is None for k, p in state["pairs"].items()
               if not k.startswith(bisection.COUNTED))
    document = store.session_document(state["bisection"], "bisection")
    assert document["measure"] == "time" and document["metric"] == METRIC
    markdown = fleet.comments[-1][0]
    line, = [line for line in markdown.splitlines() if line.startswith("Measured by time: ")]
    assert why in line and "Counted under callgrind" not in markdown
    assert f"culprit: {model.commits[12].sha[:12]}" in markdown


def test_counts_that_do_not_run_leave_the_bisection_to_time(tmp_path):
    """The counted confirmation's jobs died (valgrind missing on the agents): timed from there on."""
    model = counted_model(8, {4: 5.0})
    store, fleet, loop, state, _ = run_loop(tmp_path, model, 1, tests=(GET1, SET1), counts_die=True)
    assert state["stage"] == "reported" and state["culprit"]["sha"] == model.commits[4].sha
    assert state["measure"] == "time" and "the counted confirmation did not count" in state["timed_because"]
    assert "valgrind: not found" in state["timed_because"]


def test_with_bisect_measure_instructions_a_change_counts_do_not_see_is_not_bisected(tmp_path):
    model = counted_model(8, {4: 5.0}, counted={})
    store, fleet, loop, state, _ = run_loop(tmp_path, model, 1, tests=(GET1, SET1), measure="instructions")
    assert state["stage"] == "not reproduced" and len(state["pairs"]) == 1
    assert state["note"].startswith("the counted confirmation did not see the change (instructions_per_op: ")
    assert state["note"].endswith("not bisected (--bisect-measure instructions)") and "\n" not in state["note"]


def test_a_test_counts_cannot_see_is_bisected_by_time_from_the_start(tmp_path):
    """Pipelining (GET with pipeline 10) saves system calls, which callgrind does not count: the
    bisection is timed from its confirmation on, its comment says why; --bisect-measure time times
    a test counts could see, and says nothing."""
    model = Model(8, {4: 5.0}, test=GET10, suites=BUILTIN)
    store, fleet, loop, state, _ = run_loop(tmp_path, model, 1, tests=(GET10, SET1))
    assert state["measure"] == "time" and state["culprit"]["sha"] == model.commits[4].sha
    assert not any(key.startswith(bisection.COUNTED) for key in state["pairs"])
    assert "counts cannot see quick-string-get-100B-pipeline-10 (pipeline 10: " in state["timed_because"]
    assert "Measured by time: counts cannot see" in fleet.comments[-1][0]
    model = counted_model(8, {4: 5.0})
    store, fleet, loop, state, _ = run_loop(tmp_path / "time", model, 1, tests=(GET1, SET1), measure="time")
    assert state["measure"] == "time" and state["timed_because"] is None and state["culprit"]
    assert not any(key.startswith(bisection.COUNTED) for key in state["pairs"])
    assert "Measured by time" not in fleet.comments[-1][0]
    with pytest.raises(ValueError):
        make_loop(store, fleet, measure="cycles")


def test_a_counted_bisection_replayed_and_restarted_changes_nothing(tmp_path):
    """Counted work completed twice, a restarted coordinator over the same store, a count's work id
    recorded but lost by Redis: the same work ids, each commit counted once, the same culprit."""
    model = counted_model(16, {12: 5.0})
    store, fleet = Store(tmp_path / "fleet.db"), FakeFleet(model, 2)
    loop = make_loop(store, fleet)
    summary, comparisons, records = source_work(model, tests=(GET1, SET1))
    decision = loop.trigger(summary, comparisons, records)
    loop.work_complete(summary)
    loop.work_complete(summary)
    confirmation, = fleet.submitted
    fleet.complete.append(confirmation)
    loop.work_complete(summary_of(fleet.items[confirmation]))
    first_round = fleet.waiting()
    assert len(first_round) == 2 and all(len(fleet.items[w].sides) == 1 for w in first_round)
    loop.work_complete(summary_of(fleet.items[confirmation]))            # again: nothing new
    assert fleet.waiting() == first_round
    fleet.complete.append(first_round[1])                                # half a round answered, twice
    loop.work_complete(summary_of(fleet.items[first_round[1]]))
    loop.work_complete(summary_of(fleet.items[first_round[1]]))
    assert fleet.waiting() == first_round[:1]
    lost = first_round[0]                                                # Redis lost the other
    loop2 = restarted_after_losing(tmp_path, store, fleet, lost, decision.bisection)
    assert lost in fleet.items and fleet.waiting() == [lost]             # the same work id again
    drain(loop2, fleet, reverse=True)
    state = loop2.state(decision.bisection)
    assert state["culprit"]["sha"] == model.commits[12].sha and state["measure"] == "instructions"
    assert len({p["work_id"] for p in state["pairs"].values()}) == len(state["pairs"]) == len(state["answers"])
    assert_counted_throughout(fleet, state, model)
    assert len(fleet.comments) == 1


def test_a_work_hash_with_bad_counted_settings_is_malformed():
    item = work.WorkItem(work_id="w1", source="bisect", sides=[SideSpec(None, "git:/r@a")], platforms=["p"],
                         tests=[(SUITE, TEST)], topologies=["oss-standalone"],
                         settings=work.Settings(measure="instructions", window_requests={TEST: 500}))
    fields = item.summary(1)
    assert fields["baseline"] == "" and fields["comparison"] == "git:/r@a"     # a commit counted alone
    checked = entries.work_summary(fields, "w1").settings
    assert checked["measure"] == "instructions" and checked["window_requests"] == {TEST: 500}
    document = item.job_documents()[0][1]
    assert document["settings"]["measure"] == "instructions" and document["settings"]["window_requests"] == 500
    assert "window_requests" not in work.WorkItem(**{**item.__dict__, "tests": [(SUITE, OTHER)]}).job_documents()[0][1][
        "settings"]
    for value in ({"measure": "cycles"}, {"window_requests": {TEST: 0}}, {"window_requests": [500]},
                  {"window_requests": {TEST: "many"}}, {"window_instructions": -1}):
        with pytest.raises(entries.Malformed):
            entries.work_summary({**fields, "settings": json.dumps({**json.loads(fields["settings"]), **value})}, "w1")


def test_a_counted_bisection_profiles_the_culprits_own_change_too(tmp_path):
    """Counted: the culprit's own change is one more counted work item, the commit before it and the
    culprit interleaved by one run each, profiled (callgrind's call graph, shipped as folded stacks
    like perf's), sending the confirmation's request count; the report names the moved function."""
    model = counted_model(16, {12: 5.0})
    store, fleet, state = profiled_loop(tmp_path, model, tests=(GET1, SET1))
    assert state["measure"] == "instructions" and state["culprit"]["sha"] == model.commits[12].sha
    own, = items_of(fleet, state, "own change")
    assert [s.target for s in own.sides] == [f"git:{REPO}@{model.commits[11].sha}",
                                             f"git:{REPO}@{model.commits[12].sha}"]
    assert own.settings.profile and own.settings.measure == "instructions" and own.settings.runs == 1
    assert own.settings.window_requests == {GET1: REQUESTS}
    change = store.session_document(state["bisection"], "bisection")["remainder"]["changes"][GET1]
    assert change["moved_symbols"][0]["symbol"] == GET_CODE_PATH and change["diff_flamegraph"]
    markdown = fleet.comments[-1][0]
    assert f"| {literal(GET1)} | {literal(GET_CODE_PATH)} |" in markdown, markdown
