"""Same state: every run of every side starts from the same server state (redline/bench/state.py).

Real redis-server, real redline-load, real SQLite; the verdict logic is also checked alone."""

import json
import sqlite3

import pytest

from conftest import REDIS_SERVER
from redline.analysis import same_state
from redline.analysis.comparison import COMPARED_METRICS, compare_test
from redline.core.run import Run
from redline.server.traits import writing_commands
from redline.suites import load_test
from redline.analysis.stats import Verdict

FAST = ("--duration", "1s", "--warmup", "0.5s")


def write_suite(directory, name: str, client: str, db_lines: tuple[str, ...] = ()) -> None:
    lines = ["version: 0.4", f"name: {name}", "dbconfig:", "  configuration-parameters:", "    save: '\"\"'",
             *db_lines, "tested-commands:", "- lpush", "redis-topologies:", "- oss-standalone",
             "clientconfig:", "  tool: memtier_benchmark", f"  arguments: {client}", "priority: 1"]
    (directory / f"{name}.yml").write_text("\n".join(lines) + "\n")


def stored_facts(db) -> list[dict]:
    return [json.loads(f) for (f,) in sqlite3.connect(db).execute(
        "SELECT facts FROM runs WHERE status='ok' ORDER BY id")]


# -- which commands write: the server's own COMMAND flags ------------------------------------------
@pytest.mark.parametrize("client, expected", [
    ('--command "LPUSH __key__ __data__"', ["lpush"]),
    ('--command "GEOSEARCH key FROMLONLAT 7 55 BYBOX 200 200 KM"', []),
    ("--ratio 0:1", []),                                    # memtier's default mix, GETs only
    ("--ratio 1:10", ["set"]),
    ('--command "XGROUP CREATE s g $ MKSTREAM"', ["xgroup|create"]),
    ('--command "EVALSHA 0123 1 __key__"', ["evalsha"]),    # scripts carry no write flag, yet may write
])
def test_the_measured_commands_that_write_come_from_the_servers_command_flags(tmp_path, client, expected):
    write_suite(tmp_path, "t", client)
    assert writing_commands(load_test(tmp_path / "t.yml"), REDIS_SERVER) == expected


# -- which runs start on fresh servers -----------------------------------------------------------------
@pytest.mark.parametrize("client, duet, snapshots, restarts", [
    ('--command "GET __key__"', False, True, False),        # read-only, one side at a time: one server per side
    ('--command "GET __key__"', True, True, True),          # read-only duet, restored: fresh servers every pair
    ('--command "GET __key__"', True, False, False),        # read-only duet, prepared: not a preparation per pair
    ('--command "LPUSH __key__ __data__"', False, True, True),   # a write: always
])
def test_which_runs_start_on_fresh_servers(tmp_path, client, duet, snapshots, restarts):
    from redline.bench.state import FRESH_FOR_DUET, plan_state
    from redline.engine.run_plan import RunSettings, Side
    from redline.server.targets import parse_target
    from redline.topology import parse_topology
    preload = ("  preload_tool:", "    tool: memtier_benchmark",
               '    arguments: --command "SET __key__ __data__" --command-key-pattern P -n allkeys'
               " --key-minimum 1 --key-maximum 10 -c 1 -t 1")
    write_suite(tmp_path, "t", client, preload)
    sides = [Side(parse_target(f"bin:{REDIS_SERVER}"), name) for name in ("baseline", "comparison")]
    settings = RunSettings(runs=3, duet=duet, snapshots=snapshots)
    plan = plan_state(load_test(tmp_path / "t.yml"), parse_topology("oss-standalone"), sides, settings)
    assert plan.restart_per_run is restarts, plan.describe()
    assert (plan.restart_why == FRESH_FOR_DUET) == (restarts and duet and "GET" in client)
    if plan.restart_why == FRESH_FOR_DUET:
        plan.fall_back("SAVE failed")           # the snapshot could not be saved after all: no preparation per pair
        assert plan.restart_per_run is False and "so a duet keeps its servers" in plan.restart_why


