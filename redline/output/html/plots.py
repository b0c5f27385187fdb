"""Plotly figures ({data, layout} dicts, drawn by plotly.js in the page): the spread of every
run, the per-second timeline, the forest plot of a comparison, the interleaved runs of both
sides, and a history series with its change points. Only numbers and labels go in; no figure
knows where its data came from."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from redline.analysis.stats import Verdict

SIDE_COLOURS = {None: "#3b6fb6", "baseline": "#3b6fb6", "comparison": "#e07b24"}
VERDICT_COLOURS = {Verdict.REGRESSION: "#c62828", Verdict.IMPROVEMENT: "#2e7d32",
                   Verdict.INCONCLUSIVE: "#c28a1c", Verdict.NO_CHANGE: "#8a93a6"}
FONT = {"family": "system-ui, -apple-system, Segoe UI, Roboto, Helvetica, Arial, sans-serif", "size": 12}


def _layout(**extra) -> dict:
    layout = {"font": FONT, "margin": {"l": 60, "r": 20, "t": 36, "b": 40}, "paper_bgcolor": "#fff",
              "plot_bgcolor": "#fff", "hovermode": "closest", "showlegend": False}
    layout.update(extra)
    return layout


def _axis(title: str | None = None, **extra) -> dict:
    axis = {"gridcolor": "#e6e9ef", "zerolinecolor": "#c9ced8", "linecolor": "#c9ced8", "automargin": True}
    if title:
        axis["title"] = {"text": title, "font": {"size": 11}}
    axis.update({k: v for k, v in extra.items() if v is not None})
    return axis


def _columns(n: int, gap: float = 0.06) -> list[list[float]]:
    width = (1 - gap * (n - 1)) / n
    return [[i * (width + gap), i * (width + gap) + width] for i in range(n)]


def _rows(n: int, gap: float = 0.07) -> list[list[float]]:
    """Domains top to bottom."""
    height = (1 - gap * (n - 1)) / n
    return [[1 - i * (height + gap) - height, 1 - i * (height + gap)] for i in range(n)]


def _suffix(i: int) -> str:
    return "" if i == 0 else str(i + 1)


@dataclass
class Panel:
    """One metric's panel: its title and, per group (side), the values and their hover texts."""

    title: str
    groups: list[tuple[str | None, str, list[float], list[str]]]    # (side, label, values, hover)


def spread(panels: list[Panel]) -> dict:
    """Every run's value as a point over its box, one panel per metric, side by side."""
    data, layout = [], _layout(boxgap=0.35)
    for i, (panel, domain) in enumerate(zip(panels, _columns(len(panels)))):
        s = _suffix(i)
        for side, label, values, hover in panel.groups:
            data.append({"type": "box", "y": values, "name": label, "boxpoints": "all", "jitter": 0.45,
                         "pointpos": 0, "hovertext": hover, "hoverinfo": "y+text", "xaxis": f"x{s}",
                         "yaxis": f"y{s}", "marker": {"color": SIDE_COLOURS.get(side, "#555"), "size": 6,
                                                      "opacity": 0.85},
                         "line": {"width": 1}, "fillcolor": "rgba(0,0,0,0)"})
        layout[f"xaxis{s}"] = _axis(domain=domain, anchor=f"y{s}", showticklabels=len(panel.groups) > 1)
        layout[f"yaxis{s}"] = _axis(anchor=f"x{s}", rangemode="tozero")
        layout.setdefault("annotations", []).append(
            {"text": f"<b>{panel.title}</b>", "xref": "paper", "yref": "paper", "x": sum(domain) / 2, "y": 1.0,
             "yanchor": "bottom", "showarrow": False, "font": {"size": 12}})
    layout["margin"]["t"] = 52          # the titles below the mode bar
    return {"data": data, "layout": layout}


@dataclass
class Line:
    side: str | None
    name: str
    values: list[float]


