"""`--measure instructions` through the command line, on Debian's redis-server under valgrind:
A/A gives no verdict and a spread of at most 2%; appendonly=yes is a regression of SET's
instructions per operation (the issue measured +68%) and not of GET's; calibrate stores the A/A
spread that compare then uses; plus the parts that need no server (the suite key, the warnings,
what is skipped)."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from pathlib import Path

import pytest

from redline.core import metrics
from redline.instructions.callgrind import under_callgrind
from redline.instructions.runner import InstructionsRunner
from redline.lab.local import real_runner
from redline.analysis.counted import spread_pct
from redline.instructions.visibility import visibility_warnings
from redline.engine.run_plan import Observer, RunSettings, Side
from redline.suites import builtin_suites_dir, load_test
from redline.server.targets import parse_target
from redline.topology import parse_topology

needs_valgrind = pytest.mark.skipif(not shutil.which("valgrind") or not Path("/usr/bin/redis-server").exists(),
                                    reason="needs valgrind and /usr/bin/redis-server (setup.sh installs both)")
SMALL = ("--measure", "instructions", "--window-instructions", "20000000")
INSTRUCTION_METRICS = {m.name for m in metrics.compared(metrics.INSTRUCTIONS)}


def _by_command(comparisons: list[dict]) -> dict:
    return {("set" if "-set-" in c["test"] else "get", c["metric"]): c for c in comparisons}


@needs_valgrind
def test_aa_gives_no_verdict_and_appendonly_is_a_regression_of_set_only(tmp_path, redline_cli):
    aa, aof, db = tmp_path / "aa.json", tmp_path / "aof.json", tmp_path / "r.db"
    redline_cli("compare", "quick", "--name", "string-(set|get)-100B-pipeline-1$", *SMALL, "--runs", "2",
                "--json", aa, "--store", db, check_exit=0, timeout=600)
    document = json.loads(aa.read_text())
    assert {c["metric"] for c in document["comparisons"]} == INSTRUCTION_METRICS     # never the timed ones
    assert not [c for c in document["comparisons"] if c["verdict"] in ("regression", "improvement")], \
        document["comparisons"]
    for command in ("set", "get"):
        runs = [r for r in document["runs"] if f"-{command}-" in r["test"] and r["status"] == "ok"]
        assert len(runs) == 4 and all(r["ops_per_sec"] is None for r in runs)      # no timed figure under valgrind
        values = [r["instructions_per_op"] for r in runs]
        # GET on a restored keyspace: 0.1-0.2% measured; SET on an empty server 0.8-2.0%: its hash table
        # grows during the window and serverCron's active rehashing (1 ms per run, wall-clock time) takes
        # a varying share of the rehash work off the commands (docs/measure-instructions.md)
        assert spread_pct(values) <= (2.0 if command == "get" else 3.0), (command, values)
        # what callgrind cannot count, the server's own INFO does: at pipeline 1 a read and a write per request
        assert all(0.9 < r["server_reads_per_op"] < 1.1 and 0.9 < r["server_writes_per_op"] < 1.1 for r in runs), \
            [(r["server_reads_per_op"], r["server_writes_per_op"]) for r in runs]
        requests = {r["facts"]["instructions"]["requests"] for r in runs}
        assert len(requests) == 1 and {r["ops"] for r in runs} == requests     # one fixed count per test
        # every counted server drew the same hash seed (the fixed seed): the same run_id, no flag
        assert len({r["facts"]["instructions"]["server_run_id"] for r in runs}) == 1
        assert not [flag for r in runs for flag in r["flags"] if "hash seed" in flag]
        # no slow log under valgrind (commands pass its 10 ms only because valgrind is slow)
        assert all(r["facts"]["instructions"]["config_added"] == {"slowlog-log-slower-than": "-1", "activerehashing": "no"}
               for r in runs)

    proc = redline_cli("compare", "quick", "--name", "string-(set|get)-100B-pipeline-1$", *SMALL, "--runs", "2",
                       "--comparison-config", "appendonly=yes", "--json", aof, "--store", db,
                       "--fail-on-regression", "--profile", "--html", tmp_path / "aof.html",
                       "--markdown", tmp_path / "aof.md", timeout=600)
    assert proc.returncode == 3, proc.stderr[-2000:]
    document = json.loads(aof.read_text())
    # the second session in the store counts the requests the first one counted (its windows fit)
    first = {r["test"]: r["facts"]["instructions"]["requests"] for r in json.loads(aa.read_text())["runs"]
             if r["status"] == "ok"}
    measured = [r for r in document["runs"] if r["status"] == "ok" and r["purpose"] == "measure"]
    assert measured and all(r["facts"]["instructions"]["origin"] == "earlier" for r in measured)
    assert all(r["facts"]["instructions"]["requests"] == first[r["test"]] for r in measured)
    by = _by_command(document["comparisons"])
    set_instructions = by[("set", "instructions_per_op")]
    assert set_instructions["verdict"] == "regression" and 40 < set_instructions["delta_pct"] < 100, set_instructions
    # a GET writes nothing to the AOF: its command cost is unchanged, the whole process within a few %
    # (measured: -0.6% and +1.5% in two sessions; both sides prepare their keyspace here, since an AOF
    # cannot be snapshotted, and the event loop around the commands moves by that much)
    get_command = by[("get", "instructions_per_op_command")]
    assert get_command["verdict"] != "regression" and abs(get_command["delta_pct"]) < 2, get_command
    assert abs(by[("get", "instructions_per_op")]["delta_pct"]) < 5, by[("get", "instructions_per_op")]
    # the profile runs: callgrind's call graph as a flame graph, through the perf profiles' path
    profiles = [r["profile"] for r in document["runs"] if r["purpose"] == "profile"]
    assert len(profiles) == 4 and all(p["event"] == "instructions (callgrind)" for p in profiles)
    assert all(Path(p["folded_path"]).is_file() and Path(p["callgrind_path"]).is_file() for p in profiles)
    set_profiles = [r["profile"] for r in document["runs"] if r["purpose"] == "profile" and "-set-" in r["test"]]
    assert all("setCommand" in Path(p["svg_path"]).read_text() for p in set_profiles)
    assert Path(set_instructions["diff_flamegraph"]).is_file() and set_instructions["moved_symbols"]
    stored = sqlite3.connect(db).execute("SELECT verdict FROM comparisons WHERE metric='instructions_per_op' "
                                         "AND test LIKE '%-set-%' ORDER BY rowid DESC").fetchone()
    assert stored == ("regression",)
    # the reports name the interval for what it is (the rule's run range, no p-value)
    page, markdown = (tmp_path / "aof.html").read_text(), (tmp_path / "aof.md").read_text()
    assert "run range" in page and "95% CI" not in page
    assert "change of medians, range of every cross-side ratio of runs" in page
    row = next(line for line in markdown.splitlines() if "-set-" in line and "| instructions_per_op |" in line)
    assert row.split("|")[7].strip() == "–", row          # p: none


@needs_valgrind
def test_calibrate_stores_the_aa_spread(tmp_path, redline_cli):
    db = tmp_path / "r.db"
    proc = redline_cli("calibrate", "quick", "--name", "string-get-100B-pipeline-1$", *SMALL, "--runs", "2",
                       "--store", db, check_exit=0, timeout=600)
    floors = dict(sqlite3.connect(db).execute("SELECT metric, floor_pct FROM noise_floors").fetchall())
    assert set(floors) == INSTRUCTION_METRICS, floors
    # inside call() the count is the command's own work: near-deterministic whatever the load; the
    # whole process also counts event-loop iterations, whose batching follows the machine's load
    # (GET: 0.1-0.2% on a quiet machine, 3.1% at load average 10 in 20M-instruction windows)
    assert 0 <= floors["instructions_per_op_command"] <= 2.0, floors
    assert all(0 <= v <= 5.0 for v in floors.values()), floors
    assert "instructions_per_op" in proc.stdout


@needs_valgrind
def test_a_test_too_costly_for_its_window_runs_once_and_says_why(tmp_path, redline_cli):
    """A window asked far smaller than the test's smallest one (2 GETs on each connection): the
    first run's probe finds it, that run fails saying why, no other run or side is started."""
    db = tmp_path / "r.db"
    proc = redline_cli("compare", "quick", "--name", "string-get-100B-pipeline-1$", "--measure", "instructions",
                       "--window-instructions", "1000", "--runs", "3", "--store", db, timeout=600)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, (proc.stdout[-2000:], proc.stderr[-2000:])
    output = " ".join((proc.stdout + proc.stderr).split())
    assert "not counted, no more runs: too costly to count" in output, output[-3000:]
    with sqlite3.connect(db) as check:
        runs = check.execute("SELECT status, error FROM runs").fetchall()
    assert len(runs) == 1 and runs[0][0] == "failed", runs
    assert re.search(r"too costly to count: its smallest window, 2 requests on each of [\d,]+ connections at about "
                     r"[\d,]+ instructions each, is [\d,]+M instructions, [\d,]+x the 1,000 asked for",
                     runs[0][1]), runs[0][1]


