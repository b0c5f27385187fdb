"""Running make on a private source tree: a clean environment, a log, progress, a timeout."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from redline.builder.sources import GIT_REDIRECTS
from redline.core.errors import RunError, UsageError
from redline.system.children import spawn

Progress = Callable[[str], None]

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
TAIL_LINES = 20

# Variables a user's environment could set to change the build behind the cache key's back:
# make sees only what the variant says.
SCRUBBED_ENV = ("CC", "CCACHE_DIR", "CCACHE_BASEDIR", "CCACHE_NOHASHDIR", "CCACHE_DISABLE", "CFLAGS", "CPPFLAGS", "LDFLAGS", "OPTIMIZATION", "MALLOC", "USE_JEMALLOC",
                "USE_SYSTEM_JEMALLOC", "USE_TCMALLOC", "USE_TCMALLOC_MINIMAL", "BUILD_TLS", "USE_SYSTEMD",
                "REDIS_CFLAGS", "REDIS_LDFLAGS", "SERVER_CFLAGS", "SERVER_LDFLAGS", "SANITIZER",
                "PROG_SUFFIX", "PREFIX", "V", "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "GNUMAKEFLAGS",
                *GIT_REDIRECTS)


class BuildFailed(RunError):
    """make failed: the message carries the log's tail and its path."""

    def __init__(self, message: str, *, log: Path, tail: list[str]):
        super().__init__(message)
        self.log = log
        self.tail = tail


@dataclass(frozen=True)
class MakeJob:
    tree: Path                      # the source tree's root (holds src/Makefile)
    targets: tuple[str, ...]
    variables: tuple[str, ...]      # NAME=VALUE, from the variant
    jobs: int
    log: Path
    timeout_s: float
    ccache_dir: Path | None = None  # compile through ccache with this cache (None: plain compiler)

    def command(self) -> list[str]:
        """The command run: as recorded, but with the compiler behind ccache when one is used
        (ccache returns what the compiler would, so the binary and its cache key stay the same)."""
        variables = self.variables
        if self.ccache_dir is not None:
            variables = tuple(f"CC=ccache {v[3:]}" if v.startswith("CC=") else v for v in variables)
        return ["make", "-C", str(self.tree / "src"), f"-j{self.jobs}", *self.targets, *variables]

    def environment(self, scratch: Path) -> dict[str, str]:
        env = build_environment(scratch=scratch)
        if self.ccache_dir is not None:
            # Every build happens in a new workspace: paths under it are hashed relative to it
            # (base_dir) and the working directory is left out of the hash, so the same source
            # compiled in another workspace is a hit.
            env.update(CCACHE_DIR=str(self.ccache_dir), CCACHE_BASEDIR=str(self.tree),
                       CCACHE_NOHASHDIR="true")
        return env

    def recorded_command(self) -> list[str]:
        """The command as recorded: relative to the source tree (the workspace is temporary)."""
        return ["make", "-C", "src", f"-j{self.jobs}", *self.targets, *self.variables]


def cpu_count() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return os.cpu_count() or 1


def compiler_version(cc: str) -> str:
    """First line of `CC --version` (e.g. 'gcc (Debian 12.2.0-14) 12.2.0'), with the path."""
    path = shutil.which(cc)
    if path is None:
        raise UsageError(f"compiler {cc!r} not found on PATH")
    try:
        proc = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
    except OSError as exc:
        raise UsageError(f"cannot run compiler {path}: {exc}") from None
    first = (proc.stdout or proc.stderr).strip().splitlines()
    if proc.returncode != 0 or not first:
        raise UsageError(f"{path} --version failed; is {cc!r} a C compiler?")
    return f"{first[0]} [{os.path.realpath(path)}]"


def ccache_available() -> bool:
    """Whether builds can go through ccache (Debian package `ccache`, installed by setup.sh)."""
    return shutil.which("ccache") is not None


def build_environment(*, scratch: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV}
    env["LC_ALL"] = "C"
    # git commands in the build (redis' mkreleasehdr.sh) must not climb out of the workspace
    # into some repository around the cache.
    env["GIT_CEILING_DIRECTORIES"] = str(scratch)
    return env


def run_make(job: MakeJob, *, scratch: Path, progress: Progress | None = None) -> None:
    """Run make, writing every line (colour codes removed) to job.log and to `progress`.

    Raises BuildFailed with the log's last lines when make fails or runs past the timeout.
    """
    if shutil.which("make") is None:
        raise UsageError("make is not installed (apt-get install build-essential)")
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    timed_out = threading.Event()
    with open(job.log, "w", encoding="utf-8", errors="replace", buffering=1) as log:
        log.write("$ " + " ".join(job.command()) + "\n")
        log.flush()
        proc = spawn(job.command(), cwd=job.tree, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                     stderr=subprocess.STDOUT, env=job.environment(scratch),
                                start_new_session=True)

        def expire() -> None:
            timed_out.set()
            _kill_group(proc)

        watchdog = threading.Timer(job.timeout_s, expire)
        watchdog.daemon = True
        watchdog.start()
        try:
            assert proc.stdout is not None
            for raw in proc.stdout:
                line = ANSI.sub("", raw.decode("utf-8", errors="replace")).rstrip()
                log.write(line + "\n")
                tail.append(line)
                if progress is not None and line.strip():
                    progress(line)
            code = proc.wait()
        except BaseException:
            _kill_group(proc)
            raise
        finally:
            watchdog.cancel()
        if timed_out.is_set():
            log.write(f"redline: make killed after {job.timeout_s:.0f}s\n")
    if timed_out.is_set():
        raise BuildFailed(f"make ran longer than {job.timeout_s:.0f}s and was stopped", log=job.log, tail=list(tail))
    if code != 0:
        raise BuildFailed(f"make exited with status {code}", log=job.log, tail=list(tail))


def _kill_group(proc: subprocess.Popen) -> None:
    """Stop make and every compiler it started (they share make's process group)."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 5
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
