"""The catalogue gate's logic on fake runners in real forked lanes and a real SQLite store: routing,
the counted screen deciding "no change", a moved test confirmed by time (and profiled), a budget
that stops new work and says what it left undecided, a resumed gate that does not measure decided
tests again, the tolerant catalogue selection, and bad input on the command line."""

from __future__ import annotations

import json

import pytest

from redline.analysis.gate import COUNT, NOT_MEASURED, TIME, timed_reasons
from redline.analysis.stats import Verdict
from redline.core.errors import UsageError
from redline.lab.gate import Gate, GatePlan, GateSettings, earlier_documents, select_catalogue, topology_of
from redline.lab.scheduler import Scheduler
from redline.store.results import Store
from tests.scheduler_fakes import Script, fake_engines, fake_sides, quick_tests

GET_P1, GET_P10, HSET, LPUSH = ("quick-string-get-100B-pipeline-1", "quick-string-get-100B-pipeline-10",
                                "quick-hash-hset-100B", "quick-list-lpush-100B")


@pytest.fixture(scope="module")
def tests():
    return {t.name: t for t in quick_tests()}


class Clock:
    """A clock the test moves: each reading is a second later."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        self.now += 1.0
        return self.now


def a_gate(tmp_path, script, tests, names, *, budget_s=None, resumed=(), clock=None, session=None, settings=None):
    store = Store(tmp_path / "g.db")
    session = session or store.begin_session(kind="gate", argv=[], machine={})
    sides = fake_sides("baseline", "comparison")
    scheduler = Scheduler(store, lanes=2, cpus=[0, 1], engines=fake_engines(script, store.path))
    plan = GatePlan(sides=sides, tests=[tests[n] for n in names], broken=[],
                    settings=settings or GateSettings(timed_runs=5, timed_max_runs=7), budget_s=budget_s,
                    resumed=list(resumed))
    return Gate(plan, store=store, session_id=session, scheduler=scheduler, floors={},
                clock=clock or Clock()), store, session


def jobs_run(script) -> list[tuple[str, str]]:
    return [(e["test"], e["measure"]) for e in script.read() if e["event"] == "start"]


def test_a_test_goes_to_time_only_for_what_counts_cannot_see(tests):
    sides = fake_sides("baseline", "comparison")
    assert timed_reasons(tests[GET_P1], topology_of(tests[GET_P1]), sides) == []
    [reason] = timed_reasons(tests[GET_P10], topology_of(tests[GET_P10]), sides)
    assert reason.startswith("pipeline 10:")
    from redline.engine.run_plan import Side
    from redline.server.targets import parse_target
    remote = [sides[0], Side(parse_target("tcp://127.0.0.1:1"), "comparison")]
    assert "does not run" in timed_reasons(tests[GET_P1], topology_of(tests[GET_P1]), remote)[0]


def test_counts_decide_no_change_and_a_moved_test_is_confirmed_and_decided_by_time(tmp_path, tests):
    script = Script(log=tmp_path / "log.jsonl", values={
        HSET: {"comparison": {"instructions_per_op": 1100.0, "instructions_per_op_command": 440.0,
                              "est_cycles_per_op": 1320.0, "server_cpu_us_per_op": 12.0}}})
    gate, store, session = a_gate(tmp_path, script, tests, [GET_P1, HSET, GET_P10])
    result = gate.run()
    by_test = {v.test: v for v in result.verdicts}
    assert (by_test[GET_P1].verdict, by_test[GET_P1].decided_by) == (Verdict.NO_CHANGE, "counts")
    assert (by_test[HSET].verdict, by_test[HSET].decided_by) == (Verdict.REGRESSION, "time")
    assert "counts moved" in by_test[HSET].why and by_test[HSET].screen.decision == "moved"
    assert by_test[GET_P10].route == TIME and by_test[GET_P10].decided_by in ("time", None)
    ran = jobs_run(script)
    assert ran.count((GET_P1, "instructions")) == 1 and (GET_P1, "time") not in ran      # decided by counts
    assert ran.count((HSET, "instructions")) == 2 and (HSET, "time") in ran      # screen, time, then its profile
    assert (GET_P10, "instructions") not in ran
    # the profile comes after every timed job, not between two of them (where it would hold the
    # machine with one lane while the next timed job waits)
    profile_at = len(ran) - 1 - ran[::-1].index((HSET, "instructions"))
    assert all(i < profile_at for i, (_, measure) in enumerate(ran) if measure == "time"), ran
    saved = store.session_document(session, "gate")
    assert saved["finished"] and {t["key"] for t in saved["tests"]} == {GET_P1, HSET, GET_P10}
    hset = next(t for t in saved["tests"] if t["key"] == HSET)
    assert set(hset["stages"]) == {"screen", "profile", "time"} and hset["verdict"] == "regression"


def test_a_budget_stops_new_work_and_says_what_it_left_undecided(tmp_path, tests):
    script = Script(log=tmp_path / "log.jsonl")
    clock = Clock()
    gate, store, session = a_gate(tmp_path, script, tests, [GET_P1, HSET, GET_P10, LPUSH], budget_s=30, clock=clock)
    gate.deadline = None
    original = gate._done

    def done_then_spent(job, runs):      # the budget runs out once the counted screen has ended
        follow = original(job, runs)
        if all("screen" in gate.stages[k] for k in (GET_P1, HSET, LPUSH)):
            gate.deadline = 0.0
        return follow
    gate._done = done_then_spent
    result = gate.run()
    by_test = {v.test: v for v in result.verdicts}
    assert by_test[GET_P10].verdict == NOT_MEASURED
    assert "budget" in by_test[GET_P10].why and "timed runs" in by_test[GET_P10].why
    assert result.document["budget_left_undecided"] == [GET_P10]
    assert (GET_P10, "time") not in jobs_run(script)
    assert {by_test[n].verdict for n in (GET_P1, HSET, LPUSH)} == {Verdict.NO_CHANGE}


def test_a_budget_that_ends_before_a_profile_leaves_the_verdict_and_says_the_profile_is_missing(tmp_path, tests):
    from redline.output.gate_report import summary_sentence
    script = Script(log=tmp_path / "log.jsonl", values={
        HSET: {"comparison": {"instructions_per_op_command": 480.0, "server_cpu_us_per_op": 13.0}}})
    clock = Clock()
    gate, store, session = a_gate(tmp_path, script, tests, [GET_P1, HSET], budget_s=30, clock=clock)
    gate.deadline = None
    original = gate._done

    def done_then_spent(job, runs):      # the budget runs out once every timed job has ended
        follow = original(job, runs)
        if "time" in gate.stages[HSET]:
            gate.deadline = 0.0
        return follow
    gate._done = done_then_spent
    result = gate.run()
    by_test = {v.test: v for v in result.verdicts}
    assert by_test[HSET].verdict == Verdict.REGRESSION and "budget" not in by_test[HSET].why
    assert result.document["budget_left_undecided"] == []
    assert result.document["budget_left_unprofiled"] == [HSET]
    assert jobs_run(script).count((HSET, "instructions")) == 1          # its screen; no profile
    assert "changes the budget left without a counted profile: 1 (resume" in summary_sentence(result.document)
    # a resume profiles it and measures nothing else again
    store.finish_session(session, "done")
    resumed, store, _ = a_gate(tmp_path, script, tests, [GET_P1, HSET], resumed=earlier_documents(store, session))
    before = len(jobs_run(script))
    again = resumed.run()
    assert jobs_run(script)[before:] == [(HSET, "instructions")]
    assert again.document["budget_left_unprofiled"] == []
    assert set(next(t for t in again.document["tests"] if t["key"] == HSET)["stages"]) == {"screen", "time", "profile"}


def test_a_resumed_gate_measures_only_what_was_not_decided(tmp_path, tests):
    script = Script(log=tmp_path / "log.jsonl", values={
        HSET: {"comparison": {"instructions_per_op_command": 480.0, "server_cpu_us_per_op": 13.0}}})
    gate, store, first = a_gate(tmp_path, script, tests, [GET_P1, HSET, GET_P10, LPUSH])
    gate.deadline = None
    original = gate._done

    def interrupted_after_the_screen(job, runs):
        follow = original(job, runs)
        if all("screen" in gate.stages[k] for k in (GET_P1, HSET, LPUSH)):
            raise KeyboardInterrupt
        return follow
    gate._done = interrupted_after_the_screen
    with pytest.raises(KeyboardInterrupt):
        gate.run()
    store.finish_session(first, "interrupted")
    saved = store.session_document(first, "gate")
    assert not saved["finished"]
    left = {t["key"] for t in saved["tests"] if t["verdict"] == NOT_MEASURED}
    assert GET_P10 in left and "resume" in next(t["why"] for t in saved["tests"] if t["key"] == GET_P10)
    before = jobs_run(script)
    assert {(n, "instructions") for n in (GET_P1, HSET, LPUSH)} <= set(before)

    resumed, store, second = a_gate(tmp_path, script, tests, [GET_P1, HSET, GET_P10, LPUSH],
                                    resumed=earlier_documents(store, first))
    result = resumed.run()
    again = jobs_run(script)[len(before):]
    assert not any(measure == "instructions" and test in (GET_P1, LPUSH) for test, measure in again)
    assert (GET_P10, "time") in again and (HSET, "time") in again
    by_test = {v.test: v for v in result.verdicts}
    assert by_test[GET_P1].verdict == Verdict.NO_CHANGE and by_test[GET_P1].decided_by == "counts"
    assert by_test[HSET].verdict == Verdict.REGRESSION
    assert result.document["resumes"] == first and result.document["sessions"] == [first, second]
    with pytest.raises(UsageError, match="holds no gate session 999"):
        earlier_documents(store, 999)


def test_a_catalogue_with_broken_suites_names_them_with_file_and_line_and_keeps_the_rest(tmp_path, tests):
    catalogue = tmp_path / "suites"
    catalogue.mkdir()
    good = tests[GET_P1].path.read_text()
    (catalogue / "good.yml").write_text(good)
    (catalogue / "twin.yml").write_text(good)
    (catalogue / "malformed.yml").write_text("version: 0.4\nname: bad\nclientconfig: [unclosed\n")
    broken_client = good.replace(f"name: {GET_P1}", "name: bad-client").replace("--pipeline", "--no-such-flag")
    (catalogue / "bad-client.yml").write_text(broken_client)
    (catalogue / "defaults.yml").write_text("exporter:\n  redistimeseries: {}\n")
    selected, broken = select_catalogue([str(catalogue)])
    assert [t.name for t in selected] == [GET_P1]
    where = {str(b).split(": ", 1)[0]: str(b) for b in broken}
    assert any(k.endswith("malformed.yml:3") or k.endswith("malformed.yml:4") for k in where), where
    assert any("bad-client.yml:" in k for k in where) and any("twin.yml" in k or "good.yml" in k for k in where)
    assert all(":" in str(b) for b in broken)
    with pytest.raises(UsageError, match="no test matches"):
        select_catalogue([str(catalogue)], "nothing-matches")
    with pytest.raises(UsageError, match="no such suite"):
        select_catalogue([str(tmp_path / "missing")])


@pytest.mark.parametrize("args, words", [
    (["--jobs", "0"], "--jobs: expected a positive integer, got '0'"),
    (["--jobs", "many"], "--jobs: expected a positive integer, got 'many'"),
    (["--jobs", "99"], "--jobs 99: this machine gives redline"),
    (["--budget", "soon"], "--budget: not a time budget: 'soon'"),
    (["--budget", "0h"], "leaves no time"),
    (["--pipelines", "sometimes"], "--pipelines: invalid choice: 'sometimes'"),
    (["--resume", "3", "quick"], "--resume continues the stored gate"),
    (["--duet", "--comparison", "tcp://127.0.0.1:1"], "--duet: both servers must run on this machine"),
])
def test_bad_input_is_one_line_and_exit_2(redline_cli, args, words):
    proc = redline_cli("gate", *args)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and words in proc.stderr, proc.stderr


@pytest.mark.parametrize("args, first_look", [
    ([], 5),
    (["--duet"], 7),                          # 7 pairs: the fewest whose signed-rank interval can decide at 15
    (["--duet", "--max-runs", "31"], 9),
    (["--duet", "--runs", "3"], 3),           # asked for: kept
])
def test_a_duet_confirmation_first_looks_where_its_pairs_can_decide(args, first_look):
    from redline.analysis.comparison import looks_confidence
    from redline.analysis.stats import signed_rank_reaches
    from redline.cli import build_parser
    from redline.commands.gate import first_timed_look
    parsed = build_parser().parse_args(["gate", *args])
    assert first_timed_look(parsed) == first_look
    if "--duet" in args and "--runs" not in args:
        most = parsed.max_runs
        assert signed_rank_reaches(first_look, 1 - looks_confidence(first_look, most))
        assert not signed_rank_reaches(first_look - 1, 1 - looks_confidence(first_look - 1, most))


@pytest.mark.parametrize("stored, timed_begun, duet, first_look", [
    ({"timed_runs": 5, "duet": False}, False, True, 7),    # --resume --duet before any timed verdict: 7 pairs
    ({"timed_runs": 5, "duet": False}, True, True, 5),     # timed verdicts exist: their looks stay
    ({"timed_runs": 5, "duet": False}, False, False, 5),   # interleaved as it was
    ({"timed_runs": 9, "duet": True}, False, False, 9),    # more than 7 asked for: kept
])
def test_a_resumed_gate_starts_duets_at_their_first_look_only_while_no_timed_verdict_exists(
        stored, timed_begun, duet, first_look):
    settings = {**vars(GateSettings()), **stored, "timed_max_runs": 15}
    document = {"settings": settings, "tests": [{"key": "a", "timed": None, "timed_all": []},
                                                {"key": "b", "timed": {"delta_pct": 0.1} if timed_begun else None,
                                                 "timed_all": []}]}
    resumed = GateSettings.resumed(document, duet=duet)
    assert resumed.timed_runs == first_look and resumed.duet == (duet or stored["duet"])


def test_the_document_is_json_with_every_test_once(tmp_path, tests):
    script = Script(log=tmp_path / "log.jsonl")
    gate, store, session = a_gate(tmp_path, script, tests, [GET_P1, LPUSH])
    result = gate.run()
    document = json.loads(json.dumps(result.document))
    assert [t["route"] for t in document["tests"]] == [COUNT, COUNT]
    assert document["summary"] == {"no_change": 2}
    assert set(document["phases"]) >= {"builds_s", "screen_wall_s", "timed_s", "preparation_s", "profile_wall_s"}


def test_the_profiles_wall_time_is_their_span_and_the_page_gives_both():
    from redline.core.run import Run
    from redline.lab.gate import _span
    from redline.output.gate_report import phases_line

    def run(start: float, end: float) -> Run:
        return Run(test="t", target="bin:x", side="baseline", run_index=0, started_at=start, finished_at=end)
    assert _span([run(10, 30), run(20, 50)]) == (10, 50)
    assert _span([run(60, 70)], (10, 50)) == (10, 70) and _span([]) is None
    line = phases_line({"elapsed_s": 600, "phases": {"profile_s": 120.0, "profile_wall_s": 62.0}})
    assert "counted profiles 1m02s in lanes (2m00s of lane time)" in line, line
    assert "counted profiles 2m00s;" in phases_line({"elapsed_s": 600, "phases": {"profile_s": 120.0}})


def test_the_pages_list_every_test_once_changes_first_with_their_evidence(tmp_path, tests):
    from redline.output import renderer
    script = Script(log=tmp_path / "log.jsonl", values={
        HSET: {"comparison": {"instructions_per_op_command": 200.0, "server_cpu_us_per_op": 5.0}}})
    gate, store, session = a_gate(tmp_path, script, tests, [GET_P1, HSET, GET_P10])
    gate.run()
    stored = store.load_session(session)              # as `redline show` and `redline report` read it
    markdown = renderer("markdown")(stored)
    rows = [line for line in markdown.splitlines() if line.startswith(f"| {HSET} ")]
    assert rows and "**improvement**" in rows[0] and "2.00× faster" in rows[0] and "in call()" in rows[0]
    every = markdown.split("<summary>Every test</summary>")[1]
    assert every.index(f"| {HSET} |") < min(every.index(f"| {GET_P1} |"), every.index(f"| {GET_P10} |"))
    text = renderer("terminal")(stored)
    assert "3 tests: 0 regressions, 1 improvements, 2 no change (1 by counts, 1 by time)" in text
    assert f"{HSET}: time: server_cpu_us_per_op" in text and GET_P1 not in text   # only what changed or is undecided
    page = renderer("html")(stored)
    assert page.count(f">{HSET}<") >= 1 and "verdict-improvement" in page and "No change (2)" in page
    assert json.loads(renderer("json")(stored))["summary"] == {"improvement": 1, "no_change": 2}


def test_the_pages_say_how_steady_the_machine_was_as_the_timed_confirmations_began(tmp_path, tests):
    from redline.output import renderer
    script = Script(log=tmp_path / "log.jsonl", unsteady={GET_P10})
    gate, store, session = a_gate(tmp_path, script, tests, [GET_P1, GET_P10, LPUSH])
    document = gate.run().document
    assert document["steadiness"]["tests"] == 1 and document["steadiness"]["unsteady"] == 1   # GET_P10: timed
    stored = store.load_session(session)
    sentence = ("Machine unsteady during 1 of 1 timed tests probed (worst: core 0's speed moved 1.60x (p90/p10 of "
                "equal work)): timed intervals are wider than this machine gives when quiet; counted runs are not "
                "affected.")
    assert sentence in renderer("markdown")(stored).splitlines()
    assert sentence in " ".join(renderer("terminal")(stored).split())
    assert "steadiness" in renderer("html")(stored) and "Machine unsteady during 1 of 1" in renderer("html")(stored)


def test_timed_jobs_go_where_time_is_likeliest_to_decide(tmp_path, tests):
    script = Script(log=tmp_path / "log.jsonl", values={      # GET's counts move a lot, HSET's a little
        GET_P1: {"comparison": {"instructions_per_op": 600.0, "est_cycles_per_op": 700.0}},
        HSET: {"comparison": {"instructions_per_op": 960.0, "est_cycles_per_op": 1150.0}}})
    gate, store, session = a_gate(tmp_path, script, tests, [HSET, GET_P1, GET_P10, LPUSH])
    gate.run()
    timed = [test for test, measure in jobs_run(script) if measure == "time"]
    # GET moved 40% but is mostly kernel at pipeline 1 (700 cycles vs 10,000): ~2.6%; at pipeline 10,
    # its sibling's move counts for more (~16%); HSET moved 4%, ~0.4% visible; LPUSH did not move
    assert timed == [GET_P10, GET_P1, HSET]
    assert gate.expected_effect(GET_P10) > gate.expected_effect(GET_P1) > gate.expected_effect(HSET)


def test_each_timed_change_needs_only_what_survives_the_catalogues_fdr_after_the_ones_before(tmp_path, tests):
    """Every quick test twice as costly on the comparison, by counts and by time: all 15 end up
    timed. With no earlier discovery the first change must be sure alone among 15 (p <= 0.05/15;
    the timed test's rank p with 5 + 5 runs is 2/252 = 0.0079, so 7 + 7); the second needs 2q/15,
    still 7; from the third on, 3q/15 and more, 5 + 5 are enough: Benjamini-Hochberg grants each
    what the changes decided before it leave room for. Every change survives the catalogue's
    false-discovery control at the end."""
    slower = {"instructions_per_op": 2000.0, "instructions_per_op_command": 800.0, "est_cycles_per_op": 2400.0,
              "server_cpu_us_per_op": 20.0}
    script = Script(log=tmp_path / "log.jsonl", values={name: {"comparison": slower} for name in tests})
    gate, store, session = a_gate(tmp_path, script, tests, list(tests),
                                  settings=GateSettings(timed_runs=5, timed_max_runs=15))
    result = gate.run()
    order = [test for test, measure in jobs_run(script) if measure == "time"]
    timed = [r for r in store.load_runs(session) if "server_cpu_us_per_op" in r.metrics and r.side == "comparison"]
    runs = [sum(1 for r in timed if r.test == name) for name in order]
    assert len(order) == 15 and runs == [7, 7] + [5] * 13, (order, runs)
    assert all(v.verdict == Verdict.REGRESSION and v.timed.survives_fdr for v in result.verdicts)


def _counted_runs(side: str, instructions: float, command: float, cycles: float, runs: int = 3):
    from redline.core.run import Run
    return [Run(test="t", target=side, side=side, run_index=i, status="ok",
                metrics={"instructions_per_op": instructions * (1 + i / 1e5), "instructions_per_op_command": command,
                         "est_cycles_per_op": cycles * (1 + i / 1e5)}) for i in range(runs)]


def test_estimated_cycles_that_move_alone_are_withheld_and_sent_to_time():
    # the accuracy corpus's sentinel control: instructions identical, simulated cycles -6% (layout)
    from redline.analysis.comparison import TestComparison, compare_test
    from redline.analysis.gate import MOVED, screen
    records = _counted_runs("baseline", 2000.0, 800.0, 5000.0) + _counted_runs("comparison", 2000.0, 800.0, 4700.0)
    by_metric = {c.metric: c for c in compare_test("t", records, {})}
    cycles = by_metric["est_cycles_per_op"]
    assert cycles.result.verdict == Verdict.IMPROVEMENT and cycles.verdict == Verdict.INCONCLUSIVE
    assert "est. cycles -6.0% with the same instructions" in cycles.withheld
    assert TestComparison.from_json(cycles.as_json()).withheld == cycles.withheld        # stored and read back
    assert {by_metric[m].verdict for m in ("instructions_per_op", "instructions_per_op_command")} == {Verdict.NO_CHANGE}
    found = screen("t", records, {})
    assert found.decision == MOVED and "est_cycles_per_op -6.0%" in found.note         # time decides it
    # with the instructions moving too, the cycles' change is claimed as measured
    moved = _counted_runs("baseline", 2000.0, 800.0, 5000.0) + _counted_runs("comparison", 2100.0, 900.0, 5300.0)
    assert all(c.verdict_alone == Verdict.REGRESSION and c.withheld is None for c in compare_test("t", moved, {}))


def test_an_effect_time_did_not_decide_is_said_in_instructions_not_speed():
    from redline.output.gate_report import effect
    counted = {"metric": "instructions_per_op_command", "baseline_median": 2110.0, "comparison_median": 1000.0,
               "delta_pct": -52.6, "ci_low_pct": -52.7, "ci_high_pct": -52.6}
    timed = {"metric": "server_cpu_us_per_op", "baseline_median": 10.0, "comparison_median": 9.5,
             "delta_pct": -5.0, "ci_low_pct": -6.8, "ci_high_pct": 1.2}
    undecided = {"verdict": "inconclusive", "decided_by": None, "timed": timed,
                 "counted": {"headline_metric": "instructions_per_op_command", "metrics": [counted]}}
    assert effect(undecided) == "2.11× fewer instr/op in call()"
    assert effect(dict(undecided, verdict="improvement", decided_by="time")) == "1.05× faster"
    # the ratio of the estimate its interval is of, not of the sides' medians (paired runs on a drifting
    # machine: GET at pipeline 100 read "1.01× faster" beside -3.0% [-4.6%, -1.4%])
    drifting = dict(timed, baseline_median=10.0, comparison_median=9.9, delta_pct=-3.0, ci_low_pct=-4.6, ci_high_pct=-1.4)
    assert effect(dict(undecided, timed=drifting, verdict="improvement", decided_by="time")) == "1.03× faster"
    slower = dict(timed, delta_pct=25.0, ci_low_pct=20.0, ci_high_pct=30.0)
    assert effect(dict(undecided, timed=slower, verdict="regression", decided_by="time")) == "1.25× slower"


def _timed_runs(side: str, cpu_us: float, runs: int = 7):
    from redline.core.run import Run
    return [Run(test="t", target=side, side=side, run_index=i, status="ok",
                metrics={"server_cpu_us_per_op": cpu_us * (1 + (i % 3 - 1) / 200)}) for i in range(runs)]


def test_a_test_whose_counts_moved_outside_call_is_shown_and_judged_by_what_moved():
    # GEOPOS / MGET at 7.0.7: call() unchanged, the whole process −4.4% (client memory tracking)
    from redline.analysis.gate import COUNT, Evidence, judge
    from redline.output.gate_report import counted_headline, effect
    counted = _counted_runs("baseline", 17926.0, 9880.0, 30000.0) + _counted_runs("comparison", 17131.0, 9880.0, 30000.0)
    faster = _timed_runs("baseline", 10.0) + _timed_runs("comparison", 9.36)
    [decided] = judge([Evidence("t", "t", COUNT, counted=counted, timed=faster)], floors={})
    entry = decided.as_json()
    assert entry["counted"]["headline_metric"] == "instructions_per_op"
    assert counted_headline(entry)["delta_pct"] == pytest.approx(-4.4, abs=0.05)
    assert decided.verdict == "improvement" and "opposite" not in decided.why    # both cheaper: the same way
    # and the reason says where: not in the command's code (GEOHASH at 7.0.7 got cheaper by time
    # only because of the client memory tracking around every command)
    assert "the command itself did not change by counts (call() +0.0% [" in decided.why, decided.why
    assert decided.why.endswith("the change is in the work around it")
    in_the_command = _counted_runs("baseline", 17926.0, 9880.0, 30000.0) + _counted_runs("comparison", 17131.0, 9100.0, 30000.0)
    [inside] = judge([Evidence("t", "t", COUNT, counted=in_the_command, timed=faster)], floors={})
    assert inside.verdict == "improvement" and "work around it" not in inside.why, inside.why
    [only_counted] = judge([Evidence("t", "t", COUNT, counted=counted)], floors={})
    assert effect(only_counted.as_json()) == "1.05× fewer instr/op"
    slower = _timed_runs("baseline", 10.0) + _timed_runs("comparison", 10.64)
    [against] = judge([Evidence("t", "t", COUNT, counted=counted, timed=slower)], floors={})
    assert against.verdict == "regression" and "counts and time moved in opposite directions" in against.why
    unmoved = _counted_runs("baseline", 17926.0, 9880.0, 30000.0) + _counted_runs("comparison", 17926.0, 9880.0, 30000.0)
    [same] = judge([Evidence("t", "t", COUNT, counted=unmoved)], floors={})
    assert same.as_json()["counted"]["headline_metric"] == "instructions_per_op_command"


def test_a_test_sent_to_time_by_estimated_cycles_alone_is_shown_and_judged_by_them():
    # standard-stream-xreadgroup-xack, 7.0.5 vs 7.0.7: call() +0.06%, estimated cycles -4.1% with the
    # same instructions (withheld), time -2.1%; the page said "counts and time moved in opposite
    # directions", reading call()'s +0.06% as what moved
    from redline.analysis.gate import COUNT, Evidence, judge
    from redline.output.gate_report import counted_headline
    counted = _counted_runs("baseline", 2000.0, 800.0, 5000.0) + _counted_runs("comparison", 2000.0, 800.5, 4700.0)
    faster = _timed_runs("baseline", 10.0) + _timed_runs("comparison", 9.7)
    [decided] = judge([Evidence("t", "t", COUNT, counted=counted, timed=faster)], floors={})
    entry = decided.as_json()
    assert [c.metric for c in decided.screen.moved] == ["est_cycles_per_op"]
    assert entry["counted"]["headline_metric"] == "est_cycles_per_op"
    assert counted_headline(entry)["delta_pct"] == pytest.approx(-6.0, abs=0.05)
    assert decided.verdict == "improvement" and "opposite" not in decided.why, decided.why
    slower = _timed_runs("baseline", 10.0) + _timed_runs("comparison", 10.3)
    [against] = judge([Evidence("t", "t", COUNT, counted=counted, timed=slower)], floors={})
    assert against.verdict == "regression" and "counts and time moved in opposite directions" in against.why


def test_a_timed_test_stopped_because_more_runs_could_not_decide_says_so():
    from redline.analysis.comparison import looks_confidence
    from redline.analysis.gate import TIME, Evidence, judge
    from redline.core.run import Run
    changes = [1.05, 0.97, 1.04, 0.98, 1.01, 0.965, 1.045, 0.975, 1.03]      # about 1%, runs spread 3-5%
    timed = [Run(test="t", target=side, side=side, run_index=i, status="ok",
                 metrics={"server_cpu_us_per_op": 10.0 * (change if side == "comparison" else 1.0)})
             for i, change in enumerate(changes) for side in ("baseline", "comparison")]
    evidence = [Evidence("t", "t", TIME, timed=timed, why_timed=["pipelining"])]
    [stopped] = judge(evidence, floors={}, confidence=looks_confidence(5, 15), runs_allowed=15)
    assert stopped.verdict == "inconclusive"
    assert "9 runs per side; more had a " in stopped.why and "chance to decide (below 5%, so none were added)" in stopped.why
    [at_the_limit] = judge(evidence, floors={}, confidence=looks_confidence(5, 15), runs_allowed=9)
    assert at_the_limit.verdict == "inconclusive" and "more had a" not in at_the_limit.why
    assert "machine" not in stopped.why                     # no probe stored: nothing said


def test_an_undecided_timed_test_says_when_the_machine_was_unsteady_as_its_runs_began():
    from redline.analysis.gate import TIME, Evidence, judge
    from redline.core.run import Run
    from redline.system.steadiness import CoreProbe, Steadiness

    def evidence(spread: float, share: float) -> list[Evidence]:
        probe = Steadiness((CoreProbe(0, 120, 1.02, 1.0, 0.0), CoreProbe(1, 120, spread, share, 0.0)), 0.5).as_json()
        timed = [Run(test="t", target=side, side=side, run_index=i, status="ok", facts={"machine": {"steadiness": probe}},
                     metrics={"server_cpu_us_per_op": 10.0 * (change if side == "comparison" else 1.0)})
                 for i, change in enumerate([1.2, 0.85, 1.1, 0.9, 1.15]) for side in ("baseline", "comparison")]
        return [Evidence("t", "t", TIME, timed=timed, why_timed=["pipelining"])]
    [wide] = judge(evidence(1.55, 0.7), floors={})
    assert wide.verdict == "inconclusive"
    assert wide.why.endswith("; the machine was unsteady: core 1's speed moved 1.55x (p90/p10 of equal work); "
                             "other processes took 30% of core 1 as its timed runs began; timed because pipelining")
    [calm] = judge(evidence(1.03, 1.0), floors={})
    assert calm.verdict == "inconclusive" and "the machine was" not in calm.why


def test_a_timed_verdict_says_when_its_window_was_fitted_to_slow_calls():
    from redline.analysis.gate import TIME, Evidence, judge
    from redline.core.run import Run

    def evidence(fitted) -> list[Evidence]:
        facts = {"duration_s": 49.0, **({"window_fitted": fitted} if fitted is not None else {})}
        timed = [Run(test="t", target=side, side=side, run_index=i, status="ok", facts=facts,
                     metrics={"server_cpu_us_per_op": 10.0 * (0.7 if side == "comparison" else 1.0) * (1 + i / 100)})
                 for i in range(7) for side in ("baseline", "comparison")]
        return [Evidence("t", "t", TIME, timed=timed, why_timed=["its calls wait"])]
    [slow] = judge(evidence({"asked_s": 3.0, "round_s": 3.21}), floors={})
    assert slow.verdict == "improvement"
    assert ("; measured in 49 s windows, not 3 s: its calls take about 3.21 s a round of requests per connection; "
            "timed because its calls wait") in slow.why
    for stored in (None, {"asked_s": "3", "round_s": 3.21}, "fitted"):      # nothing fitted, or not what redline writes
        [plain] = judge(evidence(stored), floors={})
        assert "windows" not in plain.why, plain.why



def test_a_timed_verdict_on_sides_each_prepared_once_says_so():
    """A cluster read test's sides, each preloaded once and kept (the catalogue A/A's one false
    verdict): the verdict stands, and its evidence says what the interval leaves out."""
    from redline.analysis.gate import TIME, Evidence, judge
    from redline.core.run import Run

    def evidence(restart_per_run: bool) -> list[Evidence]:
        facts = {"state": {"origin": "prepared", "restart_per_run": restart_per_run}}
        timed = [Run(test="t", target=side, side=side, run_index=i, status="ok", facts=facts,
                     metrics={"server_cpu_us_per_op": 10.0 * (0.97 if side == "comparison" else 1.0) * (1 + i / 1000)})
                 for i in range(7) for side in ("baseline", "comparison")]
        return [Evidence("t", "t", TIME, timed=timed, why_timed=["a cluster"])]
    [kept] = judge(evidence(False), floors={})
    assert kept.verdict == "improvement"
    assert ("; each side's data was prepared once and kept for all its runs (no snapshot to restore)" in kept.why
            and kept.why.endswith("; timed because a cluster")), kept.why
    [fresh] = judge(evidence(True), floors={})
    assert fresh.verdict == "improvement" and "prepared once" not in fresh.why

def test_keys_that_expire_within_a_counted_run_send_a_test_to_time(tmp_path):
    """The upstream expire use-cases write keys with EX 10: under callgrind they expire mid-run,
    and by each side's own speed. A time to live of an hour stays countable."""
    from redline.suites import load_test
    from redline.suites.commands import shortest_ttl

    def suite(name: str, command: str):
        path = tmp_path / f"{name}.yml"
        path.write_text(f"""version: 0.4
name: {name}
clientconfig:
  tool: memtier_benchmark
  arguments: '--command "{command}" --command-key-pattern R --key-maximum 1000 --test-time 10 -c 1 -t 1'
""")
        return load_test(path)
    short, psetex, hour = (suite("short", "SET __key__ __data__ EX 10"), suite("psetex", "PSETEX __key__ 1500 __data__"),
                           suite("hour", "SETEX __key__ 3600 __data__"))
    assert shortest_ttl(short) == (10.0, "SET __key__ __data__ EX 10") and shortest_ttl(psetex)[0] == 1.5
    [reason] = timed_reasons(short, topology_of(short), [])
    assert "time to live of 10 s (SET __key__ __data__ EX 10)" in reason and "compare it by time" in reason
    assert timed_reasons(psetex, topology_of(psetex), []) and timed_reasons(hour, topology_of(hour), []) == []


