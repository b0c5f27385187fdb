"""redline's work directories under the system's temp directory, and the ones a killed redline
left behind.

Every directory is made by `make_workdir`, which writes its owner (pid and the process's start
time, so a reused pid is not mistaken for the owner) into it. `remove_abandoned_workdirs`, run
when a session starts, removes the directories whose owner no longer runs: a redline killed with
SIGKILL cannot clean up after itself, the next one does.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from redline.system.procfs import start_time

PREFIX = "redline-"
OWNER_FILE = ".redline-owner"


def make_workdir(prefix: str = PREFIX) -> Path:
    """A new directory in the temp directory, marked as this process's."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    (path / OWNER_FILE).write_text(f"{os.getpid()} {start_time(os.getpid())}\n")
    return path


def remove_abandoned_workdirs() -> list[Path]:
    """Remove every marked work directory whose owner process is gone; returns them."""
    removed = []
    for path in Path(tempfile.gettempdir()).glob(f"{PREFIX}*"):
        try:
            pid, started = (path / OWNER_FILE).read_text().split()
            owner_running = start_time(int(pid)) == started
        except (OSError, ValueError):
            continue               # not marked (or not ours): left alone
        if not owner_running:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed
