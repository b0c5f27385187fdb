"""The spine's parts on their own: targets, servers, probes, the store, the run order."""

import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from redline.commands.argtypes import duration
from redline.engine.engine import interleaved
from redline.engine.run_plan import Side
from redline.core.errors import RunError, UsageError
from redline.server.probes import WindowProbe, read_cpu
from redline.server.process import ManagedServer, ServerSettings
from redline.core.run import Run
from redline.store.results import Store
from redline.server.targets import parse_config_pairs, parse_target

REDIS = Path("/usr/bin/redis-server")


# -- targets ---------------------------------------------------------------------------------
def test_bin_target_resolves_an_existing_binary():
    target = parse_target(f"bin:{REDIS}")
    assert target.managed and target.binary == REDIS


@pytest.mark.parametrize("text, message", [
    ("ftp://x:1", "unknown target scheme 'ftp'"),
    ("redis-server", "unknown target scheme 'redis-server'"),
    ("bin:/nonexistent/redis-server", "server binary does not exist: /nonexistent/redis-server"),
    ("tcp://127.0.0.1", "needs a host and a port"),
    ("tcp://127.0.0.1:notaport", "needs a host and a port"),
])
def test_bad_targets_are_usage_errors(text, message):
    with pytest.raises(UsageError, match=message):
        parse_target(text)


def test_non_executable_binary_is_refused(tmp_path):
    fake = tmp_path / "redis-server"
    fake.write_text("not a program")
    with pytest.raises(UsageError, match="not an executable file"):
        parse_target(f"bin:{fake}")


def test_config_pairs():
    assert parse_config_pairs(["appendonly=yes", "save="], "--config") == {"appendonly": "yes", "save": ""}
    with pytest.raises(UsageError, match="--config expects NAME=VALUE, got 'appendonly'"):
        parse_config_pairs(["appendonly"], "--config")


def test_durations():
    assert duration("10s") == 10 and duration("500ms") == 0.5 and duration("2m") == 120 and duration("3") == 3
    with pytest.raises(Exception, match="not a duration"):
        duration("ten")


# -- servers ---------------------------------------------------------------------------------
def test_managed_server_starts_pinned_with_no_persistence_and_stops():
    server = ManagedServer(ServerSettings(binary=REDIS, cpus=(0,))).start()
    try:
        client = server.client()
        assert client.ping()
        assert client.config_get("save")["save"] == ""
        assert client.config_get("appendonly")["appendonly"] == "no"
        pid = server.pids()[0]
        assert os.sched_getaffinity(pid) == {0}
        before = read_cpu([pid])
        for _ in range(2000):
            client.set("k", "v")
        after = read_cpu([pid])
        assert after.total_s > before.total_s
    finally:
        server.stop()
    assert not server.alive()
    assert not server.workdir.exists()


def test_the_probe_reads_cpu_on_time_while_the_server_is_busy_and_server_time_per_call():
    """A server busy with a 1.5 s script answers INFO late; the window's CPU edges are still read
    when marked, and the per-call cost of a command comes from INFO commandstats."""
    server = ManagedServer(ServerSettings(binary=REDIS)).start()
    try:
        client = server.client()
        client.sadd("s", *range(10_000))
        for _ in range(20):
            client.srandmember("s", 5000)
        busy_loop = ("local t = redis.call('TIME') repeat local n = redis.call('TIME') "
                     "until (n[1] - t[1]) * 1000000 + (n[2] - t[2]) > 1500000")
        script = threading.Thread(target=server.client().eval, args=(busy_loop, 0))
        script.start()
        time.sleep(0.2)
        probe = WindowProbe(pids=server.pids(), client=server.info_client())
        started = time.monotonic()
        probe.mark_start()
        probe.mark_end()
        script.join()
        assert time.monotonic() - started > 1.0          # INFO waited for the script
        assert probe.cpu.at < 0.5 and probe.cpu.total_s < 0.5
        assert probe.info_start is not None and probe.info_end is not None
        calls, ms_per_call = probe.server_time_per_call(["SRANDMEMBER"])
        assert calls == 20 and ms_per_call > 0.05
        assert probe.server_time_per_call(["GET"]) is None       # never called
    finally:
        server.stop()


def test_busy_port_is_replaced_by_a_free_one():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        server = ManagedServer(ServerSettings(binary=REDIS, preferred_port=taken)).start()
        try:
            assert server.port != taken and server.busy_ports == [taken]
            assert server.client().ping()
        finally:
            server.stop()


