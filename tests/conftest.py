import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from redline.builder.cache import BuildCache
from redline.server.process import ManagedServer, ServerSettings

REPO = Path(__file__).resolve().parent.parent
# the tests' redline processes take turns on the machine among themselves (redline.system.machine_share),
# not with a redline a developer runs beside them
os.environ["REDLINE_MACHINE_LOCK"] = str(Path(tempfile.mkdtemp(prefix="redline-tests-")) / "machine.lock")
# many tests build Debian's redis tree (and fixture commits of it) in build caches of their own: one
# ccache object cache for all of them makes every build after the first mostly hits
os.environ.setdefault("REDLINE_CCACHE_DIR", str(BuildCache.default().ccache_dir))
REDLINE = [sys.executable, "-m", "redline.cli"]
REDIS_SERVER = Path("/usr/bin/redis-server")


def start_redis_server(workdir: Path | None = None, **config: str) -> ManagedServer:
    """A real Debian redis-server on a free loopback port, no persistence (redline's own
    ManagedServer); `workdir` holds its dump.rdb. The caller stops it."""
    return ManagedServer(ServerSettings(binary=REDIS_SERVER, workdir=workdir, config=config,
                                        start_timeout_s=120)).start()


def wait_for_store(db: Path, ready, *, timeout_s: float = 240) -> bool:
    """Poll the store a running redline writes until `ready(connection)` holds (True), or give up
    after `timeout_s` (False); a store still being created is waited for."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        time.sleep(0.1)
        try:
            with sqlite3.connect(db) as check:
                if ready(check):
                    return True
        except sqlite3.OperationalError:       # the store is still being created
            continue
    return False


@pytest.fixture
def redline_cli(tmp_path):
    """Run the redline CLI as a user would; returns the CompletedProcess."""
    def run(*args, timeout=300, check_exit=None):
        proc = subprocess.run([*REDLINE, *map(str, args)], cwd=tmp_path, capture_output=True, text=True,
                              timeout=timeout, env={**os.environ, "COLUMNS": "200"})
        if check_exit is not None:
            assert proc.returncode == check_exit, (proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:])
        return proc
    return run
