"""What people see: live progress while redline works, a table at the end, JSON for machines."""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from redline.engine import METRICS, Observer, RunRecord


def _fmt_count(value: float | None) -> str:
    if value is None:
        return "–"
    for unit, size in (("M", 1e6), ("k", 1e3)):
        if abs(value) >= size:
            return f"{value / size:.2f}{unit}"
    return f"{value:.0f}"


def _fmt_ms(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def _fmt_bytes(value: float | None) -> str:
    if value is None:
        return "–"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if value >= size:
            return f"{value / size:.1f} {unit}"
    return f"{value:.0f} B"


class ConsoleObserver(Observer):
    """Progress bars per phase (server start, dataset, preload, warm-up, measurement) and one
    line per finished run."""

    def __init__(self, console: Console | None = None):
        self.console = console or Console(stderr=True, highlight=False)
        self.progress = Progress(TextColumn("  {task.description:<16}"), BarColumn(),
                                 TaskProgressColumn(), TextColumn("{task.fields[detail]}"),
                                 TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(),
                                 console=self.console, transient=True)
        self.task = None
        self.progress.start()

    def close(self) -> None:
        self._end_phase()
        self.progress.stop()

    def _end_phase(self) -> None:
        if self.task is not None:
            self.progress.remove_task(self.task)
            self.task = None

    def test_started(self, test, index: int, count: int) -> None:
        self._end_phase()
        self.console.print(f"[bold][{index}/{count}] {test.name}[/bold]")

    def test_skipped(self, test, reason: str) -> None:
        self._end_phase()
        self.console.print(f"  [yellow]skipped:[/yellow] {reason}")

    def phase(self, name: str, *, total: float | None = None, unit: str = "s") -> None:
        self._end_phase()
        self.task = self.progress.add_task(name, total=total, detail="")
        self._unit = unit

    def progress(self, done: float, total: float | None = None) -> None:
        if self.task is None:
            return
        detail = f"{_fmt_count(done)}/{_fmt_count(total)} {self._unit}" if total else ""
        self.progress.update(self.task, completed=done, total=total or self.progress.tasks[0].total,
                             detail=detail)

    def run_finished(self, record: RunRecord) -> None:
        self._end_phase()
        side = f"{record.side} " if record.side else ""
        if record.status != "ok":
            self.console.print(f"  {side}run {record.run_index + 1}: [red]failed[/red]: {record.error}")
            return
        m = record.metrics
        parts = [f"{_fmt_count(m.get('ops_per_sec'))} ops/s", f"p50 {_fmt_ms(m.get('p50_ms'))} ms",
                 f"p99 {_fmt_ms(m.get('p99_ms'))} ms"]
        if m.get("server_cpu_us_per_op") is not None:
            parts.append(f"server {m['server_cpu_us_per_op']:.2f} µs/op")
        self.console.print(f"  {side}run {record.run_index + 1}: " + "  ".join(parts))
        for flag in record.flags:
            self.console.print(f"    [yellow]⚠ {flag}[/yellow]")

    def note(self, text: str) -> None:
        self._end_phase()
        self.console.print(f"  [yellow]{text}[/yellow]")


def _median(values: list[float]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _spread_pct(values: list[float]) -> str:
    values = [v for v in values if v is not None]
    if len(values) < 2 or not statistics.median(values):
        return ""
    med = statistics.median(values)
    return f" ±{(max(values) - min(values)) / 2 / med * 100:.1f}%"


def results_table(records: list[RunRecord]) -> Table:
    """One row per test (and side): medians over the runs, with the half-range as spread."""
    table = Table(title="redline results (median of runs)", title_justify="left")
    for column, justify in (("test", "left"), ("runs", "right"), ("ops/sec", "right"),
                            ("p50 ms", "right"), ("p99 ms", "right"), ("p99.9 ms", "right"),
                            ("server µs/op", "right"), ("client cpu", "right"),
                            ("memory", "right"), ("hit rate", "right"), ("notes", "left")):
        table.add_column(column, justify=justify, overflow="fold")
    groups: dict[tuple, list[RunRecord]] = defaultdict(list)
    for record in records:
        groups[(record.test, record.side or "", record.target)].append(record)
    multi_target = len({r.target for r in records}) > 1
    for (test, side, target), runs in groups.items():
        ok = [r for r in runs if r.status == "ok"]
        col = {name: [r.metrics.get(name) for r in ok] for name in METRICS}
        hits, misses = _median(col["keyspace_hits"]), _median(col["keyspace_misses"])
        hit_rate = f"{hits / (hits + misses):.0%}" if hits is not None and misses is not None and hits + misses else "–"
        cpu = _median(col["server_cpu_us_per_op"])
        util = _median(col["client_cpu_util"])
        notes = sorted({flag for r in ok for flag in r.flags})
        notes += [f"run {r.run_index + 1} failed: {r.error}" for r in runs if r.status != "ok"]
        label = test + (f" [{side or target}]" if multi_target or side else "")
        table.add_row(label, f"{len(ok)}/{len(runs)}",
                      _fmt_count(_median(col["ops_per_sec"])) + _spread_pct(col["ops_per_sec"]),
                      _fmt_ms(_median(col["p50_ms"])), _fmt_ms(_median(col["p99_ms"])),
                      _fmt_ms(_median(col["p999_ms"])), "–" if cpu is None else f"{cpu:.2f}",
                      "–" if util is None else f"{util:.0%}", _fmt_bytes(_median(col["used_memory_bytes"])),
                      hit_rate, "; ".join(notes))
    return table


def write_json(path: Path, records: list[RunRecord]) -> None:
    path.write_text(json.dumps([r.as_json() for r in records], indent=2) + "\n")
