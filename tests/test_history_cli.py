"""`redline history`: stored sessions as a series per test, with change points."""

from redline.store import RunOutcome, Store


def _session(store: Store, ops: float, *, test: str = "t-set") -> None:
    session = store.begin_session(kind="run", argv=[], machine={})
    for index in range(3):
        run = store.begin_run(session_id=session, test=test, suite_file=None, target="bin:x", side=None,
                              run_index=index)
        value = ops * (1 + 0.002 * (index - 1))
        store.finish_run(run, RunOutcome(status="ok", metrics={"ops_per_sec": value}, series={}, facts={}))
    store.finish_session(session, "finished")


def test_history_finds_the_session_where_throughput_dropped(tmp_path, redline_cli):
    store = Store(tmp_path / "r.db")
    noise = [1.004, 0.997, 1.001, 0.999, 1.003, 0.996, 1.002, 0.998,
             1.0, 1.001, 0.997, 1.003, 0.998, 1.002, 0.999, 1.004]
    for i, factor in enumerate(noise):
        _session(store, 100_000 * factor * (0.9 if i >= 8 else 1.0))
    proc = redline_cli("history", "--store", tmp_path / "r.db", check_exit=0)
    assert "t-set" in proc.stdout and "16" in proc.stdout
    assert "session 9:" in proc.stdout and "-10." in proc.stdout    # the 9th session is the first at -10%


def test_history_of_an_unknown_test_is_a_usage_error(tmp_path, redline_cli):
    store = Store(tmp_path / "r.db")
    _session(store, 1000.0)
    proc = redline_cli("history", "--store", tmp_path / "r.db", "--name", "nothing", check_exit=2)
    assert "no stored runs with ops_per_sec" in proc.stderr