def timeline(panels: list[tuple[str, list[Line]]], *, warmup_s: float) -> dict:
    """Per-second values of each run (at the end of their second), one panel per series, stacked
    with a shared time axis; the warm-up before the measured window (not recorded) shaded."""
    data, layout = [], _layout(shapes=[], annotations=[])
    domains = _rows(len(panels), gap=0.05)
    for i, ((title, lines), domain) in enumerate(zip(panels, domains)):
        s = _suffix(i)
        for line in lines:
            data.append({"type": "scatter", "mode": "lines+markers", "x": list(range(1, len(line.values) + 1)),
                         "y": line.values, "name": line.name, "hovertemplate": f"{line.name}<br>second %{{x}}: "
                         "%{y:.4g}<extra></extra>", "xaxis": f"x{s}", "yaxis": f"y{s}",
                         "line": {"color": SIDE_COLOURS.get(line.side, "#555"), "width": 1.2},
                         "marker": {"size": 4}, "opacity": 0.75})
        last = i == len(panels) - 1
        layout[f"xaxis{s}"] = _axis("seconds of the measured window" if last else None, anchor=f"y{s}",
                                    matches="x" if i else None, showticklabels=last)
        layout[f"yaxis{s}"] = _axis(title, domain=domain, anchor=f"x{s}", rangemode="tozero")
        if warmup_s > 0:
            layout["shapes"].append({"type": "rect", "xref": f"x{s}", "yref": f"y{s} domain", "x0": -warmup_s,
                                     "x1": 0, "y0": 0, "y1": 1, "fillcolor": "rgba(120,120,120,0.15)",
                                     "line": {"width": 0}, "layer": "below"})
    if warmup_s > 0:
        layout["annotations"].append({"text": f"warm-up {warmup_s:g} s (excluded, not recorded)", "xref": "x",
                                      "yref": "paper", "x": -warmup_s / 2, "y": 1.0, "yanchor": "bottom",
                                      "showarrow": False, "font": {"size": 10, "color": "#666"}})
    seconds = max((len(line.values) for _, lines in panels for line in lines), default=1)
    layout["xaxis"]["range"] = [-warmup_s - 0.3 if warmup_s > 0 else 0.5, seconds + 0.5]
    layout["margin"]["t"] = 44
    return {"data": data, "layout": layout}


@dataclass
class ForestRow:
    label: str
    delta_pct: float
    low_pct: float
    high_pct: float
    tau_pct: float
    verdict: str
    verdict_words: str
    hover: str


def forest(rows: list[ForestRow], *, interval: str = "95% interval") -> dict:
    """Each test × metric: its estimate and interval (`interval` says which), over the ±τ band,
    coloured by verdict (rows in the order given: first at the top)."""
    labels = [r.label for r in rows]
    data = [{"type": "bar", "orientation": "h", "y": labels, "base": [-r.tau_pct for r in rows],
             "x": [2 * r.tau_pct for r in rows], "marker": {"color": "rgba(120,130,150,0.16)"}, "width": 0.8,
             "hoverinfo": "skip", "name": "±τ"}]
    for verdict, colour in VERDICT_COLOURS.items():
        mine = [r for r in rows if r.verdict == verdict]
        if not mine:
            continue
        data.append({"type": "scatter", "mode": "markers", "y": [r.label for r in mine],
                     "x": [r.delta_pct for r in mine], "name": mine[0].verdict_words,
                     "error_x": {"type": "data", "symmetric": False, "array": [r.high_pct - r.delta_pct for r in mine],
                                 "arrayminus": [r.delta_pct - r.low_pct for r in mine], "color": colour,
                                 "thickness": 1.6, "width": 3},
                     "marker": {"color": colour, "size": 8, "symbol": "diamond"},
                     "hovertext": [r.hover for r in mine], "hoverinfo": "text"})
    layout = _layout(showlegend=True, legend={"orientation": "h", "y": 1.0, "yanchor": "bottom", "x": 0},
                     barmode="overlay", margin={"l": 10, "r": 20, "t": 30, "b": 40},
                     xaxis=_axis(f"Δ % comparison vs baseline ({interval}; grey: ±τ)",
                                 zeroline=True, zerolinewidth=1.5, side="bottom"),
                     yaxis=_axis(autorange="reversed", type="category", tickfont={"size": 11}))
    return {"data": data, "layout": layout}


@dataclass
class Point:
    order: int
    side: str | None
    value: float
    hover: str