def test_usage_errors_and_the_suite_key(tmp_path, redline_cli):
    proc = redline_cli("run", "--measure", "instructions", "--duration", "3s", check_exit=2)
    assert "--duration does not apply to --measure instructions" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = redline_cli("run", "--measure", "cycles", check_exit=2)
    assert "invalid choice: 'cycles'" in proc.stderr
    suite = tmp_path / "s.yml"
    base = (builtin_suites_dir() / "quick" / "string-get-100B-pipeline-1.yml").read_text()
    suite.write_text(base + "redline:\n  measure: instructions\n")
    test = load_test(suite)
    assert test.extensions["measure"] == "instructions"
    assert RunSettings().measure_for(test) == "instructions"
    assert RunSettings(measure="time").measure_for(test) == "time"            # the command line wins
    suite.write_text(base + "redline:\n  measure: cycles\n")
    errors = [str(d) for d in load_test(suite).diagnostics if d.severity == "error"]
    assert len(errors) == 1 and re.search(r"s.yml:\d+: error: redline.measure must be time or instructions, "
                                          r"got 'cycles'", errors[0]), errors
    proc = redline_cli("run", suite, check_exit=2)     # a suite with errors: refused before anything runs
    assert "redline.measure must be time or instructions" in proc.stderr, proc.stderr