# -- pipelines screened by counts and system calls (gate --pipelines count, the default) ------------------
def _screened_runs(side: str, *, reads: float | None, writes: float | None, instructions: float = 2000.0):
    from redline.core.run import Run
    runs = []
    for i in range(3):
        metrics = {"instructions_per_op": instructions, "instructions_per_op_command": 800.0,
                   "est_cycles_per_op": 5000.0}
        metrics.update({name: value for name, value in (("server_reads_per_op", reads),
                                                        ("server_writes_per_op", writes)) if value is not None})
        runs.append(Run(test="t", target=side, side=side, run_index=i, status="ok", metrics=metrics,
                        facts={"instructions": {"requests_per_connection": 500}}))
    return runs


def test_a_pipelined_test_goes_to_counts_only_when_its_system_calls_are_compared(tests):
    sides = fake_sides("baseline", "comparison")
    from redline.analysis.gate import screened_pipeline
    assert timed_reasons(tests[GET_P10], topology_of(tests[GET_P10]), sides, count_pipelines=True) == []
    assert screened_pipeline(tests[GET_P10], count_pipelines=True) == 10
    assert screened_pipeline(tests[GET_P10], count_pipelines=False) == 1
    assert screened_pipeline(tests[GET_P1], count_pipelines=True) == 1      # pipeline 1: as before


