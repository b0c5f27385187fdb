"""What a hung server costs: three 3 s runs of one quick test; the server is SIGSTOPped 1 s into
the first. Prints each run's wall time from the store and how long after the SIGSTOP the failed
run ended. Usage: .venv/bin/python scripts/hung_server_cost.py"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def server_child(parent: int) -> int:
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if "(redis-server)" in stat and int(stat.rsplit(")", 1)[1].split()[1]) == parent:
            return int(entry.name)
    raise SystemExit("no redis-server started by redline")


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="hung-server-cost-") as tmp:
        db = Path(tmp) / "r.db"
        proc = subprocess.Popen([sys.executable, "-m", "redline.cli", "run", "quick", "--name",
                                 "string-set-100B-pipeline-10$", "--runs", "3", "--duration", "3s", "--warmup", "0s",
                                 "--store", str(db)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while True:
            time.sleep(0.1)
            try:
                with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as check:
                    if check.execute("SELECT count(*) FROM runs WHERE status='running'").fetchone()[0]:
                        break
            except sqlite3.Error:
                continue
        time.sleep(1.0)
        stopped_at = time.time()
        os.kill(server_child(proc.pid), signal.SIGSTOP)
        proc.wait()
        with sqlite3.connect(db) as store:
            for index, status, started, finished in store.execute(
                    "SELECT run_index, status, started_at, finished_at FROM runs ORDER BY id"):
                after = f"; ended {finished - stopped_at:.2f} s after the SIGSTOP" if index == 0 else ""
                print(f"run {index}: {status}, {finished - started:.2f} s{after}")
        print(f"redline exit status {proc.returncode}")


if __name__ == "__main__":
    main()
