"""The HTML report of one session: `run` and `calibrate` (summary, warnings, per test the spread
of every run and the per-second timeline, flame graphs) and `compare` (besides: the summary
sentence, the forest plot of every test × metric, the verdict table with the markdown comment's
words, per test both sides' runs in the order they ran, the differential flame graph and the
symbols that moved)."""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from datetime import datetime, timezone

from redline.analysis import history
from redline.analysis.comparison import TestComparison
from redline.core import metrics
from redline.core.run import Run
from redline.output.html import plots
from redline.output.html.page import Page, facts_table, table, text
from redline.output.markdown import LEGEND, sides_sentence
from redline.output.verdicts import (WORDS, by_test, cells, explain, interval_label, interval_words, moves,
                                     sorted_comparisons, summary_sentence)
from redline.store.session import SessionDocument
from redline.system.steadiness import SteadinessSummary, summarize


def when(timestamp: float | None) -> str:
    return "–" if not timestamp else datetime.fromtimestamp(timestamp, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def anchor_of(index: int) -> str:
    return f"test-{index + 1}"


def session_page(data: SessionDocument) -> Page:
    page = Page(f"redline {data.kind} · session {data.session_id}",
                subtitle=[f"{text(when(data.started_at))} → {text(when(data.finished_at))} · {text(data.status)} · "
                          f"host {text(data.host)}", f"<code>{text(' '.join(data.argv))}</code>"])
    tests = _tests(data)
    if data.kind == "compare":
        _compare_sections(page, data, tests)
    if data.bisection:
        from redline.output.html.bisect_section import bisection_section
        page.section("bisection", "Bisection", bisection_section(page, data.bisection))
    steadiness = summarize(data.measured)
    page.section("summary", "Summary", _summary(data, tests, steadiness))
    page.section("warnings", "Warnings", _warnings(data, steadiness))
    by_key = _comparisons_by_test(data.comparisons)
    for i, (key, runs) in enumerate(tests.items()):
        page.section(anchor_of(i), key, _test_block(page, data, key, runs, by_key.get(runs[0].test, [])))
    return page


def _tests(data: SessionDocument) -> dict[str, list[Run]]:
    """Every test (and topology) of the session with its runs, in the order they ran."""
    grouped: dict[str, list[Run]] = defaultdict(list)
    for run in data.runs:
        grouped[run.key].append(run)
    return dict(grouped)


def _comparisons_by_test(comparisons: list[TestComparison]) -> dict[str, list[TestComparison]]:
    grouped: dict[str, list[TestComparison]] = defaultdict(list)
    for c in by_test(comparisons):
        grouped[c.test].append(c)
    return grouped


# -- summary -------------------------------------------------------------------------------------

def _first_facts(data: SessionDocument) -> dict:
    return next((r.facts for r in data.runs if r.status == "ok" and r.facts.get("server_version")),
                next((r.facts for r in data.runs if r.facts), {}))


def _summary(data: SessionDocument, tests: dict[str, list[Run]], steadiness: SteadinessSummary | None) -> str:
    machine = data.machine or {}
    facts = _first_facts(data)
    pinning = facts.get("pinning") or {}
    targets = sorted({(r.side or "", r.target) for r in data.runs})
    builds = {}
    for r in data.runs:
        if r.facts.get("identity"):
            builds.setdefault(r.target, history.describe_build(r.facts["identity"]))
    warmups = sorted({r.facts.get("warmup_s") for r in data.measured if r.facts.get("warmup_s") is not None})
    # --duration, or longer for a test whose calls needed it (redline.bench.window_fit)
    windows = sorted({r.facts.get("duration_s") for r in data.measured if r.facts.get("duration_s") is not None})
    pairs = [
        ("machine", f"{machine.get('cpu_model', '?')}, {machine.get('cores', '?')} cores, kernel "
                    f"{machine.get('kernel', '?')}, host {machine.get('hostname', data.host)}"),
        ("load average at start", ", ".join(f"{v:g}" for v in machine.get("load_avg") or [])),
        ("CPU governor", machine.get("cpu_governor") or "not reported (a VM)"),
        ("redline", f"{machine.get('redline_version', '?')} (commit {machine.get('redline_commit', '?')})"),
        *[(f"target{f' ({side})' if side else ''}", target) for side, target in targets],
        *[(f"build of {target}", build) for target, build in builds.items()],
        ("server version", facts.get("server_version")),
        ("server binary", facts.get("server_binary")),
        ("server configuration", " ".join(f"{k} {v}" for k, v in (facts.get("server_config") or {}).items())),
        ("pinning", f"server on CPUs {pinning.get('server_cpus')}, client on CPUs {pinning.get('client_cpus')}"
                    + (" (shared)" if pinning.get("shared") else "") if pinning else None),
        ("topologies", ", ".join(sorted({r.topology for r in data.runs}))),
        ("warm-up", ", ".join(f"{w:g} s" for w in warmups)),
        ("measured window", ", ".join(f"{w:g} s" for w in windows) or None),
        ("steadiness", steadiness.sentence() if steadiness else None),
        ("runs", f"{len(data.measured)} measured ({sum(r.status == 'ok' for r in data.measured)} ok) in "
                 f"{len(tests)} tests; {sum(r.purpose == 'profile' for r in data.runs)} profiled"),
    ]
    return facts_table(pairs) + "<h3>Results (median of each test's successful runs)</h3>" + _results_table(data, tests)


def _median(values: list[float | None]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _results_table(data: SessionDocument, tests: dict[str, list[Run]]) -> str:
    shown = metrics.table_metrics(wide=True)
    rows = []
    for i, (key, runs) in enumerate(tests.items()):
        for side in dict.fromkeys(r.side for r in runs if r.purpose == "measure"):
            mine = [r for r in runs if r.purpose == "measure" and r.side == side]
            ok = [r for r in mine if r.status == "ok"]
            rows.append([f'<a href="#{anchor_of(i)}">{text(key)}</a>', text(side or ""), f"{len(ok)}/{len(mine)}",
                         *[text(m.format(_median([r.metrics.get(m.name) for r in ok]))) for m in shown]])
    return table(["test", "side", "ok runs", *[m.label for m in shown]], rows,
                 numeric=set(range(2, 3 + len(shown))))


def _warnings(data: SessionDocument, steadiness: SteadinessSummary | None) -> str:
    items = []
    for r in data.runs:
        where = f"{r.key}{f' [{r.side}]' if r.side else ''} run {r.run_index + 1}{' (profile)' if r.purpose == 'profile' else ''}"
        for flag in r.flags:
            items.append(f"{text(where)}: {text(flag)}")
        if r.status in ("failed", "interrupted"):
            items.append(f"<b>{text(where)}: {text(r.status)}</b>: {text(r.error)}")
        elif r.status == "skipped":
            items.append(f"{text(r.key)}: skipped: {text(r.error)}")
    for c in data.comparisons:
        for flag in c.state_flags:
            items.append(f"{text(c.test)} ({text(c.metric)}): {text(flag)}")
    if steadiness and steadiness.unsteady:
        items.append(text(steadiness.sentence()))
    if not items:
        return '<p class="note">None: no run was flagged (client saturated, miss path, error replies), failed or skipped.</p>'
    return '<ul class="warnings">' + "".join(f'<li class="warn">{item}</li>' for item in dict.fromkeys(items)) + "</ul>"


# -- per test ------------------------------------------------------------------------------------

def _run_hover(r: Run) -> str:
    return f"run {r.run_index + 1}{f' · {r.side}' if r.side else ''} · {when(r.started_at)}"


def _test_block(page: Page, data: SessionDocument, key: str, runs: list[Run],
                comparisons: list[TestComparison]) -> str:
    measured = [r for r in runs if r.purpose == "measure"]
    ok = [r for r in measured if r.status == "ok"]
    parts = ['<div class="test-block">']
    facts = next((r.facts for r in ok), {})
    dataset, state = facts.get("dataset") or {}, facts.get("state") or {}
    parts.append(facts_table([
        ("suite file", next((r.facts.get("suite_file") for r in runs if r.facts.get("suite_file")), None)),
        ("server state", f"{state.get('origin', '')}: {state.get('why', '')}" if state else None),
        ("prepared", state.get("prepared_how")),
        ("dataset", ", ".join(f"{k} {v}" for k, v in dataset.items() if k in ("keyspace_length", "keys_with_ttl",
                                                                              "restore_s", "prepared_s"))),
        ("restart per run", state.get("restart_why")),
        ("load generator", " ".join(facts.get("loadgen_argv") or [])),
    ]))
    if comparisons:
        parts.append(_verdict_lines(comparisons))
    if not ok:
        parts.append('<p class="note">No successful run: nothing to plot (see Warnings).</p>')
    elif data.kind == "compare":
        parts.append("<h3>Both sides' runs in the order they ran (x: the run's place in the session)</h3>")
        parts.append(page.figure(plots.interleaved(_interleaved_panels(measured)), height=280))
    if ok:
        parts.append("<h3>Every run</h3>")
        parts.append(page.figure(plots.spread(_spread_panels(ok)), height=300))
        timeline = _timeline(ok)
        if timeline:
            parts.append("<h3>Each second of the measured window</h3>")
            parts.append(page.figure(timeline, height=520))
    parts.append(_profiles(page, runs, comparisons))
    parts.append("</div>")
    return "".join(parts)


def _spread_panels(ok: list[Run]) -> list[plots.Panel]:
    sides = list(dict.fromkeys(r.side for r in ok))
    return [plots.Panel(f"{m.label}" + ("" if m.unit in m.label else f" ({m.unit})"),
                        [(side, side or "runs", [r.metrics.get(m.name) for r in ok if r.side == side],
                          [_run_hover(r) for r in ok if r.side == side]) for side in sides])
            for m in metrics.COMPARED]


def _interleaved_panels(measured: list[Run]) -> list[tuple[str, list[plots.Point]]]:
    return [(m.label, [plots.Point(order + 1, r.side, r.metrics.get(m.name), _run_hover(r))
                       for order, r in enumerate(measured) if r.status == "ok" and r.metrics.get(m.name) is not None])
            for m in metrics.COMPARED]


def _timeline(ok: list[Run]) -> dict | None:
    panels = []
    for s in metrics.SERIES:
        lines = [plots.Line(r.side, _run_hover(r), [v * s.scale for v in r.series[s.name]])
                 for r in ok if r.series.get(s.name)]
        if lines:
            panels.append((f"{s.label}" + ("" if s.unit in s.label else f" ({s.unit})"), lines))
    if not panels:
        return None
    warmup = max((r.facts.get("warmup_s") or 0.0 for r in ok), default=0.0)
    return plots.timeline(panels, warmup_s=warmup)


def _verdict_lines(comparisons: list[TestComparison]) -> str:
    rows = []
    for c in comparisons:
        n = cells(c)
        rows.append([text(_metric_label(c.metric)), n["baseline"], n["comparison"], n["Δ"], text(n["95% CI"]), n["p"],
                     f'<span class="verdict-{c.verdict}">{text(WORDS[c.verdict])}</span> {text(explain(c))}'])
    return table(["metric", "baseline", "comparison", "Δ", interval_label(comparisons), "p", "verdict"], rows,
                 numeric={1, 2, 3, 4, 5})


def _metric_label(name: str) -> str:
    metric = metrics.BY_NAME.get(name)
    return metric.label if metric else name


def _profiles(page: Page, runs: list[Run], comparisons: list[TestComparison]) -> str:
    parts = []
    diff = next((c for c in comparisons if c.diff_flamegraph), None)
    if diff:
        parts.append("<h3>Where the server's CPU moved</h3>")
        if diff.moved_symbols:
            parts.append(table(["symbol", "baseline share", "comparison share"],
                               [[f"<code>{text(m['symbol'])}</code>", f"{m['baseline_share']:.1%}",
                                 f"{m['comparison_share']:.1%}"] for m in diff.moved_symbols], numeric={1, 2}))
        parts.append(page.flame_graph(diff.diff_flamegraph, "differential flame graph: comparison against baseline "
                                      "(red: more samples in the comparison, blue: fewer)", open_=True))
    for r in runs:
        if r.purpose == "profile" and r.status == "ok" and r.profile:
            top = ", ".join(f"{s['symbol']} {s['share']:.0%}" for s in (r.profile.get("top_self") or [])[:5])
            parts.append(f'<p class="note">profile{f" ({text(r.side)})" if r.side else ""}: {text(r.profile.get("samples"))} '
                         f'samples, {text(r.profile.get("event"))}, {text(r.profile.get("unwinder"))} unwinding; top '
                         f'self: {text(top)}</p>')
            parts.append(page.flame_graph(r.profile.get("svg_path"),
                                          f"flame graph{f' ({r.side})' if r.side else ''}: {r.key}",
                                          open_=not diff and r.side in (None, "baseline")))
    if parts and not diff:
        parts.insert(0, "<h3>Where the server's CPU went</h3>")
    return "".join(parts)


# -- compare -------------------------------------------------------------------------------------

def _compare_sections(page: Page, data: SessionDocument, tests: dict[str, list[Run]]) -> None:
    comparisons = data.comparisons
    baseline, comparison = data.side_label("baseline") or "?", data.side_label("comparison") or "?"
    lead = (f'<p class="lead"><b>redline</b>: {text(summary_sentence(comparisons, len({c.test for c in comparisons})))}</p>'
            f"<p>{sides_sentence(baseline, comparison, quote=lambda s: f'<code>{text(s)}</code>', runs=data.measured)}</p>")
    page.section("verdicts", "Verdicts", lead + _forest(page, comparisons) + _verdict_table(comparisons, tests)
                 + f'<p class="note">{_emphasis(LEGEND)}</p>')


def _emphasis(markdown: str) -> str:
    return re.sub(r"\*([^*]+)\*", r"<em>\1</em>", text(markdown))


def _badness(c: TestComparison) -> float:
    """The change signed so that worse is larger (for the order of the forest plot)."""
    metric = metrics.BY_NAME.get(c.metric)
    return -c.result.delta_pct if metric and metric.higher_is_better else c.result.delta_pct


def _forest(page: Page, comparisons: list[TestComparison]) -> str:
    judged = sorted((c for c in comparisons if c.result), key=lambda c: -_badness(c))
    if not judged:
        return ""
    rows = [plots.ForestRow(f"{c.test} · {_metric_label(c.metric)}", c.result.delta_pct, c.result.ci_low_pct,
                            c.result.ci_high_pct, c.result.tau_pct, c.verdict, WORDS[c.verdict],
                            f"{text(c.test)}<br>{text(_metric_label(c.metric))}: {cells(c)['Δ']} {cells(c)['95% CI']}, "
                            f"τ {c.result.tau_pct:.1f}%<br>{WORDS[c.verdict]}: {text(explain(c))}")
            for c in judged]
    note = ('<p class="note">Sorted by effect, worst first (for ops/sec a fall is worse, for latency and CPU '
            'a rise). Hover for the numbers and the reason.</p>')
    estimate = {"95% CI": "Hodges–Lehmann, ", "run range": "change of medians, "}.get(interval_label(judged), "")
    return note + page.figure(plots.forest(rows, interval=estimate + interval_words(judged)),
                              height=110 + 22 * len(rows))


def _verdict_table(comparisons: list[TestComparison], tests: dict[str, list[Run]]) -> str:
    anchors = {runs[0].test: anchor_of(i) for i, runs in enumerate(tests.values())}
    rows = []
    for c in sorted_comparisons(comparisons):
        n = cells(c)
        moved = moves(c) if c.significant and c.moved_symbols else ""
        rows.append([f'<a href="#{anchors.get(c.test, "")}">{text(c.test)}</a>', text(c.metric), n["baseline"],
                     n["comparison"], n["Δ"], text(n["95% CI"]), n["p"],
                     f'<span class="verdict-{c.verdict}">{text(WORDS[c.verdict])}</span> {text(explain(c))}'
                     + (f"; moved: {text(moved)}" if moved else "")])
    return table(["test", "metric", "baseline", "comparison", "Δ", interval_label(comparisons), "p", "verdict"], rows,
                 numeric={2, 3, 4, 5, 6})

