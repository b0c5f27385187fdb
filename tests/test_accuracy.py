"""The accuracy runner's fast parts (redline/accuracy/): the corpus' schema and checks, the suite made
from an entry's command, the plan and its resume key, scoring, resume with an in-process measurer
(a real SQLite store), the table, and bad corpus entries refused by the command with one line
(FILE:LINE NAME: what, exit 2). Nothing here builds or starts a server; the end-to-end run is
tests/test_accuracy_cli.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from accuracy_helpers import catalogue, control, entry, git_repo, ranged, write_corpus
from redline.accuracy import plan as planning
from redline.accuracy import runner, scoring, table
from redline.accuracy.corpus import check_catalogue, check_schema, load_corpus
from redline.accuracy.history import Repository, check_history
from redline.accuracy.workloads import workload_of
from redline.analysis.stats import Verdict
from redline.cli import main
from redline.core.errors import RunError, UsageError
from redline.store.results import Store

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO / "accuracy" / "corpus.yaml"
UPSTREAM = REPO.parent / "shared" / "upstream-suites" / "test-suites"
REDIS_REPO = REPO.parent / "redis-repo"


def problems_of(tmp_path, entries) -> list[str]:
    return [str(p) for p in check_schema(load_corpus(write_corpus(tmp_path / "c.yaml", entries)))]


# -- the corpus -------------------------------------------------------------------------------------
def test_the_shipped_corpus_passes_the_schema():
    corpus = load_corpus(CORPUS)
    assert len(corpus.entries) == 76
    assert check_schema(corpus) == []


@pytest.mark.skipif(not UPSTREAM.is_dir(), reason=f"upstream catalogue not at {UPSTREAM}")
def test_the_shipped_corpus_names_only_catalogue_suites():
    assert check_catalogue(load_corpus(CORPUS), UPSTREAM) == []


@pytest.mark.skipif(not (REDIS_REPO / ".git").exists(), reason=f"no redis clone at {REDIS_REPO}")
def test_the_shipped_corpus_matches_the_redis_history():
    assert check_history(load_corpus(CORPUS), Repository(REDIS_REPO)) == []


def test_a_valid_entry_has_no_problem(tmp_path):
    assert problems_of(tmp_path, [entry(), control(), ranged()]) == []


@pytest.mark.parametrize("change, field, message", [
    ({"source": None}, None, "the claim has no source"),
    ({"source": {"url": "https://github.com/redis/redis/pull/1"}}, "source", "source needs pr or issue"),
    ({"claim": " "}, "claim", "the entry has no claim"),
    ({"commit": "abc"}, "commit", "commit is not a full 40-hex sha"),
    ({"kind": "speedup"}, "kind", "kind 'speedup' not in"),
    ({"countable": False}, "countable", "countable must be true when the effect lives in command-execution"),
    ({"expected": {"sign": "slower", "metric": "throughput", "ratio": None, "note": "x"}}, "expected",
     "does not fit kind improvement"),
    ({"expected": {"sign": "faster", "metric": "throughput", "ratio": [0.9, 1.1]}}, "expected", "must lie above 1"),
    ({"weak": True}, "weak", "a weak entry needs weak_reason"),
    ({"suites": None}, None, "needs suites or a command"),
    ({"colour": "red"}, "colour", "unknown field 'colour'"),
    ({"variant": "no-such-variant"}, "variant", "unknown build variant"),
    ({"command": "memtier_benchmark --command PING", "prepare": {"from_suite": "x", "init_lua": "return 1"}},
     "prepare", "either from_suite or its own"),
])
def test_each_schema_problem_names_the_entry_and_the_line(tmp_path, change, field, message):
    path = write_corpus(tmp_path / "c.yaml", [control(), entry("broken", **change)])
    corpus = load_corpus(path)
    problems = check_schema(corpus)
    assert problems, change
    broken = corpus.entries[1]
    line = broken.line_of(field) if field else broken.line
    assert any(p.name == "broken" and p.line == line and message in p.message for p in problems), problems
    assert str(problems[0]).startswith(f"{path}:{problems[0].line} broken: ")


def test_a_name_used_twice_is_a_problem(tmp_path):
    assert any("name already used at line" in p for p in problems_of(tmp_path, [entry(), entry()]))


def test_history_and_catalogue_checks(tmp_path):
    shas = git_repo(tmp_path / "repo", 4)
    cat = catalogue(tmp_path / "cat", "suite-a")
    entries = [entry("ok", commit=shas[1], parent=shas[0]),
               entry("missing", commit="f" * 40, parent=shas[0]),
               entry("not-first-parent", commit=shas[2], parent=shas[0]),
               entry("bad-suite", commit=shas[1], parent=shas[0], suites=["suite-a", "no-such-suite"]),
               ranged("range-ok", good=shas[0], bad=shas[3], culprits=[shas[2]]),
               ranged("range-backwards", good=shas[3], bad=shas[0], culprits=[shas[2]]),
               ranged("range-outside", good=shas[1], bad=shas[3], culprits=[shas[1]])]
    corpus = load_corpus(write_corpus(tmp_path / "c.yaml", entries))
    found = [str(p) for p in check_history(corpus, Repository(tmp_path / "repo")) + check_catalogue(corpus, cat)]
    by_name = {name: [p for p in found if f" {name}: " in p] for name in [e["name"] for e in entries]}
    assert not by_name["ok"] and not by_name["range-ok"]
    assert "commit ffffffffffffffffffffffffffffffffffffffff does not exist" in by_name["missing"][0]
    assert "is not the first parent of" in by_name["not-first-parent"][0]
    assert "suite no-such-suite is not in the catalogue" in by_name["bad-suite"][0]
    assert "is not an ancestor of bad" in by_name["range-backwards"][0]
    assert "is not on bad's first-parent line after good" in by_name["range-outside"][0]


# -- bad entries refused by the command: one line, FILE:LINE NAME, exit 2 ----------------------------
@pytest.mark.parametrize("case", ["commit", "suite", "source"])
def test_the_command_refuses_a_bad_entry_with_its_name_and_line(tmp_path, capsys, case):
    shas = git_repo(tmp_path / "repo", 2)
    cat = catalogue(tmp_path / "cat", "suite-a")
    good = entry("fine", commit=shas[1], parent=shas[0])
    bad = {"commit": entry("bad-one", commit="e" * 40, parent=shas[0]),
           "suite": entry("bad-one", commit=shas[1], parent=shas[0], suites=["not-in-catalogue"]),
           "source": entry("bad-one", commit=shas[1], parent=shas[0], source=None)}[case]
    path = write_corpus(tmp_path / "c.yaml", [good, bad])
    line = load_corpus(path).entries[1].line_of({"commit": "commit", "suite": "suites", "source": None}[case])
    code = main(["accuracy", str(path), "--repository", str(tmp_path / "repo"), "--catalogue", str(cat),
                 "--store", str(tmp_path / "a.db")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith(f"redline: error: {path}:{line} bad-one: "), err
    assert {"commit": "does not exist", "suite": "is not in the catalogue", "source": "no source"}[case] in err[0]
    assert not (tmp_path / "a.db").exists()          # refused before anything was opened or built


def test_check_lists_every_problem(tmp_path, capsys):
    cat = catalogue(tmp_path / "cat", "suite-a")
    path = write_corpus(tmp_path / "c.yaml", [entry("one", source=None), entry("two", suites=["nope"])])
    with pytest.raises(SystemExit) as exit_:
        main(["accuracy", str(path), "--catalogue", str(cat), "--check"])
    out = capsys.readouterr().out
    assert exit_.value.code == 2 and " one: " in out and " two: " in out and "2 problem(s) in 2 entries" in out


# -- the suite made from a command --------------------------------------------------------------------
def _workload(tmp_path, **fields):
    cat = catalogue(tmp_path / "cat", "suite-a")
    corpus = load_corpus(write_corpus(tmp_path / "c.yaml", [entry("cmd", **fields)]))
    return workload_of(corpus.entries[0], cat, tmp_path / "work")


def test_a_command_becomes_a_suite_checked_by_the_loader(tmp_path):
    w = _workload(tmp_path, suites=None, command='memtier_benchmark --command "ZINTERCARD 2 a b" -c 5 -t 1 --test-time 60',
                  prepare={"init_lua": "redis.call('ZADD', 'a', 1, 'x') redis.call('ZADD', 'b', 1, 'x')",
                           "keyspacelen": 2}, config={"slowlog-max-len": "128"})
    assert w.refused is None and len(w.tests) == 1
    test = w.tests[0]
    assert test.name == "accuracy-cmd" and test.tested_commands == ["zintercard"]
    assert test.db.init_lua and test.db.keyspacelen == 2
    assert test.client.workload.commands == [["ZINTERCARD", "2", "a", "b"]]


def test_prepare_from_suite_borrows_that_suites_preparation(tmp_path):
    cat = catalogue(tmp_path / "cat", "suite-a")
    (cat / "prepared.yml").write_text((cat / "suite-a.yml").read_text().replace("keyspacelen: 0", "keyspacelen: 7")
                                      .replace("name: suite-a", "name: prepared"))
    corpus = load_corpus(write_corpus(tmp_path / "c.yaml", [entry("cmd", suites=None, command="memtier_benchmark --command 'GET k'",
                                                                  prepare={"from_suite": "prepared"})]))
    w = workload_of(corpus.entries[0], cat, tmp_path / "work")
    assert w.refused is None and w.tests[0].db.keyspacelen == 7


@pytest.mark.parametrize("fields, reason", [
    ({"command": "redis-benchmark -n 10 punsubscribe a b", "prepare": "empty"}, "runs redis-benchmark, not memtier_benchmark"),
    ({"command": 'memtier_benchmark --command "SADD s m1 m2 ... m1000"', "prepare": "empty"}, "abbreviated"),
    ({"command": "memtier_benchmark --command 'GET k'", "dataset": "a MONITOR client attached"},
     "described only in prose (a MONITOR client attached)"),
    ({"command": "memtier_benchmark --command 'GET k' --pipeline 0", "prepare": "empty"}, "pipeline"),
    ({"command": "memtier_benchmark --command 'GET k'", "prepare": "empty", "topology": "a cluster of 100 nodes"},
     "unknown topology"),
])
def test_what_cannot_run_here_is_refused_with_the_reason(tmp_path, fields, reason):
    w = _workload(tmp_path, suites=None, **fields)
    assert w.refused and reason in w.refused and not w.tests


def test_a_command_that_cannot_run_beside_suites_is_a_note(tmp_path):
    w = _workload(tmp_path, command='memtier_benchmark --command "SADD s m1 ... m1000"', prepare="empty")
    assert w.refused is None and [t.name for t in w.tests] == ["suite-a"]
    assert "its command is not measured" in w.notes[0]


# -- the plan -------------------------------------------------------------------------------------------
def _entry(tmp_path, **fields):
    return load_corpus(write_corpus(tmp_path / "c.yaml", [entry("e", **fields)])).entries[0]


def test_how_an_entry_is_measured(tmp_path):
    countable = _entry(tmp_path)
    assert planning.kinds(countable, "oss-standalone", planning.AUTO) == {"counted": None}
    assert planning.kinds(countable, "oss-standalone", planning.BOTH) == {"counted": None, "timed": None}
    assert planning.primary_kind(countable, "oss-cluster-3-primaries") == "timed"
    assert "counts one server process" in planning.kinds(countable, "oss-cluster-3-primaries", "counted")["counted"]
    assert planning.metric_of(countable, "counted") == "instructions_per_op_command"
    assert planning.metric_of(countable, "timed") == "server_cpu_us_per_op"
    outside = _entry(tmp_path, effect_lives_in="per-request-overhead")
    assert planning.metric_of(outside, "counted") == "instructions_per_op"
    syscalls = _entry(tmp_path, effect_lives_in="syscalls", countable=False)
    assert planning.kinds(syscalls, "oss-standalone", planning.AUTO) == {"timed": None}
    assert planning.variant_of(_entry(tmp_path, variant="libc-malloc"), planning.Settings()) == "libc-malloc"
    assert planning.variant_of(countable, planning.Settings(variant="O3-lto")) == "O3-lto"


def test_strong_entries_and_controls_first_then_ranges_then_weak(tmp_path):
    corpus = load_corpus(write_corpus(tmp_path / "c.yaml", [
        entry("weak-one", weak=True, weak_reason="x"), ranged("range-one"), entry("strong-1"), entry("strong-2"),
        entry("strong-3"), entry("strong-4"), control("control-1"), control("control-2")]))
    assert [e.name for e in planning.order(corpus.entries)] == [
        "strong-1", "control-1", "strong-2", "strong-3", "control-2", "strong-4", "range-one", "weak-one"]


def test_the_resume_key_follows_what_is_measured_not_what_is_claimed(tmp_path):
    settings = planning.Settings()
    key = planning.resume_key(_entry(tmp_path), "counted", settings, ["suite text"])
    assert key == planning.resume_key(_entry(tmp_path, claim="other words"), "counted", settings, ["suite text"])
    assert key == planning.resume_key(_entry(tmp_path, expected={"sign": "faster", "metric": "throughput",
                                                                "ratio": [1.2, 1.3]}), "counted", settings, ["suite text"])
    for other in (planning.resume_key(_entry(tmp_path, commit="9" * 40), "counted", settings, ["suite text"]),
                  planning.resume_key(_entry(tmp_path, suites=["suite-b"]), "counted", settings, ["suite text"]),
                  planning.resume_key(_entry(tmp_path), "counted", settings, ["edited suite text"]),
                  planning.resume_key(_entry(tmp_path), "timed", settings, ["suite text"]),
                  planning.resume_key(_entry(tmp_path), "counted", planning.Settings(counted_runs=5), ["suite text"]),
                  planning.resume_key(_entry(tmp_path), "counted", planning.Settings(variant="libc-malloc"), ["suite text"])):
        assert other != key
    # --scale scales generated datasets only: it moves the key only where a test has one
    plain = planning.resume_key(_entry(tmp_path), "counted", settings, ["suite text"], generated=False)
    assert planning.resume_key(_entry(tmp_path), "counted", planning.Settings(scale=0.1), ["suite text"],
                               generated=False) == plain
    assert planning.resume_key(_entry(tmp_path), "counted", planning.Settings(scale=0.1), ["suite text"]) != key


# -- scoring ----------------------------------------------------------------------------------------------
def _doc(tests: dict, metric="instructions_per_op_command", bisection=None) -> dict:
    return {"status": "measured", "metric": metric, "session": 1, "tests": tests, "bisection": bisection, "notes": []}


def _t(verdict, delta, low=None, high=None, **more):
    return {"verdict": verdict, "delta_pct": delta, "ci_low_pct": delta - 1 if low is None else low,
            "ci_high_pct": delta + 1 if high is None else high, "tau_pct": 1.0, "min_detectable_pct": 3.0, **more}


def _row(tmp_path, e: dict, document=None, **kw):
    loaded = load_corpus(write_corpus(tmp_path / "s.yaml", [e])).entries[0]
    return scoring.row_for(loaded, kw.pop("measure", "counted"), primary=True, document=document, **kw)


def test_an_improvement_found_with_the_right_sign_within_its_band(tmp_path):
    # instructions fell 8.3%: a speed ratio of 1/(1-0.083) = 1.09, inside [1.049, 1.154]
    row = _row(tmp_path, entry(), _doc({"t1": _t(Verdict.NO_CHANGE, 0.2), "t2": _t(Verdict.IMPROVEMENT, -8.3)}))
    assert (row.sign, row.test, row.band) == ("right", "t2", "within") and row.speed == pytest.approx(1.0905, abs=1e-3)
    assert row.why is None


def test_the_band_is_met_when_one_test_that_found_the_change_measured_its_size(tmp_path):
    row = _row(tmp_path, entry(), _doc({"t1": _t(Verdict.IMPROVEMENT, -40.0), "t2": _t(Verdict.IMPROVEMENT, -8.3),
                                        "t3": _t(Verdict.IMPROVEMENT, -2.0)}))
    assert (row.band, row.test) == ("within", "t2")
    above = _row(tmp_path, entry(), _doc({"t1": _t(Verdict.IMPROVEMENT, -40.0), "t2": _t(Verdict.IMPROVEMENT, -30.0)}))
    assert (above.band, above.test) == ("above", "t1")


def test_outside_the_band_says_where_the_claim_was_measured(tmp_path):
    e = entry(expected={"sign": "faster", "metric": "throughput", "ratio": [1.049, 1.154], "note": "on 64 cores"})
    row = _row(tmp_path, e, _doc({"t": _t(Verdict.IMPROVEMENT, -2.0)}))
    assert (row.sign, row.band) == ("right", "below") and "on 64 cores" in row.why


def test_a_timed_rate_is_a_speed_ratio_as_it_is(tmp_path):
    assert scoring.speed_ratio("ops_per_sec", 10.0) == pytest.approx(1.10)
    assert scoring.speed_ratio("server_cpu_us_per_op", -10.0) == pytest.approx(1 / 0.9)


def test_wrong_sign_missed_and_no_number(tmp_path):
    wrong = _row(tmp_path, entry(), _doc({"t1": _t(Verdict.IMPROVEMENT, -9), "t2": _t(Verdict.REGRESSION, 3)}))
    assert (wrong.sign, wrong.test) == ("wrong", "t2") and "against the claim" in wrong.why
    missed = _row(tmp_path, entry(), _doc({"t": _t(Verdict.NO_CHANGE, 0.1)}))
    assert missed.sign == "missed" and "may not exercise the path" in missed.why
    unsure = _row(tmp_path, entry(), _doc({"t": _t(Verdict.INCONCLUSIVE, -1.5)}))
    assert unsure.sign == "missed" and "smallest change these runs could show is 3.0%" in unsure.why
    no_number = entry(expected={"sign": "faster", "metric": "throughput", "ratio": None, "note": "none"})
    assert _row(tmp_path, no_number, _doc({"t": _t(Verdict.IMPROVEMENT, -5)})).band == "no number"
    regression = entry(kind="regression", expected={"sign": "slower", "metric": "throughput", "ratio": [0.8, 0.95]})
    assert _row(tmp_path, regression, _doc({"t": _t(Verdict.REGRESSION, 10)})).band == "within"


def test_an_effect_a_count_cannot_see_is_explained(tmp_path):
    e = entry(effect_lives_in="syscalls", countable=False)
    row = _row(tmp_path, e, _doc({"t": _t(Verdict.NO_CHANGE, 0.0)}, metric="instructions_per_op"))
    assert "the effect lives in syscalls, measured here by counts" in row.why


def test_controls_any_verdict_of_change_is_false(tmp_path):
    silent = _row(tmp_path, control(), _doc({"t1": _t(Verdict.NO_CHANGE, 0.1), "t2": _t(Verdict.INCONCLUSIVE, 2)}))
    assert silent.sign == "silent" and silent.band is None
    other_metric = _doc({"t1": {**_t(Verdict.NO_CHANGE, 0.1), "changes": {"est_cycles_per_op": "regression"}}})
    assert _row(tmp_path, control(), other_metric).sign == "false verdict"


def test_skipped_tests_and_states(tmp_path):
    skipped = _row(tmp_path, entry(), _doc({"t": {"skipped": "needs 4 cores"}}))
    assert skipped.sign is None and skipped.why == "not measured here: needs 4 cores"
    assert _row(tmp_path, entry(), None).status == "pending"
    assert _row(tmp_path, entry(), refused="redis-benchmark").status == "refused"
    assert _row(tmp_path, entry(), {"status": "failed", "error": "does not build"}).reason == "does not build"


def test_culprits(tmp_path):
    culprit, mover, other = "5" * 40, "6" * 40, "7" * 40
    e = ranged(other_movers=[mover], culprits=[culprit])
    base = {"t": _t(Verdict.IMPROVEMENT, -30)}

    def judged(**bisection):
        return _row(tmp_path, e, _doc(base, bisection={"culprit": None, "candidates": [], "no_change": False,
                                                        "too_close": {}, **bisection}))
    right = judged(culprit=culprit, culprit_change={"t": _t(Verdict.IMPROVEMENT, -8.3)})
    assert right.culprit == "right" and right.band == "within"      # the band judges the culprit's own step
    assert judged(culprit=mover).culprit == "other mover"
    assert judged(culprit=other).culprit == "wrong"
    assert "ends of the range showed no change" in judged(no_change=True).why
    assert "one of 2 commits" in judged(candidates=[other, culprit]).why


def test_a_bisection_is_summarised_and_scored(tmp_path):
    """The range plumbing on a real search over simulated counts (redline.bisect.simulation): 20
    commits, the 13th adds 30% of instructions."""
    from redline.bisect import search
    from redline.bisect.measure import CountedComparer
    from redline.bisect.simulation import SimulatedCounter, commit_line
    good, path = commit_line(20)
    comparer = CountedComparer(SimulatedCounter(good, path, culprit=12, step=1.3), metric="instructions_per_op",
                               endpoint_runs=3)
    tests, bisection = runner.bisection_summary(search.bisect(comparer, good, path, ["t"]))
    assert tests["t"]["verdict"] == Verdict.REGRESSION and bisection["culprit"] == path[12].sha
    e = ranged(kind="regression", good=good.sha, bad=path[-1].sha, culprits=[path[12].sha], other_movers=[path[3].sha],
               expected={"sign": "slower", "metric": "cpu_per_op", "ratio": [0.7, 0.85]})
    row = _row(tmp_path, e, _doc(tests, metric="instructions_per_op", bisection=bisection))
    assert (row.sign, row.culprit, row.band) == ("right", "right", "within"), row
    assert row.speed == pytest.approx(1 / 1.3, rel=0.03)      # the culprit's own step


def test_scores_and_targets(tmp_path):
    rows = [_row(tmp_path, entry("a"), _doc({"t": _t(Verdict.IMPROVEMENT, -8.3)})),
            _row(tmp_path, entry("b"), _doc({"t": _t(Verdict.NO_CHANGE, 0)})),
            _row(tmp_path, entry("c"), None),
            _row(tmp_path, entry("w", weak=True, weak_reason="x"), _doc({"t": _t(Verdict.REGRESSION, 5)})),
            _row(tmp_path, control("k"), _doc({"t": _t(Verdict.NO_CHANGE, 0)})),
            _row(tmp_path, ranged("r"), _doc({"t": _t(Verdict.IMPROVEMENT, -9)},
                                             bisection={"culprit": "5" * 40})),
            scoring.row_for(load_corpus(write_corpus(tmp_path / "x.yaml", [entry("x")])).entries[0], "timed",
                            primary=False, document=_doc({"t": _t(Verdict.REGRESSION, 9)}, metric="server_cpu_us_per_op"))]
    scores = scoring.score(rows)
    assert (scores.strong.measured, scores.strong.right, scores.strong.missed, scores.strong.not_measured) == (3, 2, 1, 1)
    assert (scores.strong.banded, scores.strong.within) == (2, 2)
    assert (scores.weak.measured, scores.weak.wrong) == (1, 1)          # scored apart: not in the strong targets
    assert (scores.controls_measured, scores.false_verdicts) == (1, 0)
    assert (scores.ranges_bisected, scores.culprits_right) == (1, 1)
    assert scores.targets == {"found_90": False, "none_wrong": True, "controls_silent": True, "culprits_right": True}


# -- resume -------------------------------------------------------------------------------------------------
class FakeMeasurer:
    """Measures in-process: a session in the store per job, verdicts from a table."""

    def __init__(self, store: Store, verdicts: dict[str, tuple[str, float]], fail: set[str] = frozenset(),
                 refuse: set[str] = frozenset()):
        self.store, self.verdicts, self.fail, self.refuse, self.measured = store, verdicts, set(fail), set(refuse), []

    def measure(self, job, *, on_session):
        self.measured.append(job.entry.name)
        session = self.store.begin_session(kind="compare", argv=["fake"], machine={"cpu_model": "fake", "cores": 2})
        on_session(session)
        if job.entry.name in self.fail:
            raise RunError(f"git:{job.entry.commit[:12]} does not build\nlog tail")
        if job.entry.name in self.refuse:
            raise UsageError("server configuration nope: the binary has no such configuration parameter")
        verdict, delta = self.verdicts[job.entry.name]
        return runner.Measured(session, {test.name: _t(verdict, delta) for test in job.tests})


def _planned(tmp_path, entries, store, settings=planning.Settings()):
    cat = catalogue(tmp_path / "cat", "suite-a", "suite-b")
    corpus = load_corpus(write_corpus(tmp_path / "c.yaml", entries))
    return corpus, runner.plan_corpus(corpus, corpus.entries, settings, catalogue=cat, workdir=tmp_path / "work",
                                      documents=runner.stored_documents(store))


def _jobs(planned):
    return [job for _, jobs in planned for job in jobs if not job.refused]


def test_a_second_run_resumes_and_an_edited_entry_is_measured_again(tmp_path):
    store = Store(tmp_path / "a.db")
    entries = [entry("one"), entry("two"), control("three"), entry("four", command="redis-benchmark -n 1 ping")]
    verdicts = {"one": (Verdict.IMPROVEMENT, -9.0), "two": (Verdict.NO_CHANGE, 0.1), "three": (Verdict.NO_CHANGE, 0.0),
                "four": (Verdict.IMPROVEMENT, -9.0)}
    corpus, planned = _planned(tmp_path, entries, store)
    first = FakeMeasurer(store, verdicts, fail={"two"}, refuse={"three"})
    said = []
    written = runner.measure(_jobs(planned), store=store, measurer=first, say=said.append)
    assert first.measured == ["one", "two", "three", "four"]       # four runs its suite; its command is a note
    assert [d["status"] for d in written.values()] == ["measured", "failed", "failed", "measured"]
    assert any("two (counted): failed: git:" in line for line in said)
    assert any("three (counted): failed: server configuration nope" in line for line in said)   # the run went on

    again = FakeMeasurer(store, verdicts)                   # resumes: only the failed ones again
    runner.measure(_jobs(_planned(tmp_path, entries, store)[1]), store=store, measurer=again, say=said.append)
    assert again.measured == ["two", "three"] and any("one (counted): measured before (session" in line for line in said)

    entries[0] = entry("one", suites=["suite-a", "suite-b"])   # what is measured changed: measured again
    entries[2] = control("three", claim="reworded")             # only the claim changed: not measured again
    third = FakeMeasurer(store, verdicts)
    corpus, planned = _planned(tmp_path, entries, store)
    runner.measure(_jobs(planned), store=store, measurer=third, say=said.append)
    assert third.measured == ["one"]
    fourth = FakeMeasurer(store, {**verdicts, "one": (Verdict.NO_CHANGE, 0.2)})     # after a fix in redline
    runner.measure([j for j in _jobs(planned) if j.entry.name == "one"], store=store, measurer=fourth,
                   say=said.append, again=True)
    assert fourth.measured == ["one"]
    rows = runner.rows(planned, runner.stored_documents(store))     # the latest measurement counts
    assert rows[0].sign == "missed"
    runner.measure([j for j in _jobs(planned) if j.entry.name == "one"], store=store, measurer=third, say=said.append,
                   again=True)
    rows = runner.rows(planned, runner.stored_documents(store))
    assert [(r.name, r.status, r.sign) for r in rows] == [("one", "measured", "right"), ("two", "measured", "missed"),
                                                          ("three", "measured", "silent"), ("four", "measured", "right")]
    assert "its command is not measured" in rows[3].why


def test_an_entry_another_run_measured_meanwhile_is_not_measured_again(tmp_path):
    store = Store(tmp_path / "a.db")
    _, planned = _planned(tmp_path, [entry("one"), entry("two")], store)
    jobs = _jobs(planned)
    runner.measure(jobs[1:], store=Store(tmp_path / "a.db"), measurer=FakeMeasurer(store, {"two": (Verdict.NO_CHANGE, 0)}),
                   say=lambda line: None)                   # a second run on the same store, after this one planned
    fake = FakeMeasurer(store, {"one": (Verdict.IMPROVEMENT, -9)})
    runner.measure(jobs, store=store, measurer=fake, say=lambda line: None)
    assert fake.measured == ["one"]


def test_a_stale_measurement_shows_as_pending_with_the_reason(tmp_path):
    store = Store(tmp_path / "a.db")
    _, planned = _planned(tmp_path, [entry("one")], store)
    runner.measure(_jobs(planned), store=store, measurer=FakeMeasurer(store, {"one": (Verdict.IMPROVEMENT, -9)}),
                   say=lambda line: None)
    _, planned = _planned(tmp_path, [entry("one", commit="9" * 40)], store)
    row = runner.rows(planned, runner.stored_documents(store))[0]
    assert row.status == "pending" and "changed since" in row.reason


def test_refused_jobs_are_not_measured(tmp_path):
    store = Store(tmp_path / "a.db")
    _, planned = _planned(tmp_path, [entry("r", suites=None, command="redis-benchmark -n 1 ping")], store)
    fake = FakeMeasurer(store, {})
    said = []
    runner.measure([job for _, jobs in planned for job in jobs], store=store, measurer=fake, say=said.append)
    assert fake.measured == [] and "not run here: the command runs redis-benchmark" in said[0]


# -- the table ----------------------------------------------------------------------------------------------
def test_the_table_replaces_its_part_of_a_page_and_lists_pending_rows(tmp_path):
    rows = [_row(tmp_path, entry("found"), _doc({"t": _t(Verdict.IMPROVEMENT, -8.3)})),
            _row(tmp_path, entry("later"), None),
            _row(tmp_path, entry("elsewhere"), refused="the command runs redis-benchmark")]
    text = table.markdown(rows, scoring.score(rows), machines=[{"cpu_model": "X", "cores": 2, "kernel": "6.1",
                                                                "load_avg": [3.0, 2, 1]}], command="redline accuracy …")
    assert "| found | improvement | counted |" in text and "-8.3% [-9.3%, -7.3%]" in text
    assert re.search(r"\| later \| .* \| pending \|", text) and "the command runs redis-benchmark" in text
    assert "Machine: X, 2 cores, Linux 6.1" in text and "Measured: 1 of 3 entries" in text
    page = tmp_path / "accuracy.md"
    page.write_text(f"# Accuracy\n\nprose before\n\n{table.BEGIN}\nold\n{table.END}\n\nprose after\n")
    table.write_markdown(page, text)
    written = page.read_text()
    assert written.startswith("# Accuracy\n\nprose before") and written.endswith("prose after\n")
    assert "old" not in written and written.count(table.BEGIN) == 1


def test_again_needs_the_entries_named(tmp_path, capsys):
    cat = catalogue(tmp_path / "cat", "suite-a")
    path = write_corpus(tmp_path / "c.yaml", [entry("one")])
    assert main(["accuracy", str(path), "--catalogue", str(cat), "--again", "--table-only"]) == 2
    assert "--again measures entries again: name them with --only REGEX" in capsys.readouterr().err


def test_a_missed_change_whose_timed_runs_stopped_as_futile_says_so_in_its_result():
    import numpy as np
    from redline.analysis.comparison import TestComparison
    from redline.analysis.stats import compare_metric, confidence_per_look
    base = np.full(9, 10.0)
    spread = np.array([1.05, 0.97, 1.04, 0.98, 1.01, 0.965, 1.045, 0.975, 1.03])
    result = compare_metric(base, base * spread, paired=True, higher_is_better=False,
                            confidence=confidence_per_look(5), runs_allowed=15)
    found = runner.test_results([TestComparison("t", "server_cpu_us_per_op", result)], [], "server_cpu_us_per_op")
    assert found["t"]["verdict"] == Verdict.INCONCLUSIVE and "chance to decide" in found["t"]["note"]
