"""scripts/gate_benchmark.py's reading of a stored gate: when each verdict was reached, in hours of
gate wall time over every session (what the first N hours of a gate decide)."""

import importlib.util
import sqlite3
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "gate_benchmark.py"
spec = importlib.util.spec_from_file_location("gate_benchmark", SCRIPT)
gate_benchmark = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gate_benchmark)

T0 = 1_800_000_000.0


def a_store(path: Path, sessions: dict[int, float], runs: list[tuple[str, int, float]]) -> Path:
    """A real SQLite store with the two tables the reading uses: sessions (id, start) and runs
    (uid, session, end)."""
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE sessions (id INTEGER PRIMARY KEY, started_at REAL NOT NULL)")
    db.execute("CREATE TABLE runs (uid TEXT, session_id INTEGER, started_at REAL, finished_at REAL)")
    db.executemany("INSERT INTO sessions VALUES (?, ?)", sessions.items())
    db.executemany("INSERT INTO runs VALUES (?, ?, ?, ?)", [(uid, s, end - 10, end) for uid, s, end in runs])
    db.commit()
    return path


def a_test(key, verdict, decided_by, stages):
    return {"key": key, "verdict": verdict, "decided_by": decided_by, "stages": stages}


def test_each_verdict_is_dated_by_the_stage_that_decided_it_across_sessions(tmp_path):
    # session 1 ran an hour; session 2 (a resume) began a day later
    store = a_store(tmp_path / "gate.db", {1: T0, 2: T0 + 86_400},
                    [("s1", 1, T0 + 1800), ("s2", 1, T0 + 1900),         # a screen that decided
                     ("m1", 1, T0 + 600), ("t1", 2, T0 + 86_400 + 1800),  # screen moved, time decided
                     ("u1", 1, T0 + 700)])                                # undecided
    document = {"tests": [
        a_test("counted", "no_change", "counts", {"screen": {"runs": ["s1", "s2"], "session": 1}}),
        a_test("timed", "improvement", "time", {"screen": {"runs": ["m1"], "session": 1},
                                                "time": {"runs": ["t1"], "session": 2}}),
        a_test("open", "inconclusive", None, {"screen": {"runs": ["u1"], "session": 1}}),
        a_test("skipped", "skipped", None, {}),
    ]}
    sessions = [{"session": 1, "elapsed_s": 3600.0}, {"session": 2, "elapsed_s": 3600.0}]
    moments = gate_benchmark.decided_over_time(document, store, sessions)
    # 1900 s into session 1; then 1800 s into session 2, which begins after session 1's hour
    assert moments == [1900 / 3600, (3600 + 1800) / 3600]
    assert gate_benchmark.decided_by_hours(moments, total_h=2.0) == [(1, 1), (2.0, 2)]


def test_the_marks_stop_at_the_gates_own_length():
    assert gate_benchmark.decided_by_hours([0.5, 2.5, 3.9], total_h=4.5) == [(1, 1), (2, 1), (3, 2), (4, 3), (4.5, 3)]
    assert gate_benchmark.decided_by_hours([], total_h=0.2) == [(0.2, 0)]


def test_costs_are_each_stages_span_and_pipelined_screens_are_told_apart(tmp_path):
    # each run lasts 10 s and ends at the time given
    store = a_store(tmp_path / "gate.db", {1: T0},
                    [("a1", 1, T0 + 100), ("a2", 1, T0 + 130),       # a screen: 90 s to 130 s, 40 s
                     ("p1", 1, T0 + 60),                               # a pipelined screen: 10 s
                     ("t1", 1, T0 + 300), ("t2", 1, T0 + 320)])       # a timed job: 30 s
    document = {"tests": [
        a_test("get", "no_change", "counts", {"screen": {"runs": ["a1", "a2"], "session": 1}}),
        {**a_test("get-pipeline-10", "improvement", "time", {"screen": {"runs": ["p1"], "session": 1},
                                                             "time": {"runs": ["t1", "t2"], "session": 1}}),
         "counted": {"metrics": [{"metric": "instructions_per_op"}, {"metric": "server_reads_per_op"}]}},
        a_test("get-pipeline-1", "no_change", "counts", {}),
    ]}
    assert gate_benchmark.per_test_costs(document, store) == {
        "counted_lane_s": 50.0, "timed_s": 30.0, "counted_tests": 2, "timed_tests": 1,
        "pipelined_screen_lane_s": 10.0, "pipelined_screen_tests": 1}
