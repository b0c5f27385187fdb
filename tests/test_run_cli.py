"""`redline run` end to end: real redis-server, real redline-load, real SQLite."""

import json
import re
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from conftest import REDLINE, wait_for_store
from redline.core.metrics import REGISTRY, TIME
from redline.store.results import Store

METRICS = tuple(m.name for m in REGISTRY if m.measure == TIME)     # what a timed run measures

SMALL = "--duration", "2s", "--warmup", "1s"


def write_suite(directory: Path, name: str, arguments: str, *, db_lines: tuple[str, ...] = ()) -> Path:
    """A suite file in the upstream format; `db_lines` go under `dbconfig:` as written."""
    lines = ["version: 0.4", f"name: {name}", "description: a test written by the test suite",
             "dbconfig:", "  configuration-parameters:", "    save: '\"\"'", *db_lines,
             "tested-commands:", "- set", "redis-topologies:", "- oss-standalone",
             "clientconfig:", "  tool: memtier_benchmark", f"  arguments: {arguments}", "priority: 1"]
    path = directory / f"{name}.yml"
    path.write_text("\n".join(lines) + "\n")
    return path


def write_checked_pair(tmp_path: Path, name: str, arguments: str, preparation: tuple[str, ...], keys: int) -> Path:
    """A suites directory of two suites with the same preparation: `name` checks for `keys` keys,
    `name`-check-wrong for one more."""
    suites = tmp_path / "suites"
    suites.mkdir()
    for suffix, expected in (("", keys), ("-check-wrong", keys + 1)):
        write_suite(suites, f"{name}{suffix}", arguments,
                    db_lines=(*preparation, "  check:", f"    keyspacelen: {expected}"))
    return suites


def run_one_suite(tmp_path: Path, redline_cli, name: str, arguments: str, *, db_lines: tuple[str, ...] = ()) -> dict:
    """Write one suite, run it (exit 0) and return its one run as --json writes it."""
    suites = tmp_path / "suites"
    suites.mkdir()
    write_suite(suites, name, arguments, db_lines=db_lines)
    out = tmp_path / "out.json"
    redline_cli("run", suites, "--warmup", "0s", "--json", out, "--store", tmp_path / "r.db", check_exit=0)
    (run,) = json.loads(out.read_text())
    return run


def test_runs_are_stored_and_written_as_json(tmp_path, redline_cli):
    out = tmp_path / "out.json"
    proc = redline_cli("run", "quick", "--name", "string-set-100B-pipeline-10$|string-get-100B-pipeline-10$",
                       "--runs", "3", *SMALL, "--json", out, "--store", tmp_path / "r.db", check_exit=0)
    runs = json.loads(out.read_text())
    assert sorted({r["test"] for r in runs}) == ["quick-string-get-100B-pipeline-10", "quick-string-set-100B-pipeline-10"]
    assert len(runs) == 6 and sorted(r["run_index"] for r in runs) == [0, 0, 1, 1, 2, 2]
    for run in runs:
        assert run["status"] == "ok" and run["target"].startswith("bin:")
        for metric in METRICS:
            assert run[metric] is not None, metric
        assert run["ops_per_sec"] > 1000
        assert 0 < run["p50_ms"] <= run["p99_ms"] <= run["p999_ms"]
        assert 0 < run["server_cpu_us_per_op"] < 1000
        assert 0 < run["client_cpu_util"] <= 1.05
        assert run["used_memory_bytes"] > 0
        # pipeline 10: the server reads and writes each connection's requests ten at a time (0.1 measured)
        assert 0.05 < run["server_reads_per_op"] < 0.5 and 0.05 < run["server_writes_per_op"] < 0.5, run
    gets = [r for r in runs if "get" in r["test"]]
    assert all(r["keyspace_hits"] > 0 and r["keyspace_misses"] == 0 for r in gets)
    db = sqlite3.connect(tmp_path / "r.db")
    assert db.execute("SELECT count(*) FROM runs WHERE status='ok'").fetchone()[0] == 6
    assert db.execute("SELECT count(DISTINCT name) FROM metrics").fetchone()[0] >= len(METRICS)
    assert db.execute("SELECT count(*) FROM series WHERE name='ops'").fetchone()[0] >= 6
    facts = json.loads(db.execute("SELECT facts FROM runs LIMIT 1").fetchone()[0])
    assert facts["server_version"] == "7.0.15"
    assert facts["machine"]["cpu_model"] and facts["machine"]["kernel"] and "load_avg" in facts["machine"]
    assert facts["loadgen_argv"][0].endswith("redline-load") and "--warmup-time" in facts["loadgen_argv"]
    assert facts["pinning"]["server_cpus"] != facts["pinning"]["client_cpus"]
    assert "redline results" in proc.stdout and "set-100B-pipeline-10" in proc.stdout