def test_system_calls_per_request_decide_a_pipelined_screen_beside_the_instructions():
    from redline.analysis.gate import MOVED, NO_CHANGE, UNDECIDED, screen
    same = _screened_runs("baseline", reads=0.1, writes=0.1) + _screened_runs("comparison", reads=0.1, writes=0.1)
    found = screen("t", same, {}, pipeline=10)
    assert found.decision == NO_CHANGE
    assert {"server_reads_per_op", "server_writes_per_op"} <= {c.metric for c in found.comparisons}
    # the same instructions, twice the writes per request (replies no longer batched): time decides it
    unbatched = _screened_runs("baseline", reads=0.1, writes=0.1) + _screened_runs("comparison", reads=0.1, writes=0.2)
    found = screen("t", unbatched, {}, pipeline=10)
    assert found.decision == MOVED and "server_writes_per_op +100.0%" in found.note
    assert screen("t", unbatched, {}).decision == NO_CHANGE          # a pipeline-1 screen does not judge them
    # runs that did not record them (Redis before 6.0): the screen cannot speak for the pipeline
    unrecorded = _screened_runs("baseline", reads=None, writes=None) + _screened_runs("comparison", reads=None,
                                                                                        writes=None)
    found = screen("t", unrecorded, {}, pipeline=10)
    assert found.decision == UNDECIDED and "no run recorded server_reads_per_op" in found.note
    # a window of fewer requests a connection than 2 pipelines: one burst, not the pipeline's batching
    for run in same:
        run.facts = {"instructions": {"requests_per_connection": 75}}
    found = screen("t", same, {}, pipeline=100)
    assert found.decision == UNDECIDED and "sent 75 requests a connection, fewer than 2 pipelines of 100" in found.note
    assert screen("t", same, {}, pipeline=10).decision == NO_CHANGE
    assert screen("t", same, {}, pipeline=37).decision == NO_CHANGE       # 2 pipelines and more: not a burst
    # ... unless a request costs so much that what pipelining saves it cannot show (GEOSEARCH, 58M)
    costly = _screened_runs("baseline", reads=0.4, writes=0.2, instructions=58e6) + \
        _screened_runs("comparison", reads=0.4, writes=0.2, instructions=58e6)
    for run in costly:
        run.facts = {"instructions": {"requests_per_connection": 2}}
    assert screen("t", costly, {}, pipeline=10).decision == NO_CHANGE


