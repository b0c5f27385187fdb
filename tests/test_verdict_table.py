"""The compare verdict table on an 80-column terminal (or a pipe): a test's rows stay together,
long upstream names are shortened to their distinctive tail and never wrap, and a legend gives
them in full. Pure layout: the comparisons are computed by redline.analysis.stats on made-up runs."""

import random

from redline.core import metrics
from redline.analysis.comparison import TestComparison as Comparison
from redline.output import verdicts
from redline.core import terminal
from redline.analysis.stats import compare_metric

UPSTREAM = ["memtier_benchmark-1Mkeys-geo-geodist-pipeline-10", "memtier_benchmark-1Mkeys-geo-geodist-pipeline-1",
            "memtier_benchmark-1Mkeys-load-stream-1-fields-with-100B-values-pipeline-10",
            "memtier_benchmark-1Mkeys-load-stream-5-fields-with-100B-values-pipeline-10",
            "memtier_benchmark-1Mkeys-string-get-100B-pipeline-10",
            "memtier_benchmark-1Mkeys-string-set-100B-pipeline-10",
            "memtier_benchmark-1Mkeys-hash-hgetall-50-fields-100B-values"]


def comparisons_of(tests: list[str], seed: int = 1) -> list[Comparison]:
    """Every compared metric of every test; the second test regresses in server CPU only, so
    sorting rows by verdict alone would pull its rows apart."""
    rng = random.Random(seed)
    out = []
    for i, test in enumerate(tests):
        for m in metrics.COMPARED:
            slower = 1.3 if (i == 1 and m.name == "server_cpu_us_per_op") else 1.0
            base = [100 * rng.uniform(0.99, 1.01) for _ in range(8)]
            comp = [v * slower * rng.uniform(0.99, 1.01) for v in base]
            result = compare_metric(base, comp, paired=True, higher_is_better=m.higher_is_better)
            out.append(Comparison(test, m.name, result, survives_fdr=True, comparisons_in_session=20))
    return out


def render(comparisons, width: int) -> list[str]:
    console = terminal.console(width=width, record=True, file=open("/dev/null", "w"))
    console.print(verdicts.terminal_table(comparisons, width=width))
    for line in verdicts.name_legend(comparisons, width=width):
        console.print(line)
    return console.export_text().splitlines()


def test_80_columns_keep_names_whole_rows_together_and_a_legend():
    comparisons = comparisons_of(UPSTREAM)
    lines = render(comparisons, 80)
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    rows = [line for line in lines if line.startswith("│")]
    assert len(rows) == len(comparisons)            # one line per row: nothing wrapped
    names = {c.test: None for c in comparisons}
    labels = [row.split("│")[1].strip() for row in rows]
    shown = [label for label in labels if label]
    assert len(shown) == len(names)                 # each test named once, on its first row …
    for start, label in ((labels.index(s), s) for s in shown):
        block = labels[start:start + len(metrics.COMPARED)]
        assert block[0] == label and not any(block[1:])   # … followed by its other metrics' rows
    assert len(set(shown)) == len(shown)            # shortened names stay distinct
    assert "geodist-pipeline-10" in " ".join(shown) and "geodist-pipeline-1" in " ".join(shown)
    # the regressing test comes first, with all its rows
    assert labels[0] == "geo-geodist-pipeline-1"
    assert "regression" in " ".join(rows[:len(metrics.COMPARED)])
    legend = [line for line in lines if " = " in line]
    prefix = "memtier_benchmark-1Mkeys-"
    assert prefix in lines[0]                       # the shared prefix once, in the title
    for test in UPSTREAM:                           # every name whole in the table or in the legend
        assert test[len(prefix):] in shown or any(line.endswith("= " + test[len(prefix):]) for line in legend), test
    assert legend and all(line.split(" = ")[0] in shown for line in legend)


def test_the_one_line_per_row_check_can_fail():
    """Full upstream names in a folding column at 80 columns (the table before the fix) wrap:
    the row count the test above relies on sees it."""
    from rich.table import Table
    table = Table()
    table.add_column("test", overflow="fold")
    table.add_column("rest", no_wrap=True)
    for test in UPSTREAM:
        table.add_row(test, "x" * 50)
    console = terminal.console(width=80, record=True, file=open("/dev/null", "w"))
    console.print(table)
    rows = [line for line in console.export_text().splitlines() if line.startswith("│")]
    assert len(rows) > len(UPSTREAM)


def test_wide_terminal_shows_full_names_and_no_legend():
    comparisons = comparisons_of(UPSTREAM)
    lines = render(comparisons, 220)
    assert not verdicts.name_legend(comparisons, width=220)
    assert any("geo-geodist-pipeline-10" in line for line in lines)


def test_short_names_keep_the_distinctive_tail_and_stay_distinct():
    names = ["get-100B-pipeline-10", "set-100B-pipeline-10", "get-100B-pipeline-100", "geo-geodist-pipeline-10",
             "hash-hget", "1Mkeys-load-string-with-10B-values-pipeline-10",
             "10Mkeys-load-string-with-10B-values-pipeline-10"]
    short = verdicts.short_names(names, 16)
    assert short["hash-hget"] == "hash-hget"
    assert short["get-100B-pipeline-100"] == "…pipeline-100"
    assert short["get-100B-pipeline-10"].startswith("get") and short["set-100B-pipeline-10"].startswith("set")
    assert len(set(short.values())) == len(names)
    assert all(len(s) <= 16 for s in short.values())
