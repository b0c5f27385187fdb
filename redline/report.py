"""What people see: live progress while redline works, a table at the end, JSON for machines."""

from __future__ import annotations

import os
import statistics
from collections import defaultdict
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from redline import outputs, terminal
from redline.engine import METRICS, Observer, RunRecord
from redline.terminal import styled


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
        self.console = console or terminal.console(stderr=True)
        self.bars = Progress(TextColumn("  {task.description:<16}", markup=False), BarColumn(),
                                 TaskProgressColumn(), TextColumn("{task.fields[detail]}", markup=False),
                                 TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(),
                                 console=self.console, transient=True)
        self.task = None
        self.bars.start()

    def close(self) -> None:
        self._end_phase()
        self.bars.stop()

    def _end_phase(self) -> None:
        if self.task is not None:
            self.bars.remove_task(self.task)
            self.task = None

    def test_started(self, test, index: int, count: int) -> None:
        self._end_phase()
        self.console.print(f"[{index}/{count}] {test.name}", style="bold")

    def test_skipped(self, test, reason: str) -> None:
        self._end_phase()
        self.console.print(styled("  ", ("skipped:", "yellow"), f" {reason}"))

    def phase(self, name: str, *, total: float | None = None, unit: str = "s") -> None:
        self._end_phase()
        self.task = self.bars.add_task(name, total=total, detail="")
        self._unit = unit

    def progress(self, done: float, total: float | None = None) -> None:
        if self.task is None:
            return
        detail = f"{_fmt_count(done)}/{_fmt_count(total)} {self._unit}" if total else ""
        self.bars.update(self.task, completed=done, total=total or self.bars.tasks[0].total,
                             detail=detail)

    def detail(self, text: str) -> None:
        """A line of text for the current phase (e.g. make's last line during a build)."""
        if self.task is not None:
            self.bars.update(self.task, detail=text.strip()[-60:])

    def run_finished(self, record: RunRecord) -> None:
        self._end_phase()
        side = f"{record.side} " if record.side else ""
        if record.status != "ok":
            self.console.print(styled(f"  {side}run {record.run_index + 1}: ", ("failed", "red"), f": {record.error}"))
            return
        m = record.metrics
        parts = [f"{_fmt_count(m.get('ops_per_sec'))} ops/s", f"p50 {_fmt_ms(m.get('p50_ms'))} ms",
                 f"p99 {_fmt_ms(m.get('p99_ms'))} ms"]
        if m.get("server_cpu_us_per_op") is not None:
            parts.append(f"server {m['server_cpu_us_per_op']:.2f} µs/op")
        reset_s = (record.state or {}).get("reset_s")
        if reset_s is not None:
            parts.append(f"(server restarted into the test's state in {reset_s:.1f} s)")
        self.console.print(f"  {side}run {record.run_index + 1}: " + "  ".join(parts))
        for flag in record.flags:
            self.console.print(f"    ⚠ {flag}", style="yellow")

    def note(self, text: str) -> None:
        self._end_phase()
        self.console.print(f"  {text}", style="yellow")


