"""What a comparison says, for the terminal: verdicts ordered significant first, the table, the
summary sentence, and the symbols that moved."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from redline.analysis.comparison import TestComparison
from redline.analysis.stats import Verdict
from redline.core import metrics
from redline.core.numbers import format_number
from redline.core.terminal import styled
from redline.output.tables import common_prefix

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
    if c.withheld:
        return c.withheld
    r = c.result
    if c.held_back_by_fdr:
        return (f"{r.effect_words}; a {WORDS[c.verdict_alone]} on its own (p {r.p_value:.3f}), but not after "
                f"false-discovery control over {c.comparisons_in_session} comparisons")
    if c.verdict == Verdict.INCONCLUSIVE:
        stopped = f"; {r.futility_note}" if r.futility_note else ""
        return f"{r.effect_words}; could detect ≥{r.min_detectable_pct:.1f}% (τ {r.tau_pct:.1f}%){stopped}"
    return f"{r.effect_words}; τ {r.tau_pct:.1f}%"


COUNTED = frozenset(m.name for m in metrics.compared(metrics.INSTRUCTIONS))


def interval_label(comparisons: list[TestComparison]) -> str:
    """What the interval column holds: a 95% confidence interval, or — for runs under callgrind,
    judged by redline.analysis.counted — the range of every cross-side ratio of runs; "interval"
    when a session holds both."""
    counted = [c.metric in COUNTED for c in comparisons]
    if counted and all(counted):
        return "run range"
    return "interval" if any(counted) else "95% CI"


def interval_words(comparisons: list[TestComparison]) -> str:
    """The interval column's meaning in words (for a sentence or an axis title)."""
    return {"run range": "range of every cross-side ratio of runs", "95% CI": "95% interval"}.get(
        interval_label(comparisons), "95% interval; counted metrics: range of runs")


def by_test(comparisons: list[TestComparison]) -> list[TestComparison]:
    """A test's rows together, metrics in the registry's order; the tests ordered as
    `sorted_comparisons` orders their most significant row (so regressions still come first)."""
    first = {}
    for rank, c in enumerate(sorted_comparisons(comparisons)):
        first.setdefault(c.test, rank)
    place = {name: i for i, name in enumerate(metrics.NAMES)}
    return sorted(comparisons, key=lambda c: (first[c.test], place.get(c.metric, len(place)), c.metric))


def cells(c: TestComparison) -> dict[str, str]:
    """The numbers of one verdict row as every table shows them."""
    r = c.result
    return {"baseline": format_number(r.baseline_median if r else None),
            "comparison": format_number(r.comparison_median if r else None),
            "Δ": f"{r.delta_pct:+.1f}%" if r else "–",
            "95% CI": f"[{r.ci_low_pct:+.1f}%, {r.ci_high_pct:+.1f}%]" if r else "–",
            "p": f"{r.p_value:.3f}" if r and c.metric not in COUNTED else "–"}     # counted: the rule has no p


ELLIPSIS = "…"
LEAST_NAME = 12          # a name column is never narrower than this


def short_names(tests: list[str], budget: int) -> dict[str, str]:
    """Each test's name in at most `budget` characters, keeping the distinctive tail: a long name
    loses its head up to a '-' ("…geodist-pipeline-10"); names whose tails would be the same keep
    the first word that tells them apart ("get…pipeline-10", "set…pipeline-10")."""
    tails = {name: _tail(name, budget) for name in tests}
    out = dict(tails)
    for name in tests:
        same = [other for other in tests if other != name and tails[other] == tails[name]]
        if same:
            out[name] = _distinct_word_and_tail(name, budget, same)
    return out


def _tail(name: str, budget: int) -> str:
    """'…' and the last words of `name` that fit (a word is cut only when one word is too long)."""
    if len(name) <= budget:
        return name
    tail = name[-(budget - 1):]
    cut = tail.find("-")
    if 0 <= cut < len(tail) // 2:
        tail = tail[cut + 1:]
    return ELLIPSIS + tail


def _distinct_word_and_tail(name: str, budget: int, others: list[str]) -> str:
    """The first word of `name` that none of `others` has at its place, then the tail."""
    words = name.split("-")
    for i, word in enumerate(words):
        if all(other.split("-")[i:i + 1] != [word] for other in others) and len(word) <= budget // 2:
            rest = "-".join(words[i + 1:])
            lead = word if i == 0 else ELLIPSIS + word
            return lead + (_tail("-" + rest, budget - len(lead)) if rest else "")
    head = (budget - 1) // 2
    return name[:head] + ELLIPSIS + name[-(budget - 1 - head):]


