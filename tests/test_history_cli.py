"""`redline history`: stored sessions as a series per test, change points and the builds around them."""

import json

from redline.core.run import Run
from redline.store.results import Store

BUILD_A = {"version": "7.0.15", "git_sha1": "00000000", "git_dirty": "0", "build_id": "aaaa1111",
           "binary_sha256": "a" * 64}
BUILD_B = {**BUILD_A, "build_id": "bbbb2222", "binary_sha256": "b" * 64}
COMMIT = {"version": "7.0.7", "git_sha1": "1e2f3a4b", "git_dirty": "0", "build_id": "cc", "binary_sha256": "c" * 64,
          "commit": {"sha": "1e2f3a4b" + "0" * 32, "subject": "Speed up GEOSEARCH", "date": "2022-12-16T10:00:00+02:00"}}


def _session(store: Store, ops: float, *, test: str = "t-set", identity: dict | None = None,
             runs: int = 3, target: str = "bin:x") -> None:
    session = store.begin_session(kind="run", argv=[], machine={})
    for index in range(runs):
        run = Run(test=test, target=target, side=None, run_index=index, session_id=session)
        store.run_started(run)
        run.metrics = {"ops_per_sec": ops * (1 + 0.002 * (index - 1))}
        run.facts = {"identity": identity, "server_version": "7.0.15"} if identity else {}
        run.finish("ok")
        store.run_finished(run)
    store.finish_session(session, "finished")


NOISE = [1.004, 0.997, 1.001, 0.999, 1.003, 0.996, 1.002, 0.998, 1.0, 1.001, 0.997, 1.003, 0.998, 1.002, 0.999, 1.004]


def test_history_finds_the_session_where_throughput_dropped(tmp_path, redline_cli):
    store = Store(tmp_path / "r.db")
    for i, factor in enumerate(NOISE):
        _session(store, 100_000 * factor * (0.9 if i >= 8 else 1.0))
    proc = redline_cli("history", "--store", tmp_path / "r.db", check_exit=0)
    assert "t-set" in proc.stdout and "16" in proc.stdout
    assert "session 9 (" in proc.stdout and "-10." in proc.stdout    # the 9th session is the first at -10%
    assert "builds unknown" in proc.stdout                           # runs without recorded builds


def test_history_names_the_builds_around_each_change_and_writes_json(tmp_path, redline_cli):
    store = Store(tmp_path / "r.db")
    for i, factor in enumerate(NOISE[:9]):
        identity = BUILD_A if i < 3 else BUILD_B if i < 6 else COMMIT
        _session(store, 100_000 * factor * (1.0 if i < 3 else 0.8 if i < 6 else 1.3), identity=identity)
    out = tmp_path / "history.json"
    proc = redline_cli("history", "--store", tmp_path / "r.db", "--json", out, check_exit=0)
    text = proc.stdout
    assert "session 4 (" in text and "session 7 (" in text, text
    assert "before: version 7.0.15, build id aaaa1111, sha256 aaaaaaaaaaaa" in text
    assert "after:  version 7.0.15, build id bbbb2222, sha256 bbbbbbbbbbbb" in text
    assert 'after:  commit 1e2f3a4b0000 "Speed up GEOSEARCH" (2022-12-16)' in text
    document = json.loads(out.read_text())
    [series] = document["series"]
    assert (series["test"], series["target"]) == ("t-set", "bin:x")
    assert [p["session"] for p in series["points"]] == list(range(1, 10))
    assert all(len(p["runs"]) == 3 for p in series["points"])
    assert series["points"][0]["identity"] == BUILD_A
    first, second = series["change_points"]
    assert (first["session"], first["last_session_before"]) == (4, 3)
    assert first["build_before"] == BUILD_A and first["build_after"] == BUILD_B and first["same_build"] is False
    assert -22 < first["delta_pct"] < -18 and first["p_value"] <= 0.001
    assert second["build_after"]["commit"]["subject"] == "Speed up GEOSEARCH"
    assert series["noise"]["within_pct"] < 1


def test_a_change_without_a_new_build_says_so(tmp_path, redline_cli):
    store = Store(tmp_path / "r.db")
    for i, factor in enumerate(NOISE[:8]):
        _session(store, 100_000 * factor * (0.85 if i >= 4 else 1.0), identity=BUILD_A)
    proc = redline_cli("history", "--store", tmp_path / "r.db", check_exit=0)
    assert "session 5 (" in proc.stdout and "same build on both sides" in proc.stdout


def test_short_series_state_what_the_method_needs(tmp_path, redline_cli):
    store = Store(tmp_path / "r.db")
    for factor in NOISE[:3]:
        _session(store, 1000.0 * factor)
    proc = redline_cli("history", "--store", tmp_path / "r.db", check_exit=0)
    assert "needs 4 sessions (2 on each side" in " ".join(proc.stdout.split())


def test_history_of_an_unknown_test_is_a_usage_error(tmp_path, redline_cli):
    store = Store(tmp_path / "r.db")
    _session(store, 1000.0)
    proc = redline_cli("history", "--store", tmp_path / "r.db", "--name", "nothing", check_exit=2)
    assert "no stored runs with ops_per_sec" in proc.stderr


def test_bad_history_options_are_usage_errors(tmp_path, redline_cli):
    store = Store(tmp_path / "r.db")
    _session(store, 1000.0)
    proc = redline_cli("history", "--store", tmp_path / "r.db", "--p-value", "2", check_exit=2)
    assert "--p-value 2: a significance level is between 0 and 1" in proc.stderr
    proc = redline_cli("history", "--store", tmp_path / "r.db", "--json", tmp_path / "missing" / "h.json",
                       check_exit=2)
    assert "--json" in proc.stderr and "cannot write there" in proc.stderr and "Traceback" not in proc.stderr


def test_a_change_one_session_after_the_build_changed_points_at_that_build(tmp_path, redline_cli):
    store = Store(tmp_path / "r.db")
    for i, factor in enumerate(NOISE[:10]):  # build B from the 5th session, the cost only from the 6th
        _session(store, 100_000 * factor * (0.8 if i >= 5 else 1.0), identity=BUILD_A if i < 4 else BUILD_B)
    out = tmp_path / "h.json"
    proc = redline_cli("history", "--store", tmp_path / "r.db", "--json", out, check_exit=0)
    text = " ".join(proc.stdout.split())
    assert "session 6 (" in text and "same build on both sides" in text
    assert ("the nearest build change is at session 5 (1 session earlier): before: version 7.0.15, "
            "build id aaaa1111, sha256 aaaaaaaaaaaa after: version 7.0.15, build id bbbb2222") in text
    [cp] = json.loads(out.read_text())["series"][0]["change_points"]
    assert cp["same_build"] is True and cp["nearest_build_change"] == 5
