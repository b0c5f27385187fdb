"""Terminal tables: a run's results and profiles, the noise floors of `calibrate`, the series of
`history`. (The verdicts of `compare` are in `verdicts`.)"""

from __future__ import annotations

import os
import statistics
from collections import defaultdict

from rich.console import Console
from rich.table import Table

from redline.analysis import history
from redline.core import metrics
from redline.core.numbers import format_number
from redline.core.run import Run
from redline.core.terminal import styled


def _median(values: list[float]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _spread_pct(values: list[float]) -> str:
    values = [v for v in values if v is not None]
    if len(values) < 2 or not statistics.median(values):
        return ""
    med = statistics.median(values)
    return f" ±{(max(values) - min(values)) / 2 / med * 100:.1f}%"




def common_prefix(names: list[str]) -> str:
    """The shared leading part of test names, up to a '-' (shown once in a table's title)."""
    prefix = os.path.commonprefix(names) if len(names) > 1 else ""
    return prefix[: prefix.rfind("-") + 1] if "-" in prefix else ""


def results_table(records: list[Run], *, width: int = 200) -> tuple[Table, list[str]]:
    """One row per test (and side): medians over the runs, with the half-range as spread; and the
    notes (flags, failures) to print under it. Below 120 columns only the main metrics fit."""
    prefix = common_prefix(sorted({r.key for r in records}))
    wide = width >= 120
    shown = metrics.table_metrics(wide=wide, measure=metrics.measure_of(r.metrics for r in records))
    columns = (["runs"] if wide else []) + [m.label for m in shown] + ["hits"]
    title = "redline results (median of runs)" + (f", tests {prefix}…" if prefix else "")
    table = Table(title=title, title_justify="left")
    table.add_column("test", overflow="fold", ratio=1)      # the name wraps; numbers never do
    for column in columns:
        table.add_column(column, justify="right", no_wrap=True, min_width=len(column))
    groups: dict[tuple, list[Run]] = defaultdict(list)
    notes: list[str] = []
    for record in records:
        if record.status == "skipped":
            notes.append(f"{record.key[len(prefix):]}: skipped: {record.error}")
        else:
            groups[(record.key, record.side or "", record.target)].append(record)
    multi_target = len({r.target for r in records}) > 1
    for (test, side, target), runs in groups.items():
        ok = [r for r in runs if r.status == "ok"]
        col = {name: [r.metrics.get(name) for r in ok] for name in metrics.NAMES}
        hits, misses = _median(col["keyspace_hits"]), _median(col["keyspace_misses"])
        hit_rate = f"{hits / (hits + misses):.0%}" if hits is not None and misses is not None and hits + misses else "–"
        label = test[len(prefix):] + (f" [{side or target}]" if multi_target or side else "")
        notes += [f"{label}: {flag}" for flag in sorted({flag for r in ok for flag in r.flags})]
        notes += [f"{label}: run {r.run_index + 1} {r.status}: {r.error}" for r in runs if r.status != "ok"]
        headline = shown[0].name              # its spread over the runs is shown beside it
        cells = [f"{len(ok)}/{len(runs)}"] if wide else []
        cells += [m.format(_median(col[m.name])) + (_spread_pct(col[m.name]) if m.name == headline else "")
                  for m in shown]
        table.add_row(label, *cells, hit_rate)
    return table, notes


def print_results(console: Console, records: list[Run]) -> None:
    table, notes = results_table(records, width=console.width)
    console.print(table)
    if any(len({r.run_index for r in records if r.test == t}) == 1 for t in {r.test for r in records}):
        console.print("One run per test shows no spread: use --runs N.", style="dim")
    console.print("µs/op: server CPU per operation; client: load generator CPU use; hits: keyspace hit rate; "
                  "all runs are in the store and in --json.", style="dim")
    for note in notes:
        console.print(styled(("⚠", "yellow"), f" {note}"))


def print_profiles(console: Console, records: list[Run], top: int = 5) -> None:
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


def noise_floor_table(floors: dict[str, dict[str, float | str]], metrics) -> Table:
    """`calibrate`'s answer: per test and metric the % change an identical comparison can show
    (or why there is none)."""
    table = Table(title="noise floor on this machine (A/A, % change an identical comparison can show; "
                        "for instruction counts the spread of all runs)",
                  title_justify="left")
    table.add_column("test")
    for metric in metrics:
        table.add_column(metric, justify="right")
    for test, by_metric in floors.items():
        table.add_row(test, *(f"{value:.1f}%" if isinstance(value, float) else f"– ({value})"
                              for value in (by_metric.get(metric, "not measured") for metric in metrics)))
    return table


def history_table(all_series, *, metric: str, p_value: float) -> Table:
    """One row per series: its sessions, runs, last level, noise and change points."""
    table = Table(title=f"history of {metric} (a point per session, every run counts; p ≤ {p_value})",
                  title_justify="left")
    for column in ("test", "topology", "target", "sessions", "runs", "last", "noise run / session",
                   "change points"):
        table.add_column(column, overflow="fold")
    for s in all_series:
        noise = f"{100 * s.noise.within:.1f}% / {100 * s.noise.between:.1f}%" if s.noise else "–"
        table.add_row(s.test, s.topology, s.target, str(len(s.points)), str(sum(len(p.runs) for p in s.points)),
                      format_number(s.points[-1].level), noise,
                      s.problem or str(len(s.change_points) or f"none ≥ {s.min_effect_pct:g}%"))
    return table


def history_lines(all_series) -> list[str]:
    """Under the table: each series' odd sessions and change points with the builds around them."""
    lines = []
    for s in (s for s in all_series if s.change_points or s.odd_sessions):
        lines.append(f"{s.name}:")
        lines += [f"  {history.odd_line(s, odd, format_number)}" for odd in s.odd_sessions]
        lines += [f"  {line}" for cp in s.change_points for line in history.change_lines(s, cp, format_number)]
    return lines