def _names(comparisons: list[TestComparison], width: int) -> tuple[str, dict[str, str]]:
    """The common prefix (shown once in the title) and each test's name in the table."""
    tests = sorted({c.test for c in comparisons})
    prefix = common_prefix(tests)
    rest = [t[len(prefix):] for t in tests]
    if width >= 140:
        return prefix, dict(zip(tests, rest))
    short = short_names(rest, max(LEAST_NAME, width - _narrow_columns_width(comparisons)))
    return prefix, {test: short[r] for test, r in zip(tests, rest)}


def _narrow_columns_width(comparisons: list[TestComparison]) -> int:
    """What the narrow table's other columns take (metric, Δ, 95% CI, verdict), borders included."""
    widest = [max([len(name)] + [len(text) for text in texts]) for name, texts in (
        ("metric", [_short(c.metric) for c in comparisons]), ("Δ", [cells(c)["Δ"] for c in comparisons]),
        ("95% CI", [cells(c)["95% CI"] for c in comparisons]), ("verdict", [WORDS[c.verdict] for c in comparisons]))]
    return sum(widest) + 3 * (len(widest) + 1) + 1


def terminal_table(comparisons: list[TestComparison], *, width: int = 200) -> Table:
    """A test's rows together, tests with a verdict of change first. Below 140 columns the
    medians, p-value and explanation are left out (they are in the markdown and JSON outputs) and
    long test names are shortened to their distinctive tail (`name_legend` gives them in full)."""
    wide = width >= 140
    prefix, names = _names(comparisons, width)
    table = Table(title="redline compare: comparison vs baseline" + (f", tests {prefix}…" if prefix else ""),
                  title_justify="left")
    interval = interval_label(comparisons)
    columns = ["test", "metric"] + (["baseline", "comparison"] if wide else []) + ["Δ", interval] \
        + (["p"] if wide else []) + ["verdict"] + (["why"] if wide else [])
    for column in columns:
        table.add_column(column, justify="left" if column in ("test", "metric", "verdict", "why") else "right",
                         no_wrap=column != "why" and (column != "test" or not wide), overflow="fold",
                         min_width=None if column in ("test", "why") else len(column))
    rows = by_test(comparisons)
    for i, c in enumerate(rows):
        last_of_test = i + 1 == len(rows) or rows[i + 1].test != c.test
        shown = {"test": names[c.test] if i == 0 or rows[i - 1].test != c.test else "",
                 "metric": c.metric if wide else _short(c.metric), **cells(c), interval: cells(c)["95% CI"],
                 "verdict": Text(WORDS[c.verdict], style=STYLE[c.verdict]), "why": explain(c)}
        table.add_row(*(shown[column] for column in columns), end_section=last_of_test and not wide)
    return table


def name_legend(comparisons: list[TestComparison], *, width: int = 200) -> list[str]:
    """Under a narrow table: the full name of every test whose name was shortened (after the
    prefix all tests share, which the table's title gives)."""
    prefix, names = _names(comparisons, width)
    return [f"{short} = {test[len(prefix):]}" for test, short in sorted(names.items(), key=lambda item: item[1])
            if short != test[len(prefix):]]


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
    if not comparisons:
        return ("No verdicts were stored for this session: it ended before compare judged it "
                "(`redline compare --resume SESSION` goes on with an interrupted compare).")
    counts = {v: sum(1 for c in comparisons if c.verdict == v) for v in ORDER}
    plural = {Verdict.REGRESSION: "regressions", Verdict.IMPROVEMENT: "improvements",
              Verdict.INCONCLUSIVE: "inconclusive"}
    parts = [f"{counts[v]} {WORDS[v] if counts[v] == 1 else plural[v]}"
             for v in (Verdict.REGRESSION, Verdict.IMPROVEMENT, Verdict.INCONCLUSIVE) if counts[v]]
    if not parts:
        return f"No change in any of {tests} tests: every metric's {interval_words(comparisons)} lies inside its threshold."
    return f"{', '.join(parts)} across {tests} tests × {len({c.metric for c in comparisons})} metrics."
