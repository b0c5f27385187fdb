"""Live progress of scheduled work (redline.lab.scheduler): what each lane is doing, how many tests
are decided, the time left. On a terminal a table redrawn in place (no refresh thread: the
scheduler forks its lanes, and a thread in the forking process is a hazard); in a log one line
per job that starts or ends and a status line after each."""

from __future__ import annotations

import time

from rich.live import Live
from rich.table import Table

from redline.core import terminal
from redline.core.numbers import format_count
from redline.core.numbers import format_duration as duration_words

REDRAW_S = 0.25
VERDICT_WORDS = (("regression", "regressions"), ("improvement", "improvements"), ("no_change", "no change"),
                 ("inconclusive", "inconclusive"), ("undecided", "not measured yet"), ("skipped", "skipped"))




class LaneProgress:
    """Progress of a scheduler's lanes, for a gate or any other user of the scheduler: a
    redline.lab.scheduler.SchedulerObserver (the four events, by name: output sits below lab)."""

    def __init__(self, console=None, *, what=lambda job: job.test, clock=time.monotonic):
        self.console = console or terminal.console(stderr=True)
        self.what, self.clock = what, clock
        self.lanes: dict[str, dict] = {}
        self.status_seen = None          # the scheduler's latest Status
        self.counts: dict[str, int] = {}
        self.total = 0
        self.budget_left_s: float | None = None
        self.live = Live(console=self.console, auto_refresh=False, transient=True) \
            if self.console.is_interactive else None
        self.drawn_at = 0.0
        if self.live:
            self.live.start()

    def close(self) -> None:
        if self.live:
            self.live.stop()

    # -- what the gate says --------------------------------------------------------------------------
    def decided(self, counts: dict[str, int], total: int, budget_left_s: float | None) -> None:
        self.counts, self.total, self.budget_left_s = counts, total, budget_left_s
        if not self.live:
            self.console.print(f"[{self.line()}]")
        self._draw(force=True)

    # -- what the scheduler says ---------------------------------------------------------------------
    def job_started(self, lane, job, test) -> None:
        self.lanes[lane.name] = {"job": self.what(job), "doing": "starting", "since": self.clock()}
        if not self.live:
            self.console.print(f"{lane.name}: {self.what(job)}")
        self._draw(force=True)

    def lane_event(self, lane, event: str, *args, **kwargs) -> None:
        state = self.lanes.setdefault(lane.name, {"job": "?", "doing": "", "since": self.clock()})
        if event == "phase":
            state["doing"], state["progress"] = args[0], None
            state["total"], state["unit"] = kwargs.get("total"), kwargs.get("unit", "s")
        elif event == "progress":
            done, total = args[0], (args[1] if len(args) > 1 else None) or state.get("total")
            state["progress"] = f"{format_count(done)}/{format_count(total)} {state.get('unit', '')}" if total else ""
        elif event == "run_finished":
            run = args[0]
            state["runs"] = state.get("runs", 0) + 1
            if run.status == "failed" and not self.live:
                self.console.print(f"  {lane.name}: {run.test} {run.side} run {run.run_index + 1} failed: {run.error}")
        elif event == "note" and not self.live and args and args[0].startswith("undecided"):
            self.console.print(f"  {lane.name}: {state['job']}: {args[0]}")
        self._draw()

    def job_finished(self, lane, job, runs, lost) -> None:
        state = self.lanes.pop(lane.name, {"since": self.clock()})
        took = self.clock() - state["since"]
        if not self.live:
            ok = sum(1 for r in runs if r.status == "ok")
            self.console.print(f"{lane.name}: {self.what(job)} ended after {duration_words(took)}, "
                               f"{ok} of {len(runs)} runs ok" + (f"; {lost}" if lost else ""))
        self._draw(force=True)

    def status(self, status) -> None:
        self.status_seen = status
        self._draw(force=True)

    # -- showing it ------------------------------------------------------------------------------------
    def line(self) -> str:
        """decided 120/400 (…); waiting: 50 counted, 20 timed; time left ~1h10m; budget left 2h."""
        decided = sum(self.counts.get(k, 0) for k in ("regression", "improvement", "no_change"))
        parts = [f"{word} {self.counts[key]}" for key, word in VERDICT_WORDS if self.counts.get(key)]
        text = f"decided {decided}/{self.total}" + (f" ({', '.join(parts)})" if parts else "")
        status = self.status_seen
        if status is not None:
            text += f"; waiting: {status.waiting_counted} counted, {status.waiting_timed} timed"
            left, complete = status.at_least_s
            text += f"; time left ~{duration_words(left)}" if complete else \
                f"; time left at least {duration_words(left)} (the first timed job has not ended)" if left else ""
        if self.budget_left_s is not None:
            text += f"; budget left {duration_words(self.budget_left_s)}"
        return text

    def _table(self) -> Table:
        table = Table(show_header=True, header_style="bold", box=None, caption=self.line(), caption_justify="left")
        for column in ("lane", "test", "doing", "", "for"):
            table.add_column(column)
        for name, state in sorted(self.lanes.items()):
            table.add_row(name, state.get("job", "?"), state.get("doing", ""), state.get("progress") or "",
                          duration_words(self.clock() - state.get("since", self.clock())))
        return table

    def _draw(self, force: bool = False) -> None:
        now = self.clock()
        if not self.live or (not force and now - self.drawn_at < REDRAW_S):
            return
        self.drawn_at = now
        self.live.update(self._table(), refresh=True)
