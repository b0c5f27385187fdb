"""redline.system.machine_share: a timed test runs alone on the machine, counted tests share it,
across processes (real flock on a real file, real processes; a real `redline run` on Debian's
redis-server waits for a timed test another process holds). No test here depends on how fast the
machine is: every wait is ended by the test itself, and the order of events is what is checked."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import REDLINE, REPO
from redline.system.machine_share import LOCK_ENV, machine_share

HOLDER = """
import sys
from redline.system.machine_share import machine_share
with machine_share(counted=sys.argv[1] == "counted"):
    print("held", flush=True)
    sys.stdin.readline()
print("released", flush=True)
"""


@pytest.fixture
def lock(tmp_path, monkeypatch):
    path = tmp_path / "machine.lock"
    monkeypatch.setenv(LOCK_ENV, str(path))
    return path


class Holder:
    """Another process holding the machine (timed or counted) until released or killed."""

    def __init__(self, kind: str):
        self.process = subprocess.Popen([sys.executable, "-c", HOLDER, kind], cwd=REPO, text=True,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self.process.stdout.readline().strip() == "held"

    def release(self) -> None:
        self.process.stdin.write("\n")
        self.process.stdin.flush()
        assert self.process.stdout.readline().strip() == "released"
        assert self.process.wait(timeout=60) == 0

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(timeout=60)


class Contender(threading.Thread):
    """This process asking for the machine in a thread: records whether it had to wait, and when
    it got the machine relative to the holder's release."""

    def __init__(self, *, counted: bool):
        super().__init__(daemon=True)
        self.counted = counted
        self.waiting = threading.Event()
        self.got = threading.Event()
        self.messages: list[str] = []

    def run(self) -> None:
        def waiting(text: str) -> None:
            self.messages.append(text)
            self.waiting.set()
        with machine_share(counted=self.counted, waiting=waiting):
            self.got.set()


def contend_while_held(holder_kind: str, *, counted: bool, end) -> Contender:
    """A holder of `holder_kind`, a contender that must wait for it; `end(holder)` frees it."""
    holder = Holder(holder_kind)
    contender = Contender(counted=counted)
    contender.start()
    assert contender.waiting.wait(60), "the contender never said it waits"
    assert not contender.got.is_set()
    end(holder)
    assert contender.got.wait(60), "the contender never got the machine"
    contender.join(60)
    return contender


@pytest.mark.parametrize("holder_kind, counted", [("timed", False), ("timed", True), ("counted", False)])
def test_a_timed_test_never_shares_the_machine(lock, holder_kind, counted):
    contender = contend_while_held(holder_kind, counted=counted, end=Holder.release)
    assert len(contender.messages) == 1 and str(lock) in contender.messages[0]
    assert ("timed test" in contender.messages[0]) and (("another" in contender.messages[0]) == counted)


def test_counted_tests_share_the_machine(lock):
    holder = Holder("counted")
    try:
        contender = Contender(counted=True)
        contender.start()
        contender.join(60)
        assert contender.got.is_set() and not contender.messages
    finally:
        holder.release()


def test_a_killed_holder_frees_the_machine(lock):
    contend_while_held("timed", counted=False, end=Holder.kill)


def test_a_nested_test_passes_through_and_threads_take_turns(lock):
    with machine_share(counted=True):
        with machine_share(counted=False):         # nested: already covered, no deadlock with itself
            contender = Contender(counted=False)   # another thread is another user of the machine
            contender.start()
            assert contender.waiting.wait(60)
            assert not contender.got.is_set()
    assert contender.got.wait(60)
    contender.join(60)


def test_a_redline_run_waits_for_a_timed_test_of_another_process(tmp_path, lock):
    """A real `redline run` (timed, Debian's redis-server) started while another process holds the
    machine says it waits and runs nothing until the holder lets go; then it measures as usual."""
    db, out = tmp_path / "runs.db", tmp_path / "out.txt"
    holder = Holder("timed")
    with out.open("w") as sink:
        run = subprocess.Popen([*REDLINE, "run", "quick", "--name", "string-get-100B-pipeline-10$", "--runs", "1",
                                "--duration", "1s", "--warmup", "0s", "--store", str(db)], cwd=tmp_path,
                               stdout=sink, stderr=subprocess.STDOUT, env={**os.environ, "COLUMNS": "200"})
    try:
        deadline = time.monotonic() + 240
        while "waiting for the other redline processes" not in out.read_text():
            assert run.poll() is None, out.read_text()[-3000:]
            assert time.monotonic() < deadline, out.read_text()[-3000:]
            time.sleep(0.2)
        if db.exists():
            with sqlite3.connect(db) as check:
                assert check.execute("SELECT count(*) FROM runs").fetchone()[0] == 0
        released_at = time.time()
        holder.release()
        assert run.wait(timeout=300) == 0, out.read_text()[-3000:]
    finally:
        if run.poll() is None:
            run.send_signal(signal.SIGTERM)
            run.wait(timeout=60)
        if holder.process.poll() is None:
            holder.kill()
    with sqlite3.connect(db) as check:
        started = [row[0] for row in check.execute("SELECT started_at FROM runs WHERE status = 'ok'")]
    assert len(started) == 1 and started[0] >= released_at, (started, released_at)