@pytest.mark.parametrize("args, message", [
    (["no/such/suite.yml"], "no such suite file, directory or built-in suite"),
    (["--target", "ftp://h:1"], "unknown target scheme 'ftp'"),
    (["--target", "bin:/nope/redis-server"], "server binary does not exist: /nope/redis-server"),
    (["--frobnicate"], "unrecognized arguments: --frobnicate"),
    (["--runs", "0"], "expected a positive integer"),
    (["--duration", "soon"], "not a duration"),
])
def test_bad_input_is_a_one_line_usage_error(redline_cli, args, message):
    proc = redline_cli("run", *args, check_exit=2)
    assert message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_malformed_yaml_names_file_and_line(tmp_path, redline_cli):
    bad = tmp_path / "bad.yml"
    bad.write_text("version: 0.4\nname: bad\nclientconfig:\n  arguments: [unclosed\n")
    proc = redline_cli("run", bad, check_exit=2)
    assert f"{bad}:" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_a_crashing_server_fails_its_run_and_the_next_test_still_runs(tmp_path, redline_cli):
    suites = tmp_path / "suites"
    suites.mkdir()
    write_suite(suites, "a-crash", '--command "DEBUG SEGFAULT" -c 1 -t 1 --test-time 10',
                db_lines=("    enable-debug-command: 'yes'",))
    write_suite(suites, "b-set", "--ratio 1:0 -c 5 -t 1 --test-time 2")
    out = tmp_path / "out.json"
    proc = redline_cli("run", suites, "--warmup", "0s", "--json", out, "--store", tmp_path / "r.db", check_exit=1)
    runs = {r["test"]: r for r in json.loads(out.read_text())}
    assert runs["a-crash"]["status"] == "failed" and "exited" in runs["a-crash"]["error"]
    assert runs["b-set"]["status"] == "ok" and runs["b-set"]["ops_per_sec"] > 0
    tail = sqlite3.connect(tmp_path / "r.db").execute(
        "SELECT server_log_tail FROM runs WHERE test='a-crash'").fetchone()[0]
    assert "crashed by signal" in tail
    assert "failed" in proc.stderr


def test_a_window_that_holds_few_replies_is_flagged_too_short(tmp_path, redline_cli):
    """Calls of 0.4 s on one connection: a 2 s window holds about 5 of them, too few to measure."""
    run = run_one_suite(tmp_path, redline_cli, "slow-calls", '--command "DEBUG SLEEP 0.4" -c 1 -t 1 --test-time 2',
                        db_lines=("    enable-debug-command: 'yes'",))
    assert run["status"] == "ok"
    [flag] = [f for f in run["flags"] if f.startswith("window too short")]
    assert "rounds of requests per connection; a longer --duration measures it" in flag


def test_a_window_too_short_for_calls_of_seconds_is_lengthened_and_measured_again(tmp_path, redline_cli):
    """Calls of 0.3 s on one connection in a 1 s window (--duration): about 3 rounds, so the window
    becomes 15 rounds, 4.5 s, rounded up to 5 s (within the suite's 8 s), and the first run is measured
    again with it; every run is a result, with one window."""
    suites = tmp_path / "suites"
    suites.mkdir()
    write_suite(suites, "slow-calls", '--command "DEBUG SLEEP 0.3" -c 1 -t 1 --test-time 8',
                db_lines=("    enable-debug-command: 'yes'",))
    out = tmp_path / "out.json"
    proc = redline_cli("run", suites, "--duration", "1s", "--warmup", "0s", "--runs", "2", "--json", out,
                       "--store", tmp_path / "r.db", check_exit=0)
    runs = json.loads(out.read_text())
    assert [r["status"] for r in runs] == ["ok", "ok"]
    assert "window lengthened: the test's calls take about 0.3" in " ".join(proc.stderr.split())
    assert "its runs measure 5 s (15 rounds); run 0 is measured again" in " ".join(proc.stderr.split())
    assert [r["facts"]["duration_s"] for r in runs] == [5.0, 5.0]
    assert runs[0]["facts"]["window_fitted"]["asked_s"] == 1.0
    assert all(4.5 < r["measured_s"] < 6.5 and not r["flags"] for r in runs), [(r["measured_s"], r["flags"]) for r in runs]


