"""Live progress while redline works: the plan, a bar per phase, a line per finished run; and the
build spinner of `redline build`."""

from __future__ import annotations

import sys
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from redline.core import metrics, terminal
from redline.core.numbers import format_count
from redline.core.run import Run
from redline.core.terminal import styled
from redline.engine.run_plan import Observer
from redline.system import machine
from redline.system.pinning import available_cpus
from redline.topology import plan_cpus


def print_plan(console: Console, what: str, sides, topologies) -> None:
    """What is about to be measured, on which servers and cores."""
    labels = " vs ".join(f"{s.name + ' ' if s.name else ''}{s.target.label}" for s in sides)
    console.print(f"redline {machine.facts()['redline_version']} {what}; {labels}")
    for topology in topologies:
        if not topology.unsupported:
            plan = plan_cpus(topology, available_cpus())
            console.print(f"{topology.name}: {plan.describe()}")
            for warning in plan.warnings:
                console.print(warning, style="yellow")
    if any(not s.target.managed for s in sides):
        console.print("tcp target: someone else's server — no process control, no server CPU, no profiles",
                      style="yellow")


class ConsoleObserver(Observer):
    """Progress bars per phase (server start, dataset, preload, warm-up, measurement) and one
    line per finished run."""

    def __init__(self, console: Console | None = None):
        self.console = console or terminal.console(stderr=True)
        self.bars = Progress(TextColumn("  {task.description:<16}", markup=False), BarColumn(),
                                 TaskProgressColumn(), TextColumn("{task.fields[detail]}", markup=False),
                                 TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(),
                                 console=self.console, transient=True,
                                 disable=not self.console.is_interactive)   # bars only on a terminal
        self.task = None
        self.test_notes: set[str] = set()       # notes of the current test: a run's flag among them is not repeated
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
        self.test_notes = set()
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
        detail = f"{format_count(done)}/{format_count(total)} {self._unit}" if total else ""
        self.bars.update(self.task, completed=done, total=total or self.bars.tasks[0].total,
                             detail=detail)

    def detail(self, text: str) -> None:
        """A line of text for the current phase (e.g. make's last line during a build)."""
        if self.task is not None:
            self.bars.update(self.task, detail=text.strip()[-60:])

    def run_finished(self, record: Run) -> None:
        self._end_phase()
        side = f"{record.side} " if record.side else ""
        if record.status != "ok":
            self.console.print(styled(f"  {side}run {record.run_index + 1}: ", ("failed", "red"), f": {record.error}"))
            return
        parts = [m.progress.format(m.format(record.metrics[m.name])) for m in metrics.REGISTRY
                 if m.progress and record.metrics.get(m.name) is not None]
        reset_s = (record.state or {}).get("reset_s")
        if reset_s is not None:
            parts.append(f"(server restarted into the test's state in {reset_s:.1f} s)")
        self.console.print(f"  {side}run {record.run_index + 1}: " + "  ".join(parts))
        for flag in record.flags:
            if f"⚠ {flag}" not in self.test_notes:
                self.console.print(f"    ⚠ {flag}", style="yellow")

    def note(self, text: str) -> None:
        self._end_phase()
        self.test_notes.add(text)
        self.console.print(f"  {text}", style="yellow")



@contextmanager
def progress_display(title: str):
    """A spinner with the elapsed time and make's last line, on a terminal (silent otherwise).

    Started by the first progress line: a cache hit shows (and imports) nothing.
    """
    if not sys.stderr.isatty():
        yield None
        return
    state: dict = {}

    def show(line: str) -> None:
        if "display" not in state:
            from rich.progress import SpinnerColumn

            console = terminal.console(stderr=True)
            display = Progress(SpinnerColumn(), TimeElapsedColumn(), TextColumn("{task.description}", markup=False),
                               console=console, transient=True)
            display.start()
            display.console.print(title)
            state.update(display=display, task=display.add_task(""), width=max(20, console.width - 16))
        state["display"].update(state["task"], description=line.strip()[:state["width"]])

    try:
        yield show
    finally:
        if "display" in state:
            state["display"].stop()
