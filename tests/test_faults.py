"""Faults cost seconds and leave nothing behind: a hung server is found during the run and
replaced for the next one; a killed redline's work directories and profile leftovers are
cleaned up on the next start. Real redis-server processes, real redline processes."""

import json
import os
import shutil
import signal
import sqlite3
import stat
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

from conftest import REDLINE, start_redis_server
from redline.system.procfs import process_state
from redline.server.watch import ServerHung, ServerWatch
from redline.system.workdirs import OWNER_FILE, make_workdir, remove_abandoned_workdirs
from test_run_cli import write_suite


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
    # a read-only test: a writing one restarts its server before every run anyway (redline.bench.state)
    proc = subprocess.Popen([*REDLINE, "run", "quick", "--name", "string-get-100B-pipeline-10$", "--runs", "3",
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
            assert watch()
            time.sleep(0.1)
        sleeping = threading.Thread(target=server.client().execute_command, args=("DEBUG", "SLEEP", "10"))
        sleeping.start()                        # no PING answered and no CPU used: hung (found after
                                                # ~2.5 s idle; 10 s leaves room on a loaded machine)
        with pytest.raises(ServerHung, match="^the server stopped answering: it answered no PING and "
                                             "used no CPU for [0-9]+ s$"):
            while sleeping.is_alive():
                watch()
                time.sleep(0.1)
        sleeping.join()
        stopped = ServerWatch(server)
        os.kill(server.process.pid, signal.SIGSTOP)
        deadline = time.monotonic() + 10          # the process stops when it next runs
        with pytest.raises(ServerHung) as raised:
            while time.monotonic() < deadline:
                stopped()
                time.sleep(0.05)
        assert raised.value.reason == (f"process {server.process.pid} is stopped (state T in /proc: SIGSTOP "
                                       "or a debugger)")
    finally:
        server.stop()                           # kills a stopped server at once
    assert process_state(server.process.pid) is None


def test_a_server_stopped_during_the_preload_fails_the_preparation_at_once(tmp_path):
    """The preload is watched like a run: a stopped server ends it with the reason instead of
    waiting for the preload's time limit."""
    suites = tmp_path / "suites"
    suites.mkdir()
    write_suite(suites, "big-preload", "--ratio 0:1 --key-maximum 3000000 -d 100 -c 1 -t 1 --test-time 1",
                db_lines=("  preload_tool:", "    tool: memtier_benchmark",
                          "    arguments: --ratio 1:0 -n allkeys --key-pattern P:P --key-minimum 1 "
                          "--key-maximum 3000000 -d 100 -c 1 -t 1 --pipeline 10 --hide-histogram"))
    proc = subprocess.Popen([*REDLINE, "run", str(suites), "--warmup", "0s", "--no-snapshots",
                             "--store", str(tmp_path / "r.db"), "--json", str(tmp_path / "out.json")],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "COLUMNS": "200"})
    deadline = time.monotonic() + 120
    preloading = []
    while not preloading and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
        preloading = [pid for pid in children_named(proc.pid, "redline-load")
                      if "preload-" in Path(f"/proc/{pid}/cmdline").read_text(errors="replace")]
    assert preloading, "never saw the preload running"
    [server] = children_named(proc.pid, "redis-server")
    os.kill(server, signal.SIGSTOP)
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 1, stderr[-2000:]
    [run] = json.loads((tmp_path / "out.json").read_text())
    assert run["status"] == "failed"
    assert f"the server stopped answering: process {server} is stopped (state T in /proc" in run["error"], run
    assert process_state(server) is None


# -- what a killed redline leaves behind -----------------------------------------------------------
def workdirs_of(pid: int) -> list[Path]:
    """The temp-directory work directories marked as owned by process `pid`."""
    owned = []
    for path in Path(tempfile.gettempdir()).glob("redline-*"):
        try:
            if (path / OWNER_FILE).read_text().split()[0] == str(pid):
                owned.append(path)
        except (OSError, IndexError):
            continue
    return owned


def start_profiled_run(tmp_path) -> tuple[subprocess.Popen, Path]:
    """A profiled run; returns once perf has written data for it: the process and perf.data."""
    proc = subprocess.Popen([*REDLINE, "run", "quick", "--name", "string-set-100B-pipeline-10$", "--runs", "1",
                             "--duration", "5s", "--warmup", "0s", "--profile", "--store", str(tmp_path / "r.db")],
                            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
        perf_data = next((p for p in (tmp_path / "r-artifacts").glob("run-*/perf.data") if p.stat().st_size > 0), None)
        if perf_data is not None:
            return proc, perf_data
    proc.kill()
    pytest.skip(f"no profiled run started (perf unusable here?): {proc.communicate()[1][-500:]}")


def run_status(db: Path, run_dir: Path) -> str:
    run_id = int(run_dir.name.removeprefix("run-"))
    return sqlite3.connect(db).execute("SELECT status FROM runs WHERE id=?", (run_id,)).fetchone()[0]


def test_after_sigkill_the_next_session_removes_work_directories_and_profile_leftovers(tmp_path, redline_cli):
    """SIGKILL during a profiled run: the work directories in /tmp and perf's data file and FIFOs
    stay (nothing can clean up after SIGKILL); the next session removes them and marks the run."""
    proc, perf_data = start_profiled_run(tmp_path)
    owned = workdirs_of(proc.pid)
    proc.kill()
    proc.wait()
    fifos = [p for p in perf_data.parent.iterdir() if stat.S_ISFIFO(p.lstat().st_mode)]
    assert owned and all(p.exists() for p in owned) and perf_data.exists() and fifos
    write_suite(tmp_path, "short", "--ratio 1:0 --key-maximum 100 -d 10 -c 1 -t 1 --test-time 1")
    redline_cli("run", tmp_path / "short.yml", "--warmup", "0s", "--store", tmp_path / "r.db", check_exit=0)
    assert [p for p in owned if p.exists()] == []
    assert not perf_data.exists() and not [p for p in fifos if p.exists()]
    assert run_status(tmp_path / "r.db", perf_data.parent) == "interrupted"


def test_sigterm_during_a_profiled_run_leaves_no_perf_data_fifo_or_work_directory(tmp_path):
    proc, perf_data = start_profiled_run(tmp_path)
    owned = workdirs_of(proc.pid)
    proc.terminate()
    assert proc.wait(timeout=60) == 130
    assert owned and [p for p in owned if p.exists()] == []
    assert not perf_data.exists()
    assert not [p for p in perf_data.parent.iterdir() if stat.S_ISFIFO(p.lstat().st_mode)]
    assert run_status(tmp_path / "r.db", perf_data.parent) == "interrupted"


def test_a_directory_whose_owner_runs_or_that_is_not_marked_is_left_alone(tmp_path):
    mine = make_workdir("redline-test-")
    unmarked = Path(tempfile.mkdtemp(prefix="redline-test-unmarked-"))
    try:
        assert mine not in remove_abandoned_workdirs() and mine.exists() and unmarked.exists()
    finally:
        shutil.rmtree(mine)
        shutil.rmtree(unmarked)


def test_a_suite_cannot_make_a_run_with_lost_connections_count(tmp_path):
    """--reconnect-on-error decides whether a run that lost connections is a result: redline's,
    not the suite's (dropped from its arguments); redline passes it for preloads only."""
    from redline.load.redline_load import LoadRequest
    suite_args = ["--ratio", "1:0", "--reconnect-on-error", "-c", "2"]
    measured = LoadRequest(suite_args, "127.0.0.1", 7000, tmp_path / "j.json").argv()
    preload = LoadRequest(suite_args, "127.0.0.1", 7000, tmp_path / "j.json", reconnect_on_error=True).argv()
    assert "--reconnect-on-error" not in measured
    assert preload.count("--reconnect-on-error") == 1 and preload[-1] == "--reconnect-on-error"
