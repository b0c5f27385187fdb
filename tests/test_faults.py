"""Faults cost seconds and leave nothing behind: a hung server is found during the run and
replaced for the next one; a killed redline's work directories and profile leftovers are
cleaned up on the next start. Real redis-server processes, real redline processes."""

import json
import os
import signal
import sqlite3
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import REDLINE, start_redis_server
from redline.server import process_state
from redline.watch import ServerWatch


def children_named(parent: int, name: str) -> list[int]:
    """Processes whose parent is `parent` and whose command is `name`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        if ppid == parent and comm == name:
            found.append(int(entry.name))
    return found


def wait_for_running_run(db: Path, proc: subprocess.Popen, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
        try:
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as check:
                if check.execute("SELECT count(*) FROM runs WHERE status='running'").fetchone()[0]:
                    return
        except sqlite3.Error:
            continue
    pytest.fail("never saw a run in progress")


# -- a hung server ---------------------------------------------------------------------------------
def test_a_stopped_server_fails_its_run_and_the_next_run_gets_a_fresh_server(tmp_path):
    db, out = tmp_path / "r.db", tmp_path / "out.json"
    proc = subprocess.Popen([*REDLINE, "run", "quick", "--name", "string-set-100B-pipeline-10$", "--runs", "3",
                             "--duration", "3s", "--warmup", "0s", "--store", str(db), "--json", str(out)],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "COLUMNS": "200"})
    wait_for_running_run(db, proc)
    [server] = children_named(proc.pid, "redis-server")
    os.kill(server, signal.SIGSTOP)
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 1, stderr[-3000:]
    runs = sorted(json.loads(out.read_text()), key=lambda r: r["run_index"])
    assert [r["status"] for r in runs] == ["failed", "ok", "ok"], runs
    assert runs[0]["error"] == (f"the server stopped answering during the run: process {server} is stopped "
                                "(state T in /proc: SIGSTOP or a debugger); it was killed")
    assert all(r["ops_per_sec"] > 0 for r in runs[1:])
    assert "the server hung and was killed; a fresh one is started for the next run" in stderr
    assert process_state(server) is None                 # killed, not left stopped
    ports = [row[0] for row in sqlite3.connect(db).execute(
        "SELECT json_extract(facts, '$.server_port') FROM runs ORDER BY run_index")]
    assert ports[1] != ports[0] and ports[2] == ports[1]   # a fresh server from the second run on


def test_a_busy_server_is_not_taken_for_a_hung_one_but_a_silent_or_stopped_one_is():
    server = start_redis_server(**{"enable-debug-command": "yes"})
    try:
        watch = ServerWatch(server, silent_limit_s=1.5)
        busy = threading.Thread(target=server.client().eval, args=(
            "local t = redis.call('TIME') local stop = t[1] + 3 "
            "while tonumber(redis.call('TIME')[1]) < stop do end return 1", 0))
        busy.start()
        while busy.is_alive():                  # a script burning CPU answers no PING for 3 s
            assert watch(), watch.hung
            time.sleep(0.1)
        sleeping = threading.Thread(target=server.client().execute_command, args=("DEBUG", "SLEEP", "4"))
        sleeping.start()                        # no PING answered and no CPU used: hung
        while watch() and sleeping.is_alive():
            time.sleep(0.1)
        sleeping.join()
        assert watch.hung and watch.hung.startswith("it answered no PING and used no CPU for "), watch.hung
        stopped = ServerWatch(server)
        os.kill(server.process.pid, signal.SIGSTOP)
        deadline = time.monotonic() + 10          # the process stops when it next runs
        while stopped() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert stopped.hung == (f"process {server.process.pid} is stopped (state T in /proc: SIGSTOP "
                                "or a debugger)")
    finally:
        server.stop()                           # kills a stopped server at once
    assert process_state(server.process.pid) is None
