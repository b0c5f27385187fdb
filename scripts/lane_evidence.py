"""Why the scheduler's lanes are processes and not threads (redline/lab/scheduler.py; docs/gate.md,
"Threads or processes"): four facts of this code base, each shown by running it.

    .venv/bin/python scripts/lane_evidence.py [--dump callgrind.out.gz] [--repeat 3]

1. the store: a Store opened in one thread refuses to be used from another (sqlite3's
   check_same_thread), so lane threads would need a connection each or a lock around one;
2. signals: redline's SIGTERM (and Ctrl-C) becomes KeyboardInterrupt in the main thread only; a
   thread blocked in a subprocess wait never sees it — the engine marks a run `interrupted` by
   catching exactly that exception inside the measuring code, which a lane thread would not;
3. child processes die with the *thread* that started them (redline.system.children.spawn sets
   the parent-death signal, which the kernel sends when the forking thread exits);
4. the GIL: parsing a callgrind dump (Python work every counted run does) in two threads takes
   about as long as doing it twice in one; in two processes, about as long as doing it once.
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from redline.instructions.callgrind_file import parse_callgrind  # noqa: E402
from redline.store.results import Store  # noqa: E402
from redline.system.children import spawn  # noqa: E402


def store_across_threads() -> str:
    with tempfile.TemporaryDirectory() as directory:
        store = Store(Path(directory) / "r.db")
        outcome: list[str] = []

        def use():
            try:
                store.begin_session(kind="gate", argv=[], machine={})
                outcome.append("used")
            except Exception as exc:          # noqa: BLE001 - the point is which exception
                outcome.append(f"{type(exc).__name__}: {exc}")
        thread = threading.Thread(target=use)
        thread.start()
        thread.join()
        return outcome[0]


def interrupt_reaches() -> str:
    def terminate(signum, frame):
        raise KeyboardInterrupt
    previous = signal.signal(signal.SIGTERM, terminate)
    seen = {"thread": "no exception: its subprocess wait ran to the end"}

    def lane():
        try:
            subprocess.run(["sleep", "2"], check=True)
        except BaseException as exc:              # noqa: BLE001
            seen["thread"] = type(exc).__name__
    thread = threading.Thread(target=lane)
    thread.start()
    time.sleep(0.3)
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(3)
        seen["main"] = "nothing"
    except KeyboardInterrupt:
        seen["main"] = "KeyboardInterrupt"
    thread.join()
    signal.signal(signal.SIGTERM, previous)
    return f"main thread: {seen['main']}; lane thread: {seen['thread']}"


def children_of_a_thread() -> str:
    started: list[subprocess.Popen] = []
    thread = threading.Thread(target=lambda: started.append(spawn(["sleep", "30"])))
    thread.start()
    thread.join()                    # the thread that forked the child ends here
    child = started[0]
    try:
        code = child.wait(timeout=10)
        return f"the child ended when its thread did (exit {code}: killed by signal {-code})"
    except subprocess.TimeoutExpired:
        child.kill()
        return "the child outlived its thread"


def _parse(path: str) -> int:
    return len(parse_callgrind(Path(path)).self_cost)


def gil(dump: Path, repeat: int) -> str:
    def timed(pool_class, workers: int) -> float:
        started = time.monotonic()
        with pool_class(max_workers=workers) as pool:
            list(pool.map(_parse, [str(dump)] * workers * repeat))
        return time.monotonic() - started
    one = timed(ThreadPoolExecutor, 1) / 1
    threads = timed(ThreadPoolExecutor, 2)
    processes = timed(ProcessPoolExecutor, 2)
    return (f"parsing {dump.name} ({dump.stat().st_size / 1e6:.1f} MB) {repeat}x per worker: one worker "
            f"{one:.2f} s; two threads {threads:.2f} s ({threads / one:.2f}x one worker's time); two processes "
            f"{processes:.2f} s ({processes / one:.2f}x)")


def a_dump(workdir: Path) -> Path:
    """A real callgrind dump: one counted, profiled run of the quick suite's GET."""
    store = workdir / "r.db"
    subprocess.run([sys.executable, "-m", "redline.cli", "run", "quick", "--name", "string-get-100B-pipeline-1$",
                    "--measure", "instructions", "--runs", "1", "--profile", "--store", str(store)],
                   capture_output=True)     # the profile is stored whatever the table printed afterwards
    packed = next(workdir.glob("r-artifacts/run-*/callgrind.out.gz"))
    dump = workdir / "callgrind.out"
    with gzip.open(packed) as source, open(dump, "wb") as target:
        shutil.copyfileobj(source, target)
    return dump


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dump", type=Path, help="a callgrind dump (default: made by one counted run)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"load average at the start: {os.getloadavg()[0]:.1f}")
    print("1. a Store used from another thread:", store_across_threads())
    print("2. SIGTERM while a lane thread waits on a subprocess:", interrupt_reaches())
    print("3. a child started by a thread that then ends:", children_of_a_thread())
    with tempfile.TemporaryDirectory() as directory:
        dump = args.dump
        if dump is None:
            dump = a_dump(Path(directory))
        elif dump.suffix == ".gz":
            plain = Path(directory) / "callgrind.out"
            with gzip.open(dump) as source, open(plain, "wb") as target:
                shutil.copyfileobj(source, target)
            dump = plain
        print("4. the GIL:", gil(dump, args.repeat))
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