def test_bad_configuration_fails_with_the_servers_reason():
    server = ManagedServer(ServerSettings(binary=REDIS, config={"no-such-directive": "1"}))
    with pytest.raises(RunError, match="redis-server exited during start .*no-such-directive|Bad directive"):
        server.start()
    server.stop()


def test_suite_configuration_reaches_the_server():
    server = ManagedServer(ServerSettings(binary=REDIS, config={"hz": "25", "save": '""'})).start()
    try:
        assert server.client().config_get("hz")["hz"] == "25"
    finally:
        server.stop()


# -- store -------------------------------------------------------------------------------------
def test_store_writes_a_run_with_metrics_and_series_atomically(tmp_path):
    store = Store(tmp_path / "r.db")
    assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    session = store.begin_session(kind="run", argv=["redline"], machine={})
    run = Run(test="t", target="bin:x", side=None, run_index=0, session_id=session)
    store.run_started(run)
    assert store.runs()[0]["status"] == "running"
    run.metrics, run.series = {"ops_per_sec": 10.0}, {"ops": [1, 2, 3]}
    run.finish("ok")
    store.run_finished(run)
    assert store.runs()[0]["status"] == "ok"
    assert store.metrics(run.run_id) == {"ops_per_sec": 10.0}
    assert store.series(run.run_id, "ops") == [1, 2, 3]
    [loaded] = store.load_runs(session)
    assert loaded.to_json() == run.to_json()


def test_a_failing_write_leaves_no_half_run(tmp_path):
    store = Store(tmp_path / "r.db")
    session = store.begin_session(kind="run", argv=[], machine={})
    run = Run(test="t", target="x", side=None, run_index=0, session_id=session)
    store.run_started(run)
    run.metrics, run.status = {"ops_per_sec": 1.0}, "nonsense-status"
    with pytest.raises(Exception):
        store.run_finished(run)
    assert store.metrics(run.run_id) == {}
    assert store.runs()[0]["status"] == "running"


def test_killed_writer_keeps_finished_runs_and_marks_the_open_one_interrupted(tmp_path):
    db = tmp_path / "r.db"
    script = textwrap.dedent(f"""
        import time
        from redline.core.run import Run
        from redline.store.results import Store
        s = Store({str(db)!r})
        session = s.begin_session(kind="run", argv=[], machine={{}})
        done = Run(test="first", target="x", side=None, run_index=0, session_id=session)
        s.run_started(done)
        done.metrics = {{"ops_per_sec": 5.0}}
        done.finish("ok")
        s.run_finished(done)
        s.run_started(Run(test="second", target="x", side=None, run_index=0, session_id=session))
        print("ready", flush=True)
        time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    store = Store(db)
    statuses = {r["test"]: r["status"] for r in store.runs()}
    assert statuses == {"first": "ok", "second": "interrupted"}
    assert store.metrics(store.runs()[0]["id"]) == {"ops_per_sec": 5.0}


# -- run order ---------------------------------------------------------------------------------
def test_two_sides_are_interleaved_abba():
    a, b = Side(parse_target(f"bin:{REDIS}"), "baseline"), Side(parse_target(f"bin:{REDIS}", {"hz": "20"}), "comparison")
    order = [(side.name, i) for side, i in interleaved([a, b], 4)]
    assert order == [("baseline", 0), ("comparison", 0), ("comparison", 1), ("baseline", 1),
                     ("baseline", 2), ("comparison", 2), ("comparison", 3), ("baseline", 3)]


def test_a_duration_turns_a_request_count_suite_into_a_timed_run(tmp_path):
    from redline.load.redline_load import LoadRequest
    request = LoadRequest(arguments=["-n", "allkeys", "--ratio", "1:0", "--requests=5", "--key-prefix", "k"],
                          host="127.0.0.1", port=1, json_path=tmp_path / "x.json", duration_s=3)
    argv = request.argv()
    assert "-n" not in argv and "allkeys" not in argv and "--requests=5" not in argv
    assert argv[argv.index("--test-time") + 1] == "3" and "--key-prefix" in argv
    untimed = LoadRequest(arguments=["-n", "100"], host="127.0.0.1", port=1, json_path=tmp_path / "x.json")
    assert untimed.argv()[1:3] == ["-n", "100"]
