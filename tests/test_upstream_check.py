"""The long check's summary (scripts/upstream_check.py): what it says of runs with several client
groups or roles, from stored facts (pure logic; the check itself runs for hours and is not in CI)."""

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "upstream_check.py"
spec = importlib.util.spec_from_file_location("upstream_check", SCRIPT)
upstream_check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(upstream_check)


def run(test, groups, status="ok", ops=1000.0):
    return {"test": test, "status": status, "error": None, "ops_per_sec": ops, "flags": [],
            "dataset": {}, "groups": groups, "finished_at": 1.0}


def group(label, rate, p50, counts=None):
    return {"group": label, "ops_per_sec": rate, "p50_ms": p50, "role_counts": counts}


def test_several_groups_and_roles_are_listed_with_every_group_and_what_the_role_counted():
    runs = [
        run("memtier_benchmark-Nclients-blpop", [group("group 1 (memtier_benchmark: LPUSH k v)", 10756.2, 0.046),
                                                 group("group 2 (memtier_benchmark: BLPOP k 0)", 9339.0, 9.543)]),
        run("sidekiq-bench-1queue", [group("group 1 (sidekiq-bench)", 5974.0, 0.058,
                                           {"exactly_once": False, "fetched": 10, "fetched_twice_or_more": 2,
                                            "never_fetched": 1})]),
        run("memtier_benchmark-1Mkeys-string-get", [group("group 1 (memtier_benchmark)", 90000.0, 0.1)]),
        run("set-bcast-tracking-100-listeners", [group("group 1 (memtier_benchmark: SET __key__ v)", 10164.0, 1.66),
                                                 group("group 2 (bcast-listener)", 105540.0, None)]),
        run("memtier_benchmark-broken-groups", [group("a", 1.0, 1.0), group("b", 1.0, 1.0)], status="failed"),
    ]
    lines = upstream_check.several_clients(runs)
    table = "\n".join(lines)
    assert "Suites with several clients or a role redline-load plays: 3" in table
    assert "| set-bcast-tracking-100-listeners | SET 10,164, 1.660 · bcast-listener 105,540, – |" in table
    assert "| Nclients-blpop | LPUSH 10,756, 0.046 · BLPOP 9,339, 9.543 |  |" in table
    assert "NOT exactly once: 2 fetched twice or more, 1 never" in table
    assert "string-get" not in table and "broken-groups" not in table


def test_what_each_role_counted_is_said_in_its_own_terms():
    text = upstream_check.role_counts_text
    assert text({"exactly_once": True, "fetched": 29992}) == "29,992 jobs, each exactly once"
    assert text({"invalidations_per_write": 10.94, "invalidation_messages": 114395, "listeners": 100}) == \
        "114,395 invalidations, 10.9 per write, 100 listeners"
    assert text({"received_total": 50265, "subscriptions": 100, "every_subscriber_got_every_message": False}) == \
        "50,265 messages to 100 subscriptions; subscribers of one channel got different counts"
    assert text(None) == "" and text({"something": 1}) == ""


def test_a_group_is_named_by_its_commands_or_its_tool():
    name = upstream_check._group_name
    assert name("group 2 (memtier_benchmark: BLPOP k 0 | XADD s * f v)") == "BLPOP/XADD"
    assert name("group 1 (bullmq-bench)") == "bullmq-bench"


class Refused:
    """A suite with errors, as redline.suites resolves it (only what the summary reads)."""
    name = "broken"
    diagnostics = [type("Diagnostic", (), {"severity": "error", "__str__": lambda self: "broken.yml:3: error"})()]


def test_the_summary_reads_flags_and_groups_where_the_store_keeps_them(tmp_path):
    """A real store: the flags live in their own column (a run flagged invalid or measuring the
    miss path must be counted so), the groups in the facts; the latest run of a test counts."""
    from redline.core.run import Run
    from redline.store.results import Store
    store = Store(tmp_path / "check.db")
    session = store.begin_session(kind="run", argv=[], machine={})
    rows = [Run(test="claim", target="bin:x", side=None, run_index=0, status="ok", finished_at=2.0,
                metrics={"ops_per_sec": 10.0}, flags=["2954 error replies: 2954 × ERR syntax error"]),
            Run(test="get", target="bin:x", side=None, run_index=0, status="failed", finished_at=1.0,
                error="server exited"),
            Run(test="get", target="bin:x", side=None, run_index=0, status="ok", finished_at=3.0,
                metrics={"ops_per_sec": 90.0}, flags=["measures the miss path (90% misses)"],
                facts={"groups": [{"group": "group 1 (memtier_benchmark)", "ops_per_sec": 90.0, "p50_ms": 0.1}]}),
            Run(test="geo", target="bin:x", side=None, run_index=0, status="ok", finished_at=4.0,
                metrics={"ops_per_sec": 10.7}, flags=["window too short: the median reply took 3.46 s"])]
    for run in rows:
        run.session_id = session
        store.add_run(run)
    runs = {r["test"]: r for r in upstream_check.runs_from_store(tmp_path / "check.db")}
    assert upstream_check.classify(runs["claim"]) == "invalid"
    assert upstream_check.classify(runs["get"]) == "valid" and runs["get"]["groups"][0]["ops_per_sec"] == 90.0
    summary = upstream_check.summarise(list(runs.values()), ["redline", "run"], suite_count=4, hours=0.5,
                                       refused=[Refused()])
    assert "every suite has a result, 1 of them the errors that refuse it" in summary
    assert "| 4 (1 refused) | 3 | 2 (67%) | 0 | 1 | 0 |" in summary
    assert "measuring the miss path (more than half of the reads missed): 1" in summary
    assert "- broken: broken.yml:3: error" in summary
    assert "with a window too short to measure (fewer than 10 median latencies: a longer --duration " \
           "measures them): 1\n\n- geo: window too short: the median reply took 3.46 s" in summary


def test_running_time_adds_up_sessions_not_the_gaps_between_them(tmp_path):
    from redline.core.run import Run
    from redline.store.results import Store
    store = Store(tmp_path / "check.db")
    for start in (1_000.0, 37_000.0):          # a part, and a rerun ten hours later
        session = store.begin_session(kind="run", argv=[], machine={})
        for offset in (0.0, 900.0):
            store.add_run(Run(test=f"t{start + offset}", target="bin:x", side=None, run_index=0, status="ok",
                              session_id=session, started_at=start + offset, finished_at=start + offset + 900.0))
    assert upstream_check.wall_hours([tmp_path / "check.db", tmp_path / "absent.db"]) == 1.0