def test_what_callgrind_cannot_see_is_said_and_what_it_cannot_measure_is_skipped(tmp_path):
    quick = builtin_suites_dir() / "quick"
    pipelined = load_test(quick / "string-get-100B-pipeline-10.yml")
    plain = load_test(quick / "string-get-100B-pipeline-1.yml")
    standalone = parse_topology("oss-standalone")
    assert visibility_warnings(plain, standalone) == []
    assert any("pipeline 10" in w and "system calls" in w for w in visibility_warnings(pipelined, standalone))
    assert any("one thread at a time" in w for w in visibility_warnings(plain, parse_topology("oss-standalone-04-io-threads")))

    def skip(topology: str, target: str = "bin:/usr/bin/redis-server", test=plain) -> str | None:
        runner = real_runner(test, parse_topology(topology), [Side(parse_target(target, {}, None))],
                             RunSettings(measure="instructions"), Observer(), tmp_path, cpus=[0, 1],
                             artifacts=lambda run: tmp_path)
        assert isinstance(runner, InstructionsRunner) and runner.servers.under is under_callgrind
        return runner.skip_reason()

    assert skip("oss-standalone") is None
    assert "counts one server process" in skip("oss-cluster-3-primaries")
    assert "does not run" in skip("oss-standalone", "tcp://127.0.0.1:6379")
    # several clients at once, or another client tool: their work follows time, not a request count
    worker = tmp_path / "workers.yml"
    worker.write_text("version: 0.4\nname: workers\ndbconfig:\n  configuration-parameters:\n    save: '\"\"'\n"
                      "tested-commands:\n- brpop\nredis-topologies:\n- oss-standalone\nclientconfig:\n"
                      "  tool: sidekiq-bench\n  arguments: --workers 5 --num-queues 1 --jobs 1000 --quiet\n")
    assert load_test(worker).client.tool == "sidekiq-bench" and not load_test(worker).has_errors
    assert skip("oss-standalone", test=load_test(worker)) == (
        "--measure instructions counts a fixed number of requests from one memtier-mode client; this test runs "
        "sidekiq-bench at once, whose work follows time and waiting, not a request count (measure it by time)")


@needs_valgrind
def test_a_snapshot_is_prepared_without_callgrind_and_a_dataset_that_cannot_be_is_prepared_under_it(
        tmp_path, redline_cli, monkeypatch):
    """The preparation saved as a snapshot is never measured: it runs natively, and the measured
    server restores it under callgrind. Keys with a time to live cannot be snapshotted: then the
    measured server is the one prepared, under callgrind."""
    monkeypatch.setenv("REDLINE_CACHE", str(tmp_path / "cache"))
    plain = (builtin_suites_dir() / "quick" / "string-get-100B-pipeline-1.yml").read_text()
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites" / "get.yml").write_text(plain.replace("--key-maximum 100000", "--key-maximum 2000")
                                                 .replace("keyspacelen: 100000", "keyspacelen: 2000"))
    (tmp_path / "suites" / "ttl.yml").write_text(
        plain.replace("name: quick-string-get-100B-pipeline-1", "name: ttl-get")
        .replace("--ratio 1:0 -n allkeys --key-pattern P:P", '--command "SET __key__ __data__ EX 3600" --command-key-pattern P -n 500')
        .replace("--key-maximum 100000", "--key-maximum 2000").replace("keyspacelen: 100000", "keyspacelen: 2000"))
    redline_cli("run", tmp_path / "suites", *SMALL, "--runs", "1", "--json", tmp_path / "r.json",
                "--store", tmp_path / "r.db", check_exit=0, timeout=600)
    runs = {r["test"]: r for r in json.loads((tmp_path / "r.json").read_text())}
    assert all(r["status"] == "ok" for r in runs.values()), runs
    restored = runs["quick-string-get-100B-pipeline-1"]["facts"]
    assert restored["dataset"]["prepared_without_tool"] is True and restored["dataset"]["restored_from"]
    assert restored["state"]["origin"] == "restored"
    prepared = runs["ttl-get"]["facts"]
    assert prepared["state"]["origin"] == "prepared" and "time to live" in prepared["state"]["why"]
    assert not prepared["dataset"].get("restored_from") and prepared["dataset"]["keyspace_length"] == 2000