def test_a_gate_that_counts_pipelines_decides_them_by_counts_and_times_those_whose_system_calls_moved(tmp_path, tests):
    set_p10 = "quick-string-set-100B-pipeline-10"
    script = Script(log=tmp_path / "log.jsonl", values={
        set_p10: {"comparison": {"server_writes_per_op": 0.2, "server_cpu_us_per_op": 12.0}}})
    gate, store, session = a_gate(tmp_path, script, tests, [GET_P1, GET_P10, set_p10],
                                  settings=GateSettings(timed_runs=5, timed_max_runs=7, count_pipelines=True))
    result = gate.run()
    by_test = {v.test: v for v in result.verdicts}
    assert (by_test[GET_P10].verdict, by_test[GET_P10].decided_by, by_test[GET_P10].route) == (
        Verdict.NO_CHANGE, "counts", COUNT)
    assert (by_test[set_p10].verdict, by_test[set_p10].decided_by) == (Verdict.REGRESSION, "time")
    assert "server_writes_per_op +100.0%" in by_test[set_p10].why
    ran = jobs_run(script)
    assert (GET_P10, "time") not in ran and (set_p10, "time") in ran
    entry = next(t for t in result.document["tests"] if t["key"] == GET_P10)
    assert {"server_reads_per_op", "server_writes_per_op"} <= {m["metric"] for m in entry["counted"]["metrics"]}
    # the counted runner is told, so a pipelined screen's runs carry no "compare it by time" warning
    judged = {e["test"]: e["system_calls_judged"] for e in script.read()
              if e["event"] == "start" and e["measure"] == "instructions"}
    assert judged == {GET_P1: False, GET_P10: True, set_p10: True}, judged


