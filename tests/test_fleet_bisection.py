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
from redline.fleet import bisection, entries, work
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
    answered from the model when an agent "takes" it."""

    def __init__(self, model: Model, agents: int = 1, *, counts_die: bool = False):
        self.model, self.agents, self.counts_die = model, agents, counts_die
        self.items: dict[str, work.WorkItem] = {}
        self.submitted: list[str] = []
        self.complete: list[str] = []
        self.mirrored: list[dict] = []
        self.comments: list[tuple[str, bool]] = []
        self.submits = 0

    def submit(self, item: work.WorkItem) -> None:
        self.submits += 1
        if item.work_id not in self.items:
            self.items[item.work_id] = item
            self.submitted.append(item.work_id)

    def live_agents(self, platform: str) -> int:
        return self.agents

    def results(self, work_id: str):
        item = self.items[work_id]
        shas = [side.target.rsplit("@", 1)[1] for side in item.sides]
        broken = [sha for sha in shas if self.model.index[sha] in self.model.unbuildable]
        if broken:
            return [], [(f"{work_id}:p:1", "p", f"build of {broken[0][:12]} failed: #error fixture")]
        if item.settings.measure == "instructions":
            if self.counts_die:
                return [], [(f"{work_id}:p:1", "p", "valgrind: not found (install valgrind)")]
            return self.model.counted_runs(item), []
        return self.model.runs(shas[0], shas[1], [name for _, name in item.tests]), []

    def mirror(self, state: dict) -> None:
        self.mirrored.append({k: state[k] for k in ("stage", "round", "rounds")})

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
    del fleet.items[lost]
    fleet.submitted.remove(lost)
    store.close()
    store2 = Store(tmp_path / "fleet.db")
    loop2 = make_loop(store2, fleet)
    loop2.advance(decision.bisection)
    assert lost in fleet.items                                           # the same work id again
    drain(loop2, fleet, reverse=True)
    state = loop2.state(decision.bisection)
    assert state["culprit"]["sha"] == model.commits[12].sha
    assert len({p["work_id"] for p in state["pairs"].values()}) == len(state["pairs"]) == len(state["answers"])
    assert len(fleet.comments) == 1


def test_caps_on_concurrent_bisections_and_on_steps(tmp_path):
    model = Model(16, {12: 5.0})
    store, fleet = Store(tmp_path / "fleet.db"), FakeFleet(model, 1)
    loop = make_loop(store, fleet, max_concurrent=1, max_steps=3)
    first = loop.trigger(*source_work(model))
    second = loop.trigger(*source_work(model))
    assert first.bisection is not None and second.bisection is None
    assert "1 bisections of this repository are running" in second.line
    summary = summary_of(fleet.items[fleet.submitted[0]]) if fleet.submitted else None
    assert summary is None
    loop.advance(first.bisection)
    drain(loop, fleet)
    state = loop.state(first.bisection)
    assert state["stage"] == "failed" and "step cap" in state["note"] and len(state["pairs"]) == 3
    # the first one ended: a new change may be bisected
    assert loop.trigger(*source_work(model)).bisection is not None
    with pytest.raises(ValueError):
        bisection.Loop(store, fleet, max_steps=1)


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
    assert not items_of(fleet, state, "own change")            # the culprit's own change: from the counts taken
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
    del fleet.items[lost]
    fleet.submitted.remove(lost)
    store.close()
    store2 = Store(tmp_path / "fleet.db")
    loop2 = make_loop(store2, fleet)
    loop2.advance(decision.bisection)
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
