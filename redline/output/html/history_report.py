"""The HTML history page: one chart per test × topology × target over its sessions (every run a
point, the sessions' median line, the change points redline.analysis.history found with their change
and p-value, the levels between them, odd sessions ringed), the same sentences as `redline
history` under each chart, and the build of every session on hover."""

from __future__ import annotations

from redline.analysis import history
from redline.core import metrics
from redline.core.numbers import format_number
from redline.output.html import plots
from redline.output.html.page import Page, table, text
from redline.output.html.session_report import when


def history_page(all_series: list[history.Series], *, metric: str, p_value: float, argv: list[str]) -> Page:
    registered = metrics.BY_NAME.get(metric)
    label = f"{registered.label} ({registered.unit})" if registered and registered.unit not in registered.label \
        else (registered.label if registered else metric)
    page = Page(f"redline history · {label}",
                subtitle=[f"{len(all_series)} series · change points at p ≤ {p_value:g} · "
                          f"{'higher' if registered and registered.higher_is_better else 'lower'} is better"
                          if registered and registered.better else f"{len(all_series)} series · p ≤ {p_value:g}",
                          f"<code>{text(' '.join(argv))}</code>"])
    page.section("overview", "Series", _overview(all_series))
    for i, series in enumerate(all_series):
        page.section(f"series-{i + 1}", series.name, _chart(page, series, label))
    return page


def _overview(all_series: list[history.Series]) -> str:
    rows = [[f'<a href="#series-{i + 1}">{text(s.test)}</a>', text(s.topology), text(s.target), str(len(s.points)),
             str(sum(len(p.runs) for p in s.points)),
             text(", ".join(f"{cp.delta_pct:+.1f}% at session {s.points[cp.index].session} (p {cp.p_value:.2g})"
                            for cp in s.change_points) or (s.problem or "none"))]
            for i, s in enumerate(all_series)]
    return table(["test", "topology", "target", "sessions", "runs", "change points"], rows, numeric={3, 4})


def _chart(page: Page, series: history.Series, unit: str) -> str:
    odd = {o.index for o in series.odd_sessions}
    sessions = [plots.Session(str(p.session), p.runs, _hover(p), odd=i in odd) for i, p in enumerate(series.points)]
    changes = [plots.Change(cp.index, cp.before, cp.after, f"{cp.delta_pct:+.1f}%  p {cp.p_value:.2g}")
               for cp in series.change_points]
    lines = [line for cp in series.change_points for line in history.change_lines(series, cp, format_number)]
    lines += [history.odd_line(series, o, format_number) for o in series.odd_sessions]
    if series.problem:
        lines.append(f"no change-point search: {series.problem}")
    elif not series.change_points:
        lines.append("no change point")
    if series.noise is not None:
        lines.append(f"noise measured in the series: {100 * series.noise.within:.1f}% run to run, "
                     f"{100 * series.noise.between:.1f}% session to session; smallest change reported "
                     f"{series.min_effect_pct:.1f}%")
    return (page.figure(plots.history_series(sessions, changes, unit=unit), height=340)
            + "<pre class=\"mono\">" + text("\n".join(lines)) + "</pre>")


def _hover(point: history.Point) -> str:
    runs = ", ".join(format_number(v) for v in point.runs)
    return (f"session {point.session} · {text(when(point.started_at))}<br>{text(history.describe_build(point.identity))}"
            f"<br>runs: {text(runs)}")