# -- a layout-sensitive A/A --------------------------------------------------------------------------
def test_a_geo_range_scan_aa_measures_restored_servers_on_both_sides_that_read_alike(
        tmp_path, redline_cli, monkeypatch):
    """Before the rule, the side that prepared the geo key measured scattered skiplist nodes and
    the side that restored it a compact layout: an A/A read as an 'improvement'. Now the
    preparing side restarts from the snapshot it saved, and both sides measure the same thing."""
    monkeypatch.setenv("REDLINE_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "aa.json"
    redline_cli("compare", "quick", "--name", "geosearch-bybox", "--scale", "0.02", "--runs", "7",
                "--max-runs", "7", *FAST, "--json", out, "--store", tmp_path / "r.db", check_exit=0, timeout=600)
    document = json.loads(out.read_text())
    facts = stored_facts(tmp_path / "r.db")
    assert len(facts) == 14
    assert {f["state"]["origin"] for f in facts} == {"restored"}
    assert len({f["state"]["snapshot_key"] for f in facts}) == 1
    assert len({f["dataset"]["restored_from"] for f in facts}) == 1
    saved = [f["dataset"] for f in facts if f["dataset"].get("snapshot")]
    assert saved and all(d["restored_from"] == d["snapshot"] for d in saved)   # the preparing side restarted
    assert {f["state"]["at_run_start"]["keys"] for f in facts} == {1}
    assert all(f["state"]["memory_at_window_start"]["used_memory"] > 0 for f in facts)
    comparisons = document["comparisons"]
    assert len(comparisons) == len(COMPARED_METRICS)
    assert not [c for c in comparisons if c["state_refusal"]], comparisons
    # No assertion on the verdicts themselves: 7 one-second runs against a 2% threshold on a shared
    # 2-core machine give an A/A a throughput verdict now and then (seen once in a CI run), which
    # says nothing about the state. The layout effect is what this test is about, and its size
    # separates it from noise: before the rule the sides read 525 vs 280 µs/op here (1.9x).
    cpu = next(c for c in comparisons if c["metric"] == "server_cpu_us_per_op")
    ratio = cpu["comparison_median"] / cpu["baseline_median"]
    assert 1 / 1.5 < ratio < 1.5, cpu


# -- a write test ------------------------------------------------------------------------------------
@pytest.mark.parametrize("snapshots", [True, False], ids=["restored", "prepared"])
def test_every_run_of_a_write_test_starts_from_the_same_keys_and_memory(tmp_path, redline_cli, monkeypatch,
                                                                        snapshots):
    """LPUSH grows its lists: without a restart run 3 would start with what runs 1 and 2 pushed."""
    monkeypatch.setenv("REDLINE_CACHE", str(tmp_path / "cache"))
    preload = ("  preload_tool:", "    tool: memtier_benchmark",
               '    arguments: --command "LPUSH __key__ __data__" --command-key-pattern P -n allkeys'
               " --key-minimum 1 --key-maximum 1000 -c 2 -t 1 --pipeline 20",
               "  check:", "    keyspacelen: 1000")
    write_suite(tmp_path, "lpush-grows", '--command "LPUSH __key__ __data__" --key-minimum 1 --key-maximum 1000 '
                "--pipeline 10 -c 2 -t 1 --test-time 1", preload)
    out = tmp_path / "out.json"
    proc = redline_cli("run", tmp_path / "lpush-grows.yml", "--runs", "3", *FAST, "--json", out,
                       "--store", tmp_path / "r.db", *(() if snapshots else ("--no-snapshots",)), check_exit=0)
    facts = stored_facts(tmp_path / "r.db")
    runs = json.loads(out.read_text())
    assert len(facts) == 3 and len(runs) == 3
    states = [f["state"] for f in facts]
    assert {s["origin"] for s in states} == {"restored" if snapshots else "prepared"}
    assert all(s["restart_per_run"] and s["restart_why"] == "the measured commands write (lpush)" for s in states)
    assert states[0]["reset_s"] is None and all(s["reset_s"] > 0 for s in states[1:])
    assert [s["at_run_start"]["keys"] for s in states] == [1000, 1000, 1000]
    start_memory = [s["at_run_start"]["used_memory"] for s in states]
    assert max(start_memory) < 1.01 * min(start_memory), start_memory
    # the runs did grow the lists (so the check above could fail without the restarts)
    grown = [run["used_memory_bytes"] - start for run, start in zip(runs, start_memory)]
    assert all(g > 0.05 * min(start_memory) for g in grown), (grown, start_memory)
    assert "server restarted into the test's state in" in proc.stderr
    assert "restarted before every run: the measured commands write (lpush)" in " ".join(proc.stderr.split())


def test_a_tcp_target_is_prepared_and_never_restarted_and_its_facts_say_so(tmp_path, redline_cli):
    """redline can neither snapshot nor restart someone else's server: every run's facts say the
    state was prepared there and that runs continue on what the previous one left."""
    from conftest import start_redis_server
    write_suite(tmp_path, "lpush-tcp", '--command "LPUSH __key__ __data__" --key-minimum 1 --key-maximum 100 '
                "-c 1 -t 1 --test-time 1", ("  preload_tool:", "    tool: memtier_benchmark",
                                            '    arguments: --command "LPUSH __key__ __data__" --command-key-pattern P'
                                            " -n allkeys --key-minimum 1 --key-maximum 101 -c 1 -t 1"))
    (tmp_path / "srv").mkdir()
    server = start_redis_server(tmp_path / "srv")
    try:
        redline_cli("run", tmp_path / "lpush-tcp.yml", "--target", f"tcp://127.0.0.1:{server.port}", "--runs", "2",
                    *FAST, "--store", tmp_path / "r.db", check_exit=0)
    finally:
        server.stop()
    states = [f["state"] for f in stored_facts(tmp_path / "r.db")]
    assert len(states) == 2
    for s in states:
        assert s["origin"] == "prepared" and "is a tcp:// target" in s["why"]
        assert s["restart_per_run"] is False and "cannot restart a tcp:// target" in s["restart_why"]
    assert states[0]["at_run_start"]["keys"] == 100          # the preload, prepared on that server


# -- one side that cannot be snapshotted --------------------------------------------------------------
def test_a_side_that_cannot_start_from_a_snapshot_makes_every_side_prepare(tmp_path, redline_cli, monkeypatch):
    monkeypatch.setenv("REDLINE_CACHE", str(tmp_path / "cache"))
    redline_cli("compare", "quick", "--name", "geosearch-bybox", "--scale", "0.002", "--comparison-config",
                "appendonly=yes", "--runs", "1", "--max-runs", "1", "--duration", "1s", "--warmup", "0s",
                "--store", tmp_path / "r.db", check_exit=0)
    facts = stored_facts(tmp_path / "r.db")
    assert len(facts) == 2
    for f in facts:
        assert f["state"]["origin"] == "prepared" and "appendonly yes" in f["state"]["why"]
        assert not f["dataset"].get("restored_from") and not f["dataset"].get("snapshot")
    assert not (tmp_path / "cache" / "snapshots").exists() or not list((tmp_path / "cache" / "snapshots").glob("*.rdb"))


def test_a_script_loaded_by_an_init_command_is_loaded_for_every_run(tmp_path, redline_cli, monkeypatch):
    """SCRIPT LOAD fills the script cache, which an RDB does not hold: such a preparation is made by
    every side itself (restored from a snapshot, EVALSHA answered NOSCRIPT to every request)."""
    monkeypatch.setenv("REDLINE_CACHE", str(tmp_path / "cache"))
    script = "redis.call('incr', 'k');return"
    write_suite(tmp_path, "evalsha", '--command="EVALSHA 945e42aaa70a69dfd7a4904783754829b9513ca7 0" -c 2 -t 1',
                ("  init_commands:", "  - - SCRIPT", "    - LOAD", f"    - {script}"))
    redline_cli("compare", tmp_path / "evalsha.yml", "--runs", "2", "--max-runs", "2", *FAST,
                "--store", tmp_path / "r.db", "--json", tmp_path / "r.json", check_exit=0)
    runs = json.loads((tmp_path / "r.json").read_text())["runs"]
    assert len(runs) == 4 and all(r["status"] == "ok" and not r["flags"] and r["errors"] == 0 for r in runs), runs
    for f in stored_facts(tmp_path / "r.db"):
        assert f["state"]["origin"] == "prepared" and "script cache" in f["state"]["why"], f["state"]


# -- the verdict on sides whose states differ (logic alone) -----------------------------------------
def _records(side: str, ways: list[dict], cpu: float) -> list[Run]:
    return [Run(test="t", target=side, side=side, run_index=i, status="ok",
                metrics={"ops_per_sec": 1000.0 + i, "p50_ms": 1.0, "p90_ms": 1.5, "p99_ms": 2.0,
                         "server_cpu_us_per_op": cpu * (1 + i / 100)}, facts={"state": way})
            for i, way in enumerate(ways)]


def _restored(key: str, used_memory: int = 100 << 20) -> dict:
    return {"origin": "restored", "snapshot_key": key, "at_run_start": {"keys": 1, "used_memory": used_memory}}


def test_sides_that_reached_their_state_differently_get_no_verdict():
    prepared = {"origin": "prepared", "at_run_start": {"keys": 1, "used_memory": 100 << 20}}
    records = _records("baseline", [prepared] * 7, 2000.0) + _records("comparison", [_restored("abc")] * 7, 700.0)
    comparisons = compare_test("t", records, {})
    assert {c.verdict_alone for c in comparisons} == {Verdict.INCONCLUSIVE}
    cpu = next(c for c in comparisons if c.metric == "server_cpu_us_per_op")
    assert cpu.result is not None and cpu.result.delta_pct < -50        # the numbers are still shown
    assert cpu.state_refusal == ("the sides reached their server state differently (baseline: prepared; "
                                 "comparison: restored from snapshot abc): no verdict on different data layouts")
    assert cpu.as_json()["state_refusal"] == cpu.state_refusal
    # the same records with one way of reaching the state: the difference is a verdict again
    same = _records("baseline", [_restored("abc")] * 7, 2000.0) + _records("comparison", [_restored("abc")] * 7, 700.0)
    assert next(c for c in compare_test("t", same, {}) if c.metric == "server_cpu_us_per_op").verdict_alone \
        == Verdict.IMPROVEMENT


def test_a_side_that_mixed_two_ways_or_two_snapshots_gets_no_verdict():
    mixed = _records("baseline", [_restored("abc")] * 6 + [{"origin": "prepared"}], 1.0) \
        + _records("comparison", [_restored("abc")] * 7, 1.0)
    assert "baseline: prepared and restored from snapshot abc" in same_state.state_refusal(
        {"baseline": [r.state for r in mixed if r.side == "baseline"],
         "comparison": [r.state for r in mixed if r.side == "comparison"]})
    assert same_state.state_refusal({"baseline": [_restored("abc")], "comparison": [_restored("def")]})
    assert same_state.state_refusal({"baseline": [_restored("abc")], "comparison": [_restored("abc")]}) is None


def test_sides_whose_memory_differs_by_more_than_five_percent_are_flagged():
    base = [_restored("abc", 100 << 20)] * 5
    assert same_state.memory_flag({"baseline": base, "comparison": [_restored("abc", 104 << 20)] * 5}) is None
    flag = same_state.memory_flag({"baseline": base, "comparison": [_restored("abc", 110 << 20)] * 5})
    assert flag == "used_memory at run start differs by 10.0% (baseline 100.0 MiB, comparison 110.0 MiB)"
    records = _records("baseline", base * 2, 1.0) + _records("comparison", [_restored("abc", 110 << 20)] * 10, 1.0)
    assert all(c.state_flags == [flag] for c in compare_test("t", records, {}))



def test_sides_each_prepared_once_and_kept_for_every_run_are_flagged():
    """The catalogue A/A's one false verdict: a cluster read test, each side preloaded once (no
    snapshot) and never restarted, so the runs repeat the load and not the preparation."""
    once = {"origin": "prepared", "restart_per_run": False, "at_run_start": {"used_memory": 100 << 20}}
    flag = same_state.prepared_once_flag({"baseline": [once] * 7, "comparison": [once] * 7})
    assert flag.startswith("each side's data was prepared once and kept for all its runs")
    records = _records("baseline", [once] * 7, 1.0) + _records("comparison", [once] * 7, 1.0)
    assert all(c.state_flags == [flag] for c in compare_test("t", records, {}))
    # prepared afresh for every run, restored from a snapshot, or one side only: no flag
    fresh = {**once, "restart_per_run": True}
    kept_restore = {**_restored("abc"), "restart_per_run": False}
    assert same_state.prepared_once_flag({"baseline": [fresh] * 7, "comparison": [fresh] * 7}) is None
    assert same_state.prepared_once_flag({"baseline": [kept_restore] * 7, "comparison": [kept_restore] * 7}) is None
    assert same_state.prepared_once_flag({"baseline": [once] * 7, "comparison": []}) is None

# -- a restart stops every used server first -------------------------------------------------------
class _Recorded:
    """A server that only records when it stops (the event log is shared by every side's server)."""

    def __init__(self, name: str, events: list[str]):
        self.name, self.events = name, events

    def stop(self) -> None:
        self.events.append(f"stop {self.name}")


def _states_with_recorded_servers(restart_per_run: bool, events: list[str]):
    from redline.bench.state import Prepared, ServerStates, StatePlan
    from redline.topology import CpuPlan

    plan = StatePlan("restored", "a snapshot", restart_per_run, "the measured commands write (set)", {})
    states = ServerStates(None, None, None, plan, observer=None, cpus=[0, 1], workdir=None)
    cpu = CpuPlan(("primary",), ((0,),), (1,))
    generation: dict[str, int] = {}

    def server(side: str, runs: int = 0) -> Prepared:
        generation[side] = generation.get(side, 0) + 1
        return Prepared(_Recorded(f"{side}#{generation[side]}", events), cpu, {"state": {}}, runs=runs)

    def start(side: str, *, starting=None) -> Prepared:
        prepared = server(side)
        events.append(f"start {prepared.server.name}" + (f" on {starting}" if starting else ""))
        return prepared

    states.start = start
    return states, server


@pytest.mark.parametrize("restart_per_run", [True, False])
def test_a_duets_restart_stops_every_used_server_before_any_new_one_starts(restart_per_run):
    """A new server takes the pages the last stopped one freed: restarting one side at a time
    would hand each side its own pages back, pair after pair."""
    events: list[str] = []
    states, server = _states_with_recorded_servers(restart_per_run, events)
    baseline, comparison, unused = server("baseline", runs=1), server("comparison", runs=1), server("third")
    new_comparison, new_baseline = states.before_slot([("comparison", comparison), ("baseline", baseline)],
                                                      every=[baseline, comparison, unused])
    if restart_per_run:
        assert events[:2] == ["stop baseline#1", "stop comparison#1"]        # both, before any start
        assert sorted(events[2:]) == ["start baseline#2 on [0, 1]", "start comparison#2 on [0, 1]"]
        assert new_comparison.server.name == "comparison#2" and new_baseline.server.name == "baseline#2"
        assert new_comparison.runs == new_baseline.runs == 1
    else:
        assert events == [] and new_comparison is comparison and new_baseline is baseline
        assert comparison.runs == baseline.runs == 2


def test_a_duets_restarts_run_at_the_same_time_each_on_every_core():
    """Neither side's server is the one restored last while the other waits: each start waits
    here for the other to have begun, which one after the other would never happen."""
    import threading
    events: list[str] = []
    states, server = _states_with_recorded_servers(True, events)
    both_started = threading.Barrier(2, timeout=30)
    record = states.start

    def start(side: str, *, starting=None):
        both_started.wait()
        return record(side, starting=starting)

    states.start = start
    slot = [("baseline", server("baseline", runs=1)), ("comparison", server("comparison", runs=1))]
    ready = states.before_slot(slot, every=[prepared for _, prepared in slot])
    assert [prepared.server.name for prepared in ready] == ["baseline#2", "comparison#2"]
    assert all(prepared.facts["state"]["reset_s"] >= 0 for prepared in ready)
    assert not both_started.broken


def _duet_whose_comparison_cannot_restart(error: Exception, events: list[str]):
    """A duet's states after a pair on both sides, and its next slot; the comparison's restart raises `error`."""
    states, server = _states_with_recorded_servers(True, events)
    record = states.start

    def start(side: str, *, starting=None):
        if side == "comparison":
            raise error
        return record(side, starting=starting)

    states.start = start
    slot = [("baseline", server("baseline", runs=1)), ("comparison", server("comparison", runs=1))]
    return states, slot


def test_a_side_that_cannot_restart_is_said_and_the_other_side_still_runs():
    from redline.core.errors import RunError
    states, slot = _duet_whose_comparison_cannot_restart(
        RunError("redis-server exited during start (exit status 1): Bad file format"), [])
    baseline, comparison = states.before_slot(slot, every=[prepared for _, prepared in slot])
    assert baseline.server.name == "baseline#2" and baseline.runs == 1
    assert isinstance(comparison, RunError) and "Bad file format" in str(comparison)


def test_a_restart_that_breaks_stops_what_the_other_started():
    """A bug in one side's restart is raised, and the server the other side got meanwhile is
    stopped rather than left running to the end of the process."""
    events: list[str] = []
    states, slot = _duet_whose_comparison_cannot_restart(ValueError("a bug"), events)
    with pytest.raises(ValueError, match="a bug"):
        states.before_slot(slot, every=[prepared for _, prepared in slot])
    assert events[-2:] == ["start baseline#2 on [0, 1]", "stop baseline#2"]


def test_one_restart_alone_starts_on_its_own_cores():
    """Interleaved runs (one side per slot): nothing loads beside it, so it starts pinned."""
    events: list[str] = []
    states, server = _states_with_recorded_servers(True, events)
    baseline, comparison = server("baseline", runs=1), server("comparison", runs=1)
    (new_baseline,) = states.before_slot([("baseline", baseline)], every=[baseline, comparison])
    assert events == ["stop baseline#1", "stop comparison#1", "start baseline#2"]
    assert new_baseline.runs == 1


def test_a_first_run_retires_nothing():
    """Servers that have served no run yet (a test's first pair) are the ones about to run."""
    events: list[str] = []
    states, server = _states_with_recorded_servers(True, events)
    baseline, comparison = server("baseline"), server("comparison")
    ready = states.before_slot([("baseline", baseline), ("comparison", comparison)], every=[baseline, comparison])
    assert events == [] and ready == [baseline, comparison]
    assert baseline.runs == comparison.runs == 1
