"""What a comparison says, for the terminal: verdicts ordered significant first, the table, the
summary sentence, and the symbols that moved."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from redline import metrics
from redline.comparison import TestComparison
from redline.output.numbers import format_number
from redline.output.tables import common_prefix
from redline.output.terminal import styled
from redline.stats import Verdict

ORDER = {Verdict.REGRESSION: 0, Verdict.IMPROVEMENT: 1, Verdict.INCONCLUSIVE: 2, Verdict.NO_CHANGE: 3}
STYLE = {Verdict.REGRESSION: "red", Verdict.IMPROVEMENT: "green", Verdict.INCONCLUSIVE: "yellow",
         Verdict.NO_CHANGE: "dim"}
WORDS = {Verdict.REGRESSION: "regression", Verdict.IMPROVEMENT: "improvement",
         Verdict.INCONCLUSIVE: "inconclusive", Verdict.NO_CHANGE: "no change"}


def _short(name: str) -> str:
    metric = metrics.BY_NAME.get(name)
    return metric.short if metric and metric.short else name


def sorted_comparisons(comparisons: list[TestComparison]) -> list[TestComparison]:
    return sorted(comparisons, key=lambda c: (ORDER[c.verdict], c.result.p_value if c.result else 2.0,
                                              c.test, c.metric))


def explain(c: TestComparison) -> str:
    return "; ".join(part for part in (_reason(c), *c.state_flags) if part)


def _reason(c: TestComparison) -> str:
    if c.result is None:
        return c.note or ""
    if c.state_refusal:
        return c.state_refusal
    r = c.result
    if c.held_back_by_fdr:
        return (f"{r.effect_words}; a {WORDS[c.verdict_alone]} on its own (p {r.p_value:.3f}), but not after "
                f"false-discovery control over {c.comparisons_in_session} comparisons")
    if c.verdict == Verdict.INCONCLUSIVE:
        return f"{r.effect_words}; could detect ≥{r.min_detectable_pct:.1f}% (τ {r.tau_pct:.1f}%)"
    return f"{r.effect_words}; τ {r.tau_pct:.1f}%"


def interval_label(comparisons: list[TestComparison]) -> str:
    """What the interval column holds: a 95% confidence interval, or — for runs under callgrind,
    judged by redline.instructions.verdict — the range of every cross-side ratio of runs."""
    counted = {m.name for m in metrics.compared(metrics.INSTRUCTIONS)}
    return "run range" if comparisons and all(c.metric in counted for c in comparisons) else "95% CI"


def terminal_table(comparisons: list[TestComparison], *, width: int = 200) -> Table:
    """Significant first. Below 140 columns the medians, p-value and explanation are left out
    (they are in the markdown and JSON outputs)."""
    wide = width >= 140
    prefix = common_prefix(sorted({c.test for c in comparisons}))
    table = Table(title="redline compare: comparison vs baseline" + (f", tests {prefix}…" if prefix else ""),
                  title_justify="left")
    interval = interval_label(comparisons)
    columns = ["test", "metric"] + (["baseline", "comparison"] if wide else []) + ["Δ", interval] \
        + (["p"] if wide else []) + ["verdict"] + (["why"] if wide else [])
    for column in columns:
        table.add_column(column, justify="left" if column in ("test", "metric", "verdict", "why") else "right",
                         no_wrap=column not in ("test", "why"), overflow="fold",
                         min_width=None if column in ("test", "why") else len(column))
    for c in sorted_comparisons(comparisons):
        r = c.result
        style = STYLE[c.verdict]
        cells = {"test": c.test[len(prefix):], "metric": c.metric if wide else _short(c.metric),
                 "baseline": format_number(r.baseline_median if r else None),
                 "comparison": format_number(r.comparison_median if r else None),
                 "Δ": f"{r.delta_pct:+.1f}%" if r else "–",
                 interval: f"[{r.ci_low_pct:+.1f}%, {r.ci_high_pct:+.1f}%]" if r else "–",
                 "p": f"{r.p_value:.3f}" if r else "–",
                 "verdict": Text(WORDS[c.verdict], style=style), "why": explain(c)}
        table.add_row(*(cells[column] for column in columns))
    return table


def moves(c: TestComparison) -> str:
    from redline.profile import describe_move
    return ", ".join(describe_move(m) for m in (c.moved_symbols or [])[:3])


def profile_lines(comparisons: list[TestComparison]) -> list[Text]:
    """For each test with a verdict of change and a profile: why, in symbols."""
    lines, seen = [], set()
    for c in sorted_comparisons(comparisons):
        if c.significant and c.moved_symbols and c.test not in seen:
            seen.add(c.test)
            lines.append(styled(f"{c.test} ({WORDS[c.verdict]} in {c.metric}): {moves(c)}  ",
                                (str(c.diff_flamegraph), "dim")))
    return lines


def summary_sentence(comparisons: list[TestComparison], tests: int) -> str:
    counts = {v: sum(1 for c in comparisons if c.verdict == v) for v in ORDER}
    plural = {Verdict.REGRESSION: "regressions", Verdict.IMPROVEMENT: "improvements",
              Verdict.INCONCLUSIVE: "inconclusive"}
    parts = [f"{counts[v]} {WORDS[v] if counts[v] == 1 else plural[v]}"
             for v in (Verdict.REGRESSION, Verdict.IMPROVEMENT, Verdict.INCONCLUSIVE) if counts[v]]
    if not parts:
        interval = "range of runs" if interval_label(comparisons) == "run range" else "95% interval"
        return f"No change in any of {tests} tests: every metric's {interval} lies inside its threshold."
    return f"{', '.join(parts)} across {tests} tests × {len({c.metric for c in comparisons})} metrics."
