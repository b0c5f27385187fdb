"""Children are started one way (redline.system.children.spawn): they die with redline, and a SIGTERM that
arrives while one is being forked is delivered after the fork instead of inside Python's at-fork
handlers (where it was swallowed with logging's lock held, and redline hung)."""

import os
import signal
import subprocess
import sys
import time

from redline.system.children import DEFERRED_SIGNALS, signals_deferred, spawn


def _blocked_mask(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("SigBlk:"):
                return int(line.split()[1], 16)
    raise AssertionError("no SigBlk line")


def _alive(pid: int) -> bool:
    """Running or sleeping; a zombie waiting for init to reap it is already dead."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _bit(sig: signal.Signals) -> int:
    return 1 << (int(sig) - 1)


def test_a_signal_sent_while_deferred_arrives_when_the_block_ends():
    received = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: received.append(signum))
    try:
        with signals_deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            assert received == []
            assert _blocked_mask(os.getpid()) & _bit(signal.SIGTERM)
        assert received == [signal.SIGTERM]
        assert not _blocked_mask(os.getpid()) & _bit(signal.SIGTERM)
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_signal_that_reaches_another_thread_still_waits_for_the_block_to_end():
    """With a second thread that takes signals, the kernel may deliver the signal there; Python
    then runs the handler in the main thread at once. The block holds it all the same."""
    import threading
    received = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: received.append(signum))
    ready, done = threading.Event(), threading.Event()

    def other_thread():
        signal.pthread_sigmask(signal.SIG_UNBLOCK, DEFERRED_SIGNALS)
        ready.set()
        done.wait(30)

    thread = threading.Thread(target=other_thread)
    thread.start()
    try:
        ready.wait(30)
        with signals_deferred():
            for _ in range(5):        # the main thread blocks the signal: the kernel delivers it to the other thread
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.05)
            assert received == []
        assert received == [signal.SIGTERM]     # once, when the block ends (the same signal noted five times)
    finally:
        done.set()
        thread.join()
        signal.signal(signal.SIGTERM, previous)


def test_a_spawned_child_takes_signals_and_dies_with_its_parent():
    # the child is a real process that would sleep; it must not inherit the parent's deferral
    child = spawn(["sleep", "30"], stdin=subprocess.DEVNULL)
    try:
        mask = _blocked_mask(child.pid)
        for sig in DEFERRED_SIGNALS:
            assert not mask & _bit(sig), f"{sig.name} is blocked in the child"
        with open(f"/proc/{child.pid}/status") as status:
            assert any(line.startswith("State:") for line in status)
    finally:
        child.terminate()
    assert child.wait(timeout=10) == -signal.SIGTERM


def test_a_child_of_a_killed_parent_is_killed_too():
    # a middle process spawns a sleeper and is SIGKILLed: the kernel must kill the sleeper
    code = ("import subprocess, sys, time\n"
            "from redline.system.children import spawn\n"
            "child = spawn(['sleep', '60'])\n"
            "print(child.pid, flush=True)\n"
            "time.sleep(60)\n")
    middle = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        sleeper = int(middle.stdout.readline())
        middle.kill()
        middle.wait(timeout=10)
        deadline = time.monotonic() + 30
        while _alive(sleeper):
            assert time.monotonic() < deadline, f"pid {sleeper} outlived its killed parent"
            time.sleep(0.05)
    finally:
        if middle.poll() is None:
            middle.kill()
