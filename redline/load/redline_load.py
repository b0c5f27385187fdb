"""Running redline-load (the memtier-compatible load generator); what it reports is read by\nredline.load.report."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Protocol

from redline.core.errors import RunError
from redline.load.report import LoadReport
from redline.suites import roles
from redline.suites.memtier import without_options
from redline.suites.owned import CLIENT_OPTIONS
from redline.system.children import spawn
from redline.system.pinning import pinned

PERCENTILES = "50,90,99,99.9,99.99"
LISTENER_GRACE_S = 90.0     # the window probe may wait this long for a busy server to answer INFO (2 × its 30 s timeout, and some)
REPO_ROOT = Path(__file__).resolve().parents[2]


def loadgen_binary() -> Path:
    """$REDLINE_LOAD, else the one setup.sh built in this checkout, else redline-load on PATH."""
    candidates = [os.environ.get("REDLINE_LOAD"), REPO_ROOT / "bin" / "redline-load",
                  REPO_ROOT / "loadgen" / "target" / "release" / "redline-load", shutil.which("redline-load")]
    for candidate in candidates:
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return Path(candidate)
    raise RunError("redline-load is not built: run `bash setup.sh` (or set REDLINE_LOAD)")


class LoadListener(Protocol):
    def on_phase(self, phase: str, at: float) -> None: ...
    def on_progress(self, event: dict) -> None: ...


class ServerGone(RunError):
    """The server went away while load was running."""


class NotAResult(RunError):
    """redline-load finished and wrote its JSON, but refused it as a measurement (nothing
    completed, or connections were lost): `result` holds what it measured, the message why."""

    def __init__(self, message: str, result: "LoadResult"):
        super().__init__(message)
        self.result = result


@dataclass
class LoadRequest:
    arguments: list[str]               # the suite's memtier-style arguments, unchanged
    host: str
    port: int
    json_path: Path
    duration_s: float | None = None    # replaces the suite's --test-time
    warmup_s: float = 0.0
    cpus: tuple[int, ...] | None = None
    reconnect_on_error: bool = False   # lost connections reconnect and do not fail the run (preloads)
    role: str | None = None            # another client tool redline-load plays (redline.suites.roles)
    requests: int | None = None        # a fixed request count per connection instead of a duration (-n)

    def argv(self) -> list[str]:
        """Suite arguments first without the options redline owns (redline.suites.owned), redline's
        own after them (the last value of a flag wins). A duration makes every run time-based: a
        suite's request count (-n) is dropped with it; a request count drops the suite's duration."""
        if self.role is not None:
            return self._role_argv()
        dropped = {*CLIENT_OPTIONS, *(REQUEST_OPTIONS if self.duration_s is not None or self.requests else ()),
                   *(DURATION_OPTIONS if self.requests else ())}
        arguments = without_options(self.arguments, dropped)
        argv = [str(loadgen_binary()), *arguments, "--server", self.host, "--port", str(self.port),
                "--json-out-file", str(self.json_path), "--events", "--hide-histogram",
                f"--print-percentiles={PERCENTILES}"]
        if self.duration_s is not None:
            argv += ["--test-time", _seconds_arg(self.duration_s)]
        if self.requests:
            argv += ["--requests", str(self.requests)]
        if self.warmup_s:
            argv += ["--warmup-time", _seconds_arg(self.warmup_s)]
        if self.reconnect_on_error:
            argv.append("--reconnect-on-error")
        return argv


    def _role_argv(self) -> list[str]:
        """`redline-load --role TOOL` with the tool's own flags, then redline's (loadgen/role_options.tsv)."""
        argv = [str(loadgen_binary()), "--role", self.role, *roles.without_owned(self.role, self.arguments),
                "--server", self.host, "--port", str(self.port), "--json-out-file", str(self.json_path), "--events"]
        if self.duration_s is not None:
            argv += ["--window", _seconds_arg(self.duration_s)]
        if self.warmup_s:
            argv += ["--warmup-time", _seconds_arg(self.warmup_s)]
        return argv


REQUEST_OPTIONS = ("requests",)
DURATION_OPTIONS = ("test-time",)


def _done(progress: dict | None) -> str:
    """What a stopped redline-load had done, from its last progress event."""
    if progress is None:
        return "it had reported no progress"
    total = progress.get("requests_total")
    ops = int(progress.get("ops") or 0)
    of = f" of {int(total):,}" if total else ""
    return f"{ops:,}{of} requests had completed after {float(progress.get('elapsed_s') or 0):,.0f}s"


class _Progress:
    """Whether a load has completed no request for `stall_s` seconds, from its progress events."""

    def __init__(self, stall_s: float | None):
        self.stall_s = stall_s
        self.ops: int | None = None
        self.since = time.monotonic()

    def stalled(self, event: dict | None) -> bool:
        if self.stall_s is None:
            return False
        ops = int((event or {}).get("ops") or 0)
        now = time.monotonic()
        if self.ops is None or ops > self.ops:
            self.ops, self.since = ops, now
            return False
        return now - self.since > self.stall_s


def _seconds_arg(seconds: float) -> str:
    return str(int(seconds)) if float(seconds).is_integer() else f"{seconds:g}"


@dataclass
class LoadResult:
    argv: list[str]
    report: LoadReport                 # what redline-load wrote, read through redline.load.report
    stderr_tail: str = ""
    groups: list[dict] | None = None   # a grouped test: every group's summary (redline.load.groups)
    headline: str | None = None        # a grouped test: which group this result is


@dataclass
class _Reader:
    """Reads redline-load's stderr: JSON event lines go to the listener, the rest is kept."""

    listener: LoadListener | None
    other_lines: list[str] = field(default_factory=list)
    failure: BaseException | None = None      # a listener that raised; re-raised by run_load
    progress: dict | None = None              # the last progress event (what a stopped run had done)

    def consume(self, stream) -> None:
        for raw in stream:
            line = raw.decode(errors="replace").rstrip("\n")
            event = None
            if line.startswith("{"):
                try:
                    event = json.loads(line)
                except json.JSONDecodeError:
                    event = None
            if not isinstance(event, dict) or "event" not in event:
                self.other_lines.append(line)
                del self.other_lines[:-40]
                continue
            if event["event"] == "progress":
                self.progress = event
            if self.listener is None or self.failure is not None:
                continue       # keep draining stderr so redline-load never blocks on a full pipe
            try:
                if event["event"] == "phase":
                    self.listener.on_phase(event.get("phase", ""), float(event.get("t", time.time())))
                elif event["event"] == "progress":
                    self.listener.on_progress(event)
            except Exception as exc:          # surfaced in the caller's thread
                self.failure = exc