def _median(values: list[float]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _spread_pct(values: list[float]) -> str:
    values = [v for v in values if v is not None]
    if len(values) < 2 or not statistics.median(values):
        return ""
    med = statistics.median(values)
    return f" ±{(max(values) - min(values)) / 2 / med * 100:.1f}%"


COLUMNS = ("runs", "ops/sec", "p50 ms", "p99 ms", "p99.9 ms", "µs/op", "client", "memory", "hits")
NARROW_COLUMNS = ("ops/sec", "p50 ms", "p99 ms", "µs/op", "hits")


def common_prefix(names: list[str]) -> str:
    """The shared leading part of test names, up to a '-' (shown once in a table's title)."""
    prefix = os.path.commonprefix(names) if len(names) > 1 else ""
    return prefix[: prefix.rfind("-") + 1] if "-" in prefix else ""


def results_table(records: list[RunRecord], *, width: int = 200) -> tuple[Table, list[str]]:
    """One row per test (and side): medians over the runs, with the half-range as spread; and the
    notes (flags, failures) to print under it. Below 120 columns only the main metrics fit."""
    prefix = common_prefix(sorted({r.key for r in records}))
    columns = COLUMNS if width >= 120 else NARROW_COLUMNS
    title = "redline results (median of runs)" + (f", tests {prefix}…" if prefix else "")
    table = Table(title=title, title_justify="left")
    table.add_column("test", overflow="fold", ratio=1)      # the name wraps; numbers never do
    for column in columns:
        table.add_column(column, justify="right", no_wrap=True, min_width=len(column))
    groups: dict[tuple, list[RunRecord]] = defaultdict(list)
    notes: list[str] = []
    for record in records:
        if record.status == "skipped":
            notes.append(f"{record.key[len(prefix):]}: skipped: {record.error}")
        else:
            groups[(record.key, record.side or "", record.target)].append(record)
    multi_target = len({r.target for r in records}) > 1
    for (test, side, target), runs in groups.items():
        ok = [r for r in runs if r.status == "ok"]
        col = {name: [r.metrics.get(name) for r in ok] for name in METRICS}
        hits, misses = _median(col["keyspace_hits"]), _median(col["keyspace_misses"])
        hit_rate = f"{hits / (hits + misses):.0%}" if hits is not None and misses is not None and hits + misses else "–"
        cpu = _median(col["server_cpu_us_per_op"])
        util = _median(col["client_cpu_util"])
        label = test[len(prefix):] + (f" [{side or target}]" if multi_target or side else "")
        notes += [f"{label}: {flag}" for flag in sorted({flag for r in ok for flag in r.flags})]
        notes += [f"{label}: run {r.run_index + 1} {r.status}: {r.error}" for r in runs if r.status != "ok"]
        cells = {"runs": f"{len(ok)}/{len(runs)}",
                 "ops/sec": _fmt_count(_median(col["ops_per_sec"])) + _spread_pct(col["ops_per_sec"]),
                 "p50 ms": _fmt_ms(_median(col["p50_ms"])), "p99 ms": _fmt_ms(_median(col["p99_ms"])),
                 "p99.9 ms": _fmt_ms(_median(col["p999_ms"])), "µs/op": "–" if cpu is None else f"{cpu:.2f}",
                 "client": "–" if util is None else f"{util:.0%}",
                 "memory": _fmt_bytes(_median(col["used_memory_bytes"])), "hits": hit_rate}
        table.add_row(label, *(cells[c] for c in columns))
    return table, notes


def print_results(console: Console, records: list[RunRecord]) -> None:
    table, notes = results_table(records, width=console.width)
    console.print(table)
    if any(len({r.run_index for r in records if r.test == t}) == 1 for t in {r.test for r in records}):
        console.print("One run per test shows no spread: use --runs N.", style="dim")
    console.print("µs/op: server CPU per operation; client: load generator CPU use; hits: keyspace hit rate; "
                  "all runs are in the store and in --json.", style="dim")
    for note in notes:
        console.print(styled(("⚠", "yellow"), f" {note}"))


def print_profiles(console: Console, records: list[RunRecord], top: int = 5) -> None:
    """Per profiled run: the hottest symbols by self time and where the flame graph is."""
    for record in records:
        label = record.test + (f" [{record.side}]" if record.side else "")
        if record.status != "ok" or not record.profile:
            console.print(styled(f"profile {label}: ", ("failed", "red"), f": {record.error}"))
            continue
        prof = record.profile
        hottest = ", ".join(f"{s['symbol']} {s['share']:.0%}" for s in prof["top_self"][:top])
        console.print(f"profile {label} ({prof['samples']} samples, {prof['event']}, {prof['unwinder']} unwinding): "
                      f"{hottest}")
        console.print(f"  flame graph: {prof['svg_path']}", style="dim")


def write_json(path: Path, records: list[RunRecord]) -> None:
    outputs.write_json(path, [r.as_json() for r in records])