def test_a_screen_only_gate_times_nothing_says_so_and_a_resume_without_it_confirms(tmp_path, tests):
    script = Script(log=tmp_path / "log.jsonl", values={
        HSET: {"comparison": {"instructions_per_op_command": 480.0, "server_cpu_us_per_op": 13.0}}})
    gate, store, first = a_gate(tmp_path, script, tests, [GET_P1, HSET, GET_P10],
                                settings=GateSettings(timed_runs=5, timed_max_runs=7, confirm=False))
    result = gate.run()
    assert not any(measure == "time" for _, measure in jobs_run(script))
    by_test = {v.test: v for v in result.verdicts}
    assert by_test[GET_P1].verdict == Verdict.NO_CHANGE
    for name in (HSET, GET_P10):
        assert by_test[name].verdict == NOT_MEASURED and "--screen-only" in by_test[name].why, by_test[name].why
    assert "counts moved" in by_test[HSET].why
    document = store.session_document(first, "gate")
    settings = GateSettings.resumed(document, duet=False)        # resumed without --screen-only
    assert settings.confirm
    # how pipelined tests are routed: the gate's own unless the resume says (--pipelines count|time)
    assert not settings.count_pipelines
    assert GateSettings.resumed(document, duet=False, pipelines="count").count_pipelines
    timed = dict(document, settings=dict(document["settings"], count_pipelines=True))
    assert GateSettings.resumed(timed, duet=False).count_pipelines
    assert not GateSettings.resumed(timed, duet=False, pipelines="time").count_pipelines
    resumed, store, _ = a_gate(tmp_path, script, tests, [GET_P1, HSET, GET_P10], settings=settings,
                               resumed=earlier_documents(store, first))
    again = {v.test: v for v in resumed.run().verdicts}
    assert again[HSET].verdict == Verdict.REGRESSION and again[HSET].decided_by == "time"


def test_a_change_of_system_calls_is_said_as_work_not_speed():
    from redline.output.gate_report import evidence, ratio_words
    writes = {"metric": "server_writes_per_op", "baseline_median": 0.1, "comparison_median": 0.2,
              "delta_pct": 100.0, "ci_low_pct": 100.0, "ci_high_pct": 100.0, "higher_is_better": False}
    assert ratio_words(writes) == "2.00× more writes/op"
    assert evidence(writes).endswith("writes/op")