def test_the_too_short_flag_counts_rounds_of_the_median_latency():
    from redline.bench.window_fit import window_too_short
    assert window_too_short(3457.0, 3.0).startswith("window too short: the median reply took 3.46 s, so the "
                                                   "3 s window held about 0.9 rounds")
    assert window_too_short(299.0, 3.0) is None            # 10 rounds: enough
    assert window_too_short(1.2, 3.0) is None and window_too_short(None, 3.0) is None


def test_keyspace_check_failure_names_expected_and_found(tmp_path, redline_cli):
    suites = tmp_path / "suites"
    suites.mkdir()
    write_suite(suites, "wrong-count", "--ratio 0:1 -c 2 -t 1 --test-time 1",
                db_lines=("  check:", "    keyspacelen: 1000"))
    write_suite(suites, "init-adds-a-key", "--ratio 0:1 -c 2 -t 1 --test-time 1",
                db_lines=("  preload_tool:", "    tool: memtier_benchmark",
                          "    arguments: --ratio 1:0 -n allkeys --key-pattern P:P --key-minimum 1 "
                          "--key-maximum 100 -c 2 -t 1",
                          "  init_commands:", "  - '\"SET\" \"extra\" \"1\"'",
                          "  check:", "    keyspacelen: 100"))
    write_suite(suites, "unreachable", "--ratio 0:1 -c 2 -t 1 --test-time 1",
                db_lines=("  preload_tool:", "    tool: memtier_benchmark",
                          "    arguments: --ratio 1:0 --key-pattern P:P -c 2 -t 1",
                          "  check:", "    keyspacelen: 1000000"))
    write_suite(suites, "parallel-past-maximum", "--ratio 0:1 -c 2 -t 1 --test-time 1",
                db_lines=("  preload_tool:", "    tool: memtier_benchmark",
                          "    arguments: --command \"SET k:__key__ v\" --command-key-pattern P "
                          "--key-minimum 1 --key-maximum 2 -n 2 -c 4 -t 1",
                          "  check:", "    keyspacelen: 2"))
    out = tmp_path / "out.json"
    redline_cli("run", suites, "--warmup", "0s", "--json", out, "--store", tmp_path / "r.db", check_exit=1)
    runs = {r["test"]: r for r in json.loads(out.read_text())}
    assert len(runs) == 4 and all(r["status"] == "failed" for r in runs.values())
    assert runs["parallel-past-maximum"]["error"] == (
        "keyspace check failed: expected 2 keys after preparation, found 4; with 4 connections "
        "memtier_benchmark's parallel pattern (P) gives each a slice of 1 key from --key-minimum on, "
        "so keys up to 4 are written, above --key-maximum 2 (redline-load does the same)")
    assert runs["unreachable"]["error"].startswith("keyspace check failed before preparing anything: "
                                                   "check.keyspacelen 1,000,000 cannot be reached")
    assert "expected 1000 keys" in runs["wrong-count"]["error"] and "found 0" in runs["wrong-count"]["error"]
    assert runs["init-adds-a-key"]["error"].endswith(
        "expected 100 keys after preparation, found 101 (100 after the preload, +1 from init commands)")


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_killing_redline_keeps_finished_runs_and_marks_the_current_one(tmp_path, sig):
    db = tmp_path / "r.db"
    proc = subprocess.Popen([*REDLINE, "run", "quick", "--name", "string-set-100B-pipeline-(1|10)$",
                             "--runs", "5", "--duration", "2s", "--warmup", "0s", "--store", str(db)],
                            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def inside_a_run_after_two(check) -> bool:
        # signal well inside a run (begun under 0.5 s ago, 2 s long): between two runs there
        # is no current run to mark
        finished = check.execute("SELECT count(*) FROM runs WHERE status='ok'").fetchone()[0]
        started = [at for (at,) in check.execute("SELECT started_at FROM runs WHERE status='running'")]
        return finished >= 2 and len(started) == 1 and time.time() - started[0] < 0.5

    if not wait_for_store(db, inside_a_run_after_two, timeout_s=120):
        pytest.fail("never saw a run in progress after two finished ones")
    proc.send_signal(sig)
    assert proc.wait(timeout=30) != 0
    Store(db).close()   # opening the store again recovers what a killed process left behind
    rows = sqlite3.connect(db).execute("SELECT status, count(*) FROM runs GROUP BY status").fetchall()
    statuses = dict(rows)
    assert statuses.get("ok", 0) >= 2
    assert statuses.get("running", 0) == 0
    assert statuses.get("interrupted", 0) == 1
    ok_ids = [r[0] for r in sqlite3.connect(db).execute("SELECT id FROM runs WHERE status='ok'")]
    for run_id in ok_ids:
        assert sqlite3.connect(db).execute("SELECT count(*) FROM metrics WHERE run_id=?", (run_id,)).fetchone()[0] > 5


def test_a_command_the_server_does_not_know_is_skipped_with_the_reason(tmp_path, redline_cli):
    suites = tmp_path / "suites"
    suites.mkdir()
    write_suite(suites, "a-future-command", '--command "HSETEX __key__ EX 100 FIELDS 1 f __data__" -c 1 -t 1 --test-time 1')
    write_suite(suites, "b-set", "--ratio 1:0 -c 2 -t 1 --test-time 1")
    out = tmp_path / "out.json"
    proc = redline_cli("run", suites, "--warmup", "0s", "--json", out, "--store", tmp_path / "r.db", check_exit=0)
    runs = {r["test"]: r for r in json.loads(out.read_text())}
    assert runs["a-future-command"]["status"] == "skipped"
    assert "does not know HSETEX (COMMAND INFO)" in runs["a-future-command"]["error"]
    assert runs["b-set"]["status"] == "ok"
    assert "1 tests skipped" in proc.stderr


def test_quick_get_and_set_run_on_a_three_primary_cluster(tmp_path, redline_cli):
    out = tmp_path / "out.json"
    redline_cli("run", "quick", "--name", "string-(set|get)-100B-pipeline-1$", "--topology", "oss-cluster-3-primaries",
                *SMALL, "--json", out, "--store", tmp_path / "r.db", check_exit=0)
    runs = json.loads(out.read_text())
    assert len(runs) == 2 and all(r["status"] == "ok" and r["topology"] == "oss-cluster-3-primaries" for r in runs)
    get = next(r for r in runs if "-get-" in r["test"])
    assert get["keyspace_hits"] > 0 and get["keyspace_misses"] == 0     # the preload reached every shard
    facts = json.loads(sqlite3.connect(tmp_path / "r.db").execute(
        "SELECT facts FROM runs WHERE test LIKE '%-get-%'").fetchone()[0])
    assert facts["topology"]["cluster"] is True and len(facts["topology"]["servers"]) == 3
    assert facts["dataset"]["keyspace_length"] == 100000
    assert "--cluster-mode" in facts["loadgen_argv"]
    assert facts["state"]["origin"] == "prepared" and "is a cluster" in facts["state"]["why"]   # issue #13


def test_a_test_that_does_not_list_the_topology_is_skipped(tmp_path, redline_cli):
    out = tmp_path / "out.json"
    redline_cli("run", "quick", "--name", "zset-zadd", "--topology", "oss-cluster-3-primaries", *SMALL,
                "--json", out, "--store", tmp_path / "r.db", check_exit=0)
    (run,) = json.loads(out.read_text())
    assert run["status"] == "skipped" and "not oss-cluster-3-primaries" in run["error"]


def test_a_prepared_dataset_is_cached_and_restored_on_the_next_run(tmp_path, redline_cli, monkeypatch):
    monkeypatch.setenv("REDLINE_CACHE", str(tmp_path / "cache"))
    args = ("run", "quick", "--name", "geo", "--duration", "1s", "--warmup", "0s", "--scale", "0.005",
            "--store", tmp_path / "r.db")
    for _ in range(2):
        redline_cli(*args, check_exit=0)
    redline_cli(*args, "--no-snapshots", check_exit=0)
    db = sqlite3.connect(tmp_path / "r.db")
    datasets = [json.loads(f)["dataset"] for (f,) in db.execute("SELECT facts FROM runs ORDER BY id")]
    first, second, fresh = datasets
    # the first run prepared, saved, and restarted from the snapshot: it measured what the second did
    assert first["snapshot"] and first["restored_from"] == first["snapshot"]
    assert second["restored_from"] == first["snapshot"] and second["keyspace_length"] == 1
    assert not fresh.get("restored_from") and "snapshot_key" not in fresh
    assert first["prepared_s"] > 0 and first["restore_s"] > 0 and second["prepared_s"] == second["restore_s"] > 0
    assert first["snapshot_save_s"] > 0 and "snapshot_save_s" not in second
    states = [json.loads(f)["state"] for (f,) in db.execute("SELECT facts FROM runs ORDER BY id")]
    assert [s["origin"] for s in states] == ["restored", "restored", "prepared"]
    assert states[0]["snapshot_key"] == states[1]["snapshot_key"] and states[2]["why"] == "not snapshotted: --no-snapshots"
    ops = [r[0] for r in db.execute("SELECT value FROM metrics WHERE name='ops_per_sec' ORDER BY run_id")]
    assert len(ops) == 3 and all(v > 0 for v in ops)


def test_a_configuration_parameter_the_server_does_not_know_is_skipped(tmp_path, redline_cli):
    run = run_one_suite(tmp_path, redline_cli, "future-parameter", "--ratio 1:0 -c 2 -t 1 --test-time 1",
                        db_lines=("    hash-min-template-entries: '1'",))
    assert run["status"] == "skipped"
    assert "does not know configuration parameter hash-min-template-entries" in run["error"]


def test_replicated_and_io_threads_topologies_run_through_the_engine(tmp_path, redline_cli):
    suites = tmp_path / "suites"
    suites.mkdir()
    path = write_suite(suites, "get-with-preload", "--ratio 0:1 --key-pattern R:R --key-minimum 1 --key-maximum 2000 "
                       "-c 4 -t 1 --test-time 1",
                       db_lines=("  preload_tool:", "    tool: memtier_benchmark",
                                 "    arguments: --ratio 1:0 -n allkeys --key-pattern P:P --key-minimum 1 "
                                 "--key-maximum 2000 -c 2 -t 1 --pipeline 20",
                                 "  check:", "    keyspacelen: 2000"))
    path.write_text(path.read_text().replace("- oss-standalone\n",
                                             "- oss-standalone-01-replicas\n- oss-standalone-02-io-threads\n"))
    out = tmp_path / "out.json"
    redline_cli("run", suites, "--topology", "oss-standalone-01-replicas", "--topology", "oss-standalone-02-io-threads",
                "--warmup", "0s", "--json", out, "--store", tmp_path / "r.db", check_exit=0)
    runs = {r["topology"]: r for r in json.loads(out.read_text())}
    assert set(runs) == {"oss-standalone-01-replicas", "oss-standalone-02-io-threads"}
    assert all(r["status"] == "ok" and r["keyspace_hits"] > 0 and r["keyspace_misses"] == 0 for r in runs.values())
    facts = {r: json.loads(f) for r, f in sqlite3.connect(tmp_path / "r.db").execute("SELECT topology, facts FROM runs")}
    assert facts["oss-standalone-01-replicas"]["dataset"]["replica_sync_s"] >= 0
    assert facts["oss-standalone-02-io-threads"]["topology"]["io_threads"] == 2


def test_a_server_with_an_append_only_file_is_prepared_not_restored(tmp_path, redline_cli, monkeypatch):
    # with appendonly yes redis loads its (empty) AOF instead of dump.rdb: a snapshot cannot seed it
    monkeypatch.setenv("REDLINE_CACHE", str(tmp_path / "cache"))
    args = ("run", "quick", "--name", "geo", "--duration", "1s", "--warmup", "0s", "--scale", "0.005",
            "--store", tmp_path / "r.db")
    redline_cli(*args, check_exit=0)
    redline_cli(*args, "--config", "appendonly=yes", check_exit=0)
    first, aof = [json.loads(f)["dataset"] for (f,) in
                  sqlite3.connect(tmp_path / "r.db").execute("SELECT facts FROM runs ORDER BY id")]
    assert first["snapshot"] and not aof.get("restored_from") and aof["keyspace_length"] == 1


def test_suites_that_prepare_the_same_data_share_one_snapshot(tmp_path, redline_cli, monkeypatch):
    monkeypatch.setenv("REDLINE_CACHE", str(tmp_path / "cache"))
    suites = tmp_path / "suites"
    suites.mkdir()
    preload = ("  preload_tool:", "    tool: memtier_benchmark",
               "    arguments: --ratio 1:0 -n allkeys --key-pattern P:P --key-minimum 1 --key-maximum 150000 -c 2 -t 1")
    write_suite(suites, "a-reads", "--ratio 0:1 --key-maximum 3000 -c 2 -t 1 --test-time 1",
                db_lines=(*preload, "  check:", "    keyspacelen: 150000"))
    write_suite(suites, "b-writes", "--ratio 1:0 --key-maximum 3000 -c 2 -t 1 --test-time 1",
                db_lines=preload)
    write_suite(suites, "c-other-data", "--ratio 0:1 -c 2 -t 1 --test-time 1",
                db_lines=(*preload[:2], preload[2].replace("150000", "2000")))
    redline_cli("run", suites, "--warmup", "0s", "--store", tmp_path / "r.db", check_exit=0)
    datasets = {test: json.loads(facts)["dataset"] for test, facts in
                sqlite3.connect(tmp_path / "r.db").execute("SELECT test, facts FROM runs")}
    assert datasets["a-reads"]["snapshot"] and datasets["a-reads"]["restored_from"] == datasets["a-reads"]["snapshot"]
    assert datasets["b-writes"]["restored_from"] == datasets["a-reads"]["snapshot"]
    assert datasets["b-writes"]["keyspace_length"] == 150000 and not datasets["b-writes"].get("snapshot")
    assert datasets["a-reads"]["snapshot_key"] == datasets["b-writes"]["snapshot_key"]
    assert datasets["c-other-data"]["snapshot_key"] != datasets["a-reads"]["snapshot_key"]
    # a quick preparation is snapshotted too: every prepared test measures a restored server
    assert datasets["c-other-data"]["restored_from"] == datasets["c-other-data"]["snapshot"]


def test_a_window_in_which_no_reply_completed_is_a_failed_run_that_says_why(tmp_path, redline_cli):
    """Every request blocks (BLPOP on a list nobody fills): the window measures nothing, so the
    run failed (exit 1) and says what was in flight, instead of storing zero throughput as a result."""
    suites = tmp_path / "suites"
    suites.mkdir()
    write_suite(suites, "never-answered", '--command="BLPOP nothing 0" --pipeline 2 -c 5 -t 2 --test-time 1')
    out = tmp_path / "out.json"
    proc = redline_cli("run", suites, "--warmup", "0s", "--runs", "4", "--json", out, "--store", tmp_path / "r.db",
                       check_exit=1)
    runs = json.loads(out.read_text())
    assert len(runs) == 2        # failing alike twice in a row: the other two runs are not run, and it says so
    assert "last 2 runs failed (no reply completed" in " ".join(proc.stderr.split())
    run = runs[0]
    assert run["status"] == "failed" and run["ops_per_sec"] is None
    assert run["error"].startswith("no reply completed in the measured 1 s with 20 requests in flight "
                                   "(10 connections × pipeline 2); the server spent ")
    assert run["error"].endswith("so the replies were held back rather than slow (a blocking command waiting for data?)")


def test_a_server_that_drops_every_connection_is_a_failed_run_history_does_not_count(tmp_path, redline_cli):
    """Values over the server's bulk length limit: it closes each connection that sends one.
    The run is failed with the reason (connections lost, the server's error reply), exit 1, and
    `history` finds no result to count."""
    suites = tmp_path / "suites"
    suites.mkdir()
    write_suite(suites, "too-big-values", "--ratio 1:0 -d 2000000 -c 1 -t 1 --test-time 1",
                db_lines=("    proto-max-bulk-len: 1mb",))
    out, db = tmp_path / "out.json", tmp_path / "r.db"
    redline_cli("run", suites, "--warmup", "0s", "--json", out, "--store", db, check_exit=1)
    run = json.loads(out.read_text())[0]
    assert run["status"] == "failed", run
    # the server may close a connection before or after its error reply is read: when no reply was
    # read the window completed nothing, else connections were lost after replies; both say how many
    lost = re.search(r"(\d+) connections (were )?lost", run["error"])
    assert lost and int(lost.group(1)) > 0, run
    if not run["error"].startswith("no request completed"):
        assert run["error"].endswith("ERR Protocol error: invalid bulk length"), run
    history = redline_cli("history", "--store", db, check_exit=2)
    assert "no stored runs with ops_per_sec" in history.stderr


def test_keys_with_a_time_to_live_are_prepared_every_time_never_restored(tmp_path, redline_cli, monkeypatch):
    """An RDB keeps each key's deadline: restored minutes later the keys would be gone."""
    monkeypatch.setenv("REDLINE_CACHE", str(tmp_path / "cache"))
    preload = ("  preload_tool:", "    tool: memtier_benchmark",
               '    arguments: --command "SET __key__ __data__ EX 300" --command-key-pattern P -n allkeys'
               " --key-minimum 1 --key-maximum 150000 -c 5 -t 2 --pipeline 20")
    suites = write_checked_pair(tmp_path, "expiring", "--ratio 0:1 --key-maximum 150000 -c 2 -t 1 --test-time 1",
                                preload, 150000)
    out = tmp_path / "out.json"
    for _ in range(2):
        proc = redline_cli("run", suites, "--name", "expiring$", "--warmup", "0s", "--store", tmp_path / "r.db",
                           check_exit=0)
        assert "dataset snapshot not saved: 150000 keys have a time to live" in " ".join((proc.stdout + proc.stderr).split())
    db = sqlite3.connect(tmp_path / "r.db")
    datasets = [json.loads(f)["dataset"] for (f,) in db.execute("SELECT facts FROM runs ORDER BY id")]
    assert len(datasets) == 2
    assert all(d["keys_with_ttl"] == 150000 and not d.get("snapshot") and not d.get("restored_from")
               for d in datasets)
    states = [json.loads(f)["state"] for (f,) in db.execute("SELECT facts FROM runs ORDER BY id")]
    assert all(s["origin"] == "prepared" and s["why"].startswith("not snapshotted: 150000 keys have a time to live")
               for s in states)
    redline_cli("run", suites, "--name", "wrong", "--warmup", "0s", "--json", out, "--store", tmp_path / "r.db",
                check_exit=1)
    assert json.loads(out.read_text())[0]["error"].endswith("found 150000; 150000 of them have a time to live")


def test_keys_that_expire_while_preparing_count_toward_the_keyspace_check(tmp_path, redline_cli, monkeypatch):
    """A suite's `SET … EX 5` preload outlasts 5 s on a slow machine (the upstream
    1Mkeys-…-with-expiration-240B-400_conns suite did, with 4 I/O threads on one core): the keys
    found and the keys INFO counts as expired while preparing make the check's number."""
    monkeypatch.setenv("REDLINE_CACHE", str(tmp_path / "cache"))
    # 2,000 keys that live 1 s (long enough that no SET finds its key expired already, which the
    # server would delete uncounted); the init commands wait 1.5 s (BLPOP on no list) and then
    # SCAN visits every key and removes the expired ones: all 2,000 are gone, counted as expired
    preload = ("  preload_tool:", "    tool: memtier_benchmark",
               '    arguments: --command "SET __key__ v PX 1000" --command-key-pattern P -n 2000'
               " --key-minimum 1 --key-maximum 2000 -c 1 -t 1",
               "  init_commands:", "  - '\"BLPOP\" \"no-such-list\" \"1.5\"'",
               "  - '\"SCAN\" \"0\" \"COUNT\" \"100000\"'")
    suites = write_checked_pair(tmp_path, "short-lived", "--ratio 0:1 --key-maximum 2000 -c 1 -t 1 --test-time 1",
                                preload, 2000)
    out = tmp_path / "out.json"
    proc = redline_cli("run", suites, "--name", "short-lived$", "--warmup", "0s", "--json", out,
                       "--store", tmp_path / "r.db", check_exit=0)
    assert json.loads(out.read_text())[0]["status"] == "ok"
    facts = json.loads(sqlite3.connect(tmp_path / "r.db").execute("SELECT facts FROM runs").fetchone()[0])
    dataset = facts["dataset"]
    assert dataset["keys_expired_while_preparing"] == 2000 and dataset["keyspace_length"] == 0
    assert "2000 keys expired before it ended" in " ".join((proc.stdout + proc.stderr).split())
    assert facts["state"]["origin"] == "prepared" and not dataset.get("snapshot")   # no one state to restore
    redline_cli("run", suites, "--name", "wrong", "--warmup", "0s", "--json", out, "--store", tmp_path / "r.db",
                check_exit=1)
    error = json.loads(out.read_text())[0]["error"]
    # how many keys were still there when the preload ended depends on how fast it ran (on a loaded
    # machine 2,000 SETs can outlast the keys' 1 s: 1,234 were left once); the rest of the sentence does not
    split = re.fullmatch(r"keyspace check failed: expected 2001 keys after preparation, found 0 \((\d+) after the "
                         r"preload, -(\d+) from init commands\); 2000 keys expired while preparing, fewer than "
                         r"the 2001 missing", error)
    assert split and split[1] == split[2] and 0 < int(split[1]) <= 2000, error


def _escaped(payload: bytes) -> str:
    return "".join(f"\\x{byte:02x}" for byte in payload)


def test_restore_payloads_the_server_refuses_are_found_before_measuring(tmp_path, redline_cli):
    """Upstream's RESTORE suites carry Redis 7.4 DUMP payloads (RDB version 12) that older servers
    refuse: a newer payload skips the suite with the versions, a corrupt one fails it, a good one runs."""
    from conftest import start_redis_server
    server = start_redis_server(tmp_path)
    try:
        server.client().set("k", "AAAAAAAAAA")
        dumped = server.client().dump("k")
    finally:
        server.stop()
    own = int.from_bytes(dumped[-10:-8], "little")
    newer = dumped[:-10] + (own + 2).to_bytes(2, "little") + dumped[-8:]
    corrupt = dumped[:-1] + bytes([dumped[-1] ^ 0xFF])
    suites = tmp_path / "suites"
    suites.mkdir()
    for name, payload in (("restore-good", dumped), ("restore-newer", newer), ("restore-corrupt", corrupt)):
        write_suite(suites, name, f"--command 'RESTORE __key__ 0 \"{_escaped(payload)}\" REPLACE' "
                                  "--key-maximum 100 -c 2 -t 1 --test-time 1")
    out = tmp_path / "out.json"
    redline_cli("run", suites, "--warmup", "0s", "--json", out, "--store", tmp_path / "r.db", check_exit=1)
    runs = {r["test"]: r for r in json.loads(out.read_text())}
    assert runs["restore-good"]["status"] == "ok" and runs["restore-good"]["ops_per_sec"] > 0
    assert not [f for f in runs["restore-good"]["flags"] if "error replies" in f]
    assert runs["restore-newer"]["status"] == "skipped"
    assert runs["restore-newer"]["error"].startswith(
        f"its RESTORE payload is RDB version {own + 2}; this server writes version {own} and refuses newer payloads (")
    assert runs["restore-corrupt"]["status"] == "failed"
    assert runs["restore-corrupt"]["error"] == ("the server refuses the suite's RESTORE payload: "
                                                "DUMP payload version or checksum are wrong")


def test_error_replies_are_counted_with_the_servers_own_words(tmp_path, redline_cli):
    run = run_one_suite(tmp_path, redline_cli, "bad-option", '--command "SET __key__ __data__ NOSUCHOPTION" '
                        '--command-ratio 1 --command "GET __key__" --command-ratio 1 -c 2 -t 1 --test-time 1')
    [flag] = [f for f in run["flags"] if "error replies" in f]
    count = int(flag.split()[0])
    assert count > 100 and flag == f"{count} error replies: {count} × ERR syntax error"


def test_jsonl_streams_every_run_as_it_is_stored(tmp_path):
    """--jsonl: a line per finished run between the session's opening and closing lines, each run
    the same document --json writes."""
    out = tmp_path / "runs.jsonl"
    done = subprocess.run([*REDLINE, "run", "--name", "set-sadd", "--runs", "2", "--duration", "1s", "--warmup", "0s",
                           "--store", str(tmp_path / "r.db"), "--json", str(tmp_path / "r.json"), "--jsonl", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["event"] for line in lines] == ["session_started", "run", "run", "session_finished"]
    assert [line["run"] for line in lines[1:3]] == json.loads((tmp_path / "r.json").read_text())
    assert lines[-1]["runs"] == 2 and lines[0]["session"] == lines[-1]["session"]
