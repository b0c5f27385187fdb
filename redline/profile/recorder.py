"""Profile server processes for one measured window: perf record → folded stacks → flame graph.

    recorder = Recorder(pids=[server_pid], binary=None, workdir=run_dir / "profile")
    recorder.prepare()        # optional: perf attached, recording nothing yet (before the load)
    recorder.start()          # the measured window starts
    ...load...
    result = recorder.stop()  # perf stops; folding, SVG, top symbols and counters happen here
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from redline.core.errors import RunError
from redline.profile.counters import CounterSession, hardware_counters_available
from redline.profile.events import choose_sampling_event
from redline.profile.flamegraph import render_stacks
from redline.profile.folding import fold_perf_script, write_folded
from redline.profile.perf_process import PerfProcess, check_pids
from redline.profile.symbols import symbol_shares
from redline.profile.tools import find_perf
from redline.profile.unwinder import DWARF, FRAME_POINTER, UnwinderChoice, choose_unwinder

TOP_SYMBOLS = 20
DWARF_STACK_BYTES = 16384      # user stack copied per sample for DWARF unwinding
PERF_SCRIPT_TIMEOUT_S = 600


@dataclass
class ProfileResult:
    folded_path: Path          # folded stacks, gzip-compressed (.folded.gz)
    svg_path: Path             # interactive flame graph SVG
    unwinder: str              # "fp" or "dwarf"
    event: str                 # "cycles" or "cpu-clock"
    samples: int
    top_self: list[tuple[str, float]]     # (symbol, share 0..1) by self time
    top_total: list[tuple[str, float]]    # by inclusive time
    counters: dict | None                 # instructions, cycles, ipc; None if unavailable
    counters_reason: str | None = None    # why counters is None
    unwinder_reason: str = ""
    event_reason: str = ""
    binary: Path | None = None
    pids: list[int] = field(default_factory=list)
    frequency_hz: int = 0
    window_s: float = 0.0

    def as_json(self) -> dict:
        return {
            "folded_path": str(self.folded_path),
            "svg_path": str(self.svg_path),
            "unwinder": self.unwinder,
            "unwinder_reason": self.unwinder_reason,
            "event": self.event,
            "event_reason": self.event_reason,
            "samples": self.samples,
            "frequency_hz": self.frequency_hz,
            "window_s": round(self.window_s, 3),
            "binary": str(self.binary) if self.binary else None,
            "pids": list(self.pids),
            "top_self": [{"symbol": s, "share": round(v, 6)} for s, v in self.top_self],
            "top_total": [{"symbol": s, "share": round(v, 6)} for s, v in self.top_total],
            "counters": self.counters,
            "counters_unavailable_reason": self.counters_reason if self.counters is None else None,
        }


def _binary_of(pid: int) -> Path:
    try:
        return Path(os.readlink(f"/proc/{pid}/exe"))
    except OSError as exc:
        raise RunError(f"profiling: cannot find the executable of process {pid}: {exc.strerror}") from exc


class Recorder:
    """perf record (+ perf stat where counters exist) of `pids` between start() and stop()."""

    def __init__(self, *, pids: list[int], binary: Path | None, workdir: Path, frequency_hz: int = 999,
                 title: str | None = None, keep_perf_data: bool = False, unwinder: str | None = None) -> None:
        self.pids = check_pids(pids)
        if not isinstance(frequency_hz, int) or not 1 <= frequency_hz <= 100_000:
            raise RunError(f"profiling: frequency_hz must be an integer in 1..100000, got {frequency_hz!r}")
        self.binary = Path(binary) if binary is not None else _binary_of(self.pids[0])
        if not self.binary.is_file():
            raise RunError(f"profiling: binary {self.binary} does not exist")
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.frequency_hz = frequency_hz
        self.title = title or f"{self.binary.name} (pid {','.join(map(str, self.pids))})"
        self.keep_perf_data = keep_perf_data
        if unwinder is None:
            self.unwinder: UnwinderChoice = choose_unwinder(self.binary)
        elif unwinder in (DWARF, FRAME_POINTER):
            self.unwinder = UnwinderChoice(unwinder, f"{unwinder} unwinding requested by the caller", None)
        else:
            raise RunError(f"profiling: unwinder must be 'fp' or 'dwarf', got {unwinder!r}")
        self.event = choose_sampling_event()
        availability = hardware_counters_available()
        self._counters_reason = availability.reason
        self._counters = CounterSession(pids=self.pids, workdir=self.workdir) if availability.available else None
        self.perf_data = self.workdir / "perf.data"
        self._record = PerfProcess(args=self._record_args(), log_path=self.workdir / "perf-record.log",
                                   name="perf record")
        self._started_at: float | None = None

    def _record_args(self) -> list[str]:
        call_graph = f"dwarf,{DWARF_STACK_BYTES}" if self.unwinder.unwinder == DWARF else "fp"
        return [find_perf(), "record", "-e", self.event.event, "-F", str(self.frequency_hz),
                "--call-graph", call_graph, "-p", ",".join(map(str, self.pids)),
                "-o", str(self.perf_data), "--no-buildid-cache", "--mmap-pages", "1024", "--quiet"]

    def prepare(self) -> None:
        """perf attached to the processes with its events off, ahead of the window: attaching (and,
        for DWARF unwinding, mapping its buffers) took over a second on a busy machine, and inside a
        1-second window that left 45 ms and no sample; `start()` then only switches the events on."""
        if self._record.started:
            raise RunError("profiling: Recorder.prepare() called twice")
        self._record.start(controlled=True)
        if self._counters is not None:
            self._counters.prepare()

    def start(self) -> None:
        if self._started_at is not None:
            raise RunError("profiling: Recorder.start() called twice")
        if not self._record.started:
            self.prepare()
        self._record.enable()
        if self._counters is not None:
            try:
                self._counters.start()
            except RunError:
                self._record.kill()
                raise
        self._started_at = time.monotonic()

    def stop(self) -> ProfileResult:
        if self._started_at is None:
            raise RunError("profiling: Recorder.stop() called before start()")
        window_s = time.monotonic() - self._started_at
        counters = None
        counters_reason = self._counters_reason
        try:
            if self._counters is not None:
                try:
                    counters = self._counters.stop()
                except RunError as exc:
                    counters_reason = f"perf stat failed: {exc}"
                if counters is not None and "ipc" not in counters:
                    counters_reason, counters = "perf stat counted no instructions/cycles", None
        finally:
            self._record.stop()
        stacks = fold_perf_script(self._perf_script_lines())
        if not self.keep_perf_data:
            self.perf_data.unlink(missing_ok=True)
        folded = write_folded(stacks, self.workdir / "profile.folded.gz")
        shares = symbol_shares(stacks)
        subtitle = (f"{shares.samples} samples of {self.event.event} at {self.frequency_hz} Hz over "
                    f"{window_s:.1f}s, {self.unwinder.unwinder} unwinding")
        svg = render_stacks(stacks, self.workdir / "flamegraph.svg", title=self.title, subtitle=subtitle)
        result = ProfileResult(
            folded_path=folded, svg_path=svg, unwinder=self.unwinder.unwinder, event=self.event.event,
            samples=shares.samples, top_self=shares.top_self(TOP_SYMBOLS),
            top_total=shares.top_total(TOP_SYMBOLS), counters=counters,
            counters_reason=None if counters is not None else counters_reason,
            unwinder_reason=self.unwinder.reason, event_reason=self.event.reason, binary=self.binary,
            pids=self.pids, frequency_hz=self.frequency_hz, window_s=window_s)
        (self.workdir / "profile.json").write_text(json.dumps(result.as_json(), indent=2) + "\n")
        return result

    def abort(self) -> None:
        """Stop perf without post-processing (the run failed between start() and stop())."""
        if self._counters is not None:
            self._counters.kill()
        self._record.kill()
        if not self.keep_perf_data:
            self.perf_data.unlink(missing_ok=True)     # megabytes that no stored profile refers to

    def _perf_script_lines(self) -> list[str]:
        if not self.perf_data.exists():
            raise RunError(f"perf record wrote no data file {self.perf_data}")
        command = [find_perf(), "script", "-i", str(self.perf_data), "--no-inline",
                   "-F", "comm,tid,time,event,ip,sym,dso"]
        try:
            proc = subprocess.run(command, capture_output=True, text=True, errors="replace",
                                  timeout=PERF_SCRIPT_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired as exc:
            raise RunError(f"perf script on {self.perf_data} took longer than {PERF_SCRIPT_TIMEOUT_S}s") from exc
        if proc.returncode != 0:
            raise RunError(f"perf script failed on {self.perf_data} (exit {proc.returncode}): "
                           f"{proc.stderr.strip()[-500:]}")
        return proc.stdout.splitlines()