def run_load(request: LoadRequest, *, listener: LoadListener | None = None,
             server_alive: Callable[[], bool] | None = None, poll_s: float = 0.1,
             timeout_s: float | None = None, expected: str | None = None,
             stall_s: float | None = None) -> LoadResult:
    """Run redline-load to completion. Raises ServerGone if `server_alive` turns false meanwhile,
    RunError if redline-load fails, runs past `timeout_s` (a positive number of seconds; the
    message then names `expected`, what the caller expected of it, and what it had done), or
    completes no request for `stall_s` seconds (a bound on progress, not on the whole: a long
    load that keeps going is never stopped by it)."""
    if timeout_s is not None and not 0 < timeout_s < math.inf:
        raise RunError(f"internal: redline-load given a time bound of {timeout_s!r}s (must be positive and finite)")
    argv = request.argv()
    launch = pinned(argv, request.cpus) if request.cpus else argv
    request.json_path.unlink(missing_ok=True)
    proc = spawn(launch, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                 stderr=subprocess.PIPE)
    reader = _Reader(listener)
    thread = threading.Thread(target=reader.consume, args=(proc.stderr,), daemon=True)
    thread.start()
    server_lost = timed_out = stalled = False
    deadline = time.monotonic() + timeout_s if timeout_s else None
    progress = _Progress(stall_s)
    try:
        while proc.poll() is None:
            if server_alive is not None and not server_alive():
                server_lost = True
                proc.kill()
                break
            if deadline is not None and time.monotonic() > deadline:
                timed_out = True
                proc.kill()
                break
            if progress.stalled(reader.progress):
                stalled = True
                proc.kill()
                break
            time.sleep(poll_s)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        thread.join(timeout=LISTENER_GRACE_S)
    tail = "\n".join(reader.other_lines[-10:])
    if reader.failure is not None:
        raise reader.failure
    if thread.is_alive():      # a listener still reading the server: its readings are incomplete
        raise RunError(f"the window probe was still waiting for the server {LISTENER_GRACE_S:.0f}s after "
                       "redline-load finished (INFO unanswered)")
    if server_lost:
        raise ServerGone("the server exited while load was running")
    if timed_out:
        said = f" ({expected})" if expected else ""
        raise RunError(f"redline-load did not finish within {timeout_s:,.0f}s and was stopped{said}; "
                       f"{_done(reader.progress)}")
    if stalled:
        raise RunError(f"redline-load completed no request for {stall_s:,.0f}s and was stopped; "
                       f"{_done(reader.progress)}")
    last = reader.other_lines[-1] if reader.other_lines else f"exit status {proc.returncode}"
    if proc.returncode != 0 and not request.json_path.exists():
        raise RunError(f"redline-load failed: {last}")
    result = LoadResult(argv=argv, report=LoadReport.read(request.json_path), stderr_tail=tail)
    if proc.returncode != 0:      # it wrote its results, then refused them as a measurement
        raise NotAResult(last.removeprefix("redline-load: "), result)
    return result
