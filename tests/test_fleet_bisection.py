"""The closed loop's coordinator (redline/fleet/bisection.py) on in-process fakes: a fake fleet whose
"agents" answer each queued work item with runs made from a model of the repository (the metric's
value at each commit), a real SQLite store. What is tested is the real coordinator — the trigger
on real verdicts, work items through the work hash's own check (entries.work_summary), the search
replayed over stored answers, the store as the only state — not timing."""

from __future__ import annotations

import hashlib
import json

import pytest

from redline.analysis.comparison import FDR_Q, apply_false_discovery_control, compare_test
from redline.bisect.search import Commit
from redline.core.errors import UsageError
from redline.core.run import Run
from redline.engine.job import SideSpec
from redline.fleet import bisection, branch_history, entries, work
from redline.store.fleet_ledger import Ledger
from redline.store.results import Store

REPO = "/srv/fixture"
TEST, OTHER = "quick-string-get-100B-pipeline-10", "quick-string-set-100B-pipeline-10"
SUITE = "/srv/suites/quick/string.yml"
METRIC = "server_cpu_us_per_op"


def commits(n: int) -> list[Commit]:
    return [Commit(hashlib.sha1(str(i).encode()).hexdigest(), f"commit {i}", "2026-11-25T00:00:00Z")
            for i in range(n + 1)]


class Model:
    """The repository: commit 0 is GOOD, 1..n the path; the metric of TEST multiplied by `steps`
    (commit index → factor) from that commit on; OTHER never moves."""

    def __init__(self, n: int, steps: dict[int, float], unbuildable: set[int] = frozenset()):
        self.commits, self.steps, self.unbuildable = commits(n), steps, set(unbuildable)
        self.index = {c.sha: i for i, c in enumerate(self.commits)}

    def value(self, sha: str, test: str) -> float:
        value = 10.0
        if test == TEST:
            for at, factor in self.steps.items():
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
                                   suite_file=SUITE,
                                   metrics={METRIC: self.value(sha, test) * (0.99 + 0.02 * noise),
                                            "ops_per_sec": 1000.0}))
        return out


class FakeFleet:
    """redline.fleet.bisection.Fleet: work items kept in a dict (as Redis keeps their hashes), each
    answered from the model when an agent "takes" it."""

    def __init__(self, model: Model, agents: int = 1):
        self.model, self.agents = model, agents
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


def source_work(model: Model, *, moved: bool = True) -> tuple[entries.WorkSummary, list, list[Run]]:
    """A push work item GOOD → BAD with its verdicts (real compare + FDR on model runs)."""
    good, bad = model.commits[0].sha, model.commits[-1].sha
    item = work.WorkItem(work_id=work.new_work_id(), source="push",
                         sides=[SideSpec("baseline", f"git:{REPO}@{good}", (), "libc-malloc"),
                                SideSpec("comparison", f"git:{REPO}@{bad}", (), "libc-malloc")],
                         platforms=["p"], tests=[(SUITE, TEST), (SUITE, OTHER)], topologies=["oss-standalone"],
                         settings=work.Settings(runs=5, max_runs=5, duration_s=1.0, warmup_s=0.0))
    records = model.runs(good, bad if moved else good, [TEST, OTHER])
    comparisons = [c for test in (TEST, OTHER) for c in compare_test(test, [r for r in records if r.test == test], {})]
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


def run_loop(tmp_path, model: Model, agents: int = 1, **kwargs):
    store, fleet = Store(tmp_path / "fleet.db"), FakeFleet(model, agents)
    loop = make_loop(store, fleet, **kwargs)
    summary, comparisons, records = source_work(model)
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