def interleaved(panels: list[tuple[str, list[Point]]]) -> dict:
    """Each side's runs in the order they ran (A B B A …), one panel per metric, side by side."""
    data, layout = [], _layout(showlegend=True, legend={"orientation": "h", "y": -0.18, "x": 0})
    for i, ((title, points), domain) in enumerate(zip(panels, _columns(len(panels)))):
        s = _suffix(i)
        for side in dict.fromkeys(p.side for p in points):
            mine = [p for p in points if p.side == side]
            data.append({"type": "scatter", "mode": "lines+markers", "x": [p.order for p in mine],
                         "y": [p.value for p in mine], "name": side or "run", "legendgroup": side or "run",
                         "showlegend": i == 0, "hovertext": [p.hover for p in mine], "hoverinfo": "text+y",
                         "xaxis": f"x{s}", "yaxis": f"y{s}", "line": {"color": SIDE_COLOURS.get(side), "width": 1},
                         "marker": {"color": SIDE_COLOURS.get(side), "size": 6}})
        layout[f"xaxis{s}"] = _axis(domain=domain, anchor=f"y{s}", nticks=6)
        layout[f"yaxis{s}"] = _axis(anchor=f"x{s}")
        layout.setdefault("annotations", []).append(
            {"text": f"<b>{title}</b>", "xref": "paper", "yref": "paper", "x": sum(domain) / 2, "y": 1.0,
             "yanchor": "bottom", "showarrow": False, "font": {"size": 12}})
    layout["margin"]["t"] = 52
    return {"data": data, "layout": layout}


@dataclass
class Session:
    label: str              # tick label
    runs: list[float]
    hover: str
    odd: bool = False


@dataclass
class Change:
    index: int              # first session of the new level
    before: float
    after: float
    text: str


def history_series(sessions: list[Session], changes: list[Change], *, unit: str) -> dict:
    """Runs as points per session, the sessions' medians as a line, each change point as a
    dashed line between sessions with its change and p-value, and the levels between them."""
    xs = list(range(len(sessions)))
    data = [{"type": "scatter", "mode": "markers", "name": "runs",
             "x": [i for i, s in enumerate(sessions) for _ in s.runs], "y": [v for s in sessions for v in s.runs],
             "hovertext": [s.hover for s in sessions for _ in s.runs], "hoverinfo": "text+y",
             "marker": {"color": "rgba(59,111,182,0.55)", "size": 7}},
            {"type": "scatter", "mode": "lines", "name": "median of the session's runs", "x": xs,
             "y": [statistics.median(s.runs) for s in sessions], "hoverinfo": "skip",
             "line": {"color": "#1d2330", "width": 1.5}}]
    odd = [i for i, s in enumerate(sessions) if s.odd]
    if odd:
        data.append({"type": "scatter", "mode": "markers", "name": "odd session (left out of the search)",
                     "x": odd, "y": [statistics.median(sessions[i].runs) for i in odd], "hoverinfo": "skip",
                     "marker": {"symbol": "circle-open", "size": 16, "color": "#b7791f", "line": {"width": 2}}})
    shapes, annotations = [], []
    bounds = [0] + [c.index for c in changes] + [len(sessions)]
    levels = [c.before for c in changes] + ([changes[-1].after] if changes else [])
    for start, end, level in zip(bounds, bounds[1:], levels):
        shapes.append({"type": "line", "x0": start - 0.4, "x1": end - 0.6, "y0": level, "y1": level,
                       "line": {"color": "#c62828", "width": 2}})
    for c in changes:
        shapes.append({"type": "line", "x0": c.index - 0.5, "x1": c.index - 0.5, "yref": "paper", "y0": 0, "y1": 1,
                       "line": {"color": "#c62828", "width": 1.5, "dash": "dash"}})
        annotations.append({"text": c.text, "x": c.index - 0.5, "yref": "paper", "y": 1.0, "yanchor": "bottom",
                            "showarrow": False, "font": {"color": "#c62828", "size": 11}})
    layout = _layout(showlegend=True, legend={"orientation": "h", "y": -0.25, "x": 0}, shapes=shapes,
                     annotations=annotations,
                     xaxis=_axis("session", tickvals=xs, ticktext=[s.label for s in sessions], range=[-0.6, len(xs) - 0.4]),
                     yaxis=_axis(unit, rangemode="tozero"))
    return {"data": data, "layout": layout}
