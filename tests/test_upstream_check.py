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
        run("memtier_benchmark-broken-groups", [group("a", 1.0, 1.0), group("b", 1.0, 1.0)], status="failed"),
    ]
    lines = upstream_check.several_clients(runs)
    table = "\n".join(lines)
    assert "Suites with several clients or a role redline-load plays: 2" in table
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
