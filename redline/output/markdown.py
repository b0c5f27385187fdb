"""`--markdown`: a stored session as markdown, `render(session) -> str` (redline.output.FORMATS): a
compare's verdicts and every run for a pull-request comment, a bisection's report, a run's or
calibration's results."""

from __future__ import annotations

from redline.analysis.comparison import TestComparison
from redline.core import metrics
from redline.core.numbers import format_number
from redline.core.run import Run
from redline.output.bisect_report import report_markdown
from redline.output.markdown_text import literal
from redline.output.verdicts import WORDS, cells, explain, interval_label, moves, sorted_comparisons, summary_sentence
from redline.store.session import SessionDocument
from redline.system.steadiness import summarize

# What the verdict table's columns and words mean (markdown emphasis; the HTML report shows it too).
LEGEND = ("Legend: Δ is the Hodges–Lehmann estimate of comparison vs baseline; the 95% interval is "
          "distribution-free (Wilcoxon signed-rank over interleaved pairs). *regression*/*improvement*: "
          "the interval excludes 0, |Δ| ≥ τ = max(2%, 2 × the test's A/A noise floor) and the change survives "
          "Benjamini–Hochberg false-discovery control (5%) over every test and metric here; *no change*: the "
          "interval lies inside ±τ; *inconclusive*: the data cannot tell (the smallest detectable change is "
          "given). For ops/sec higher is better; for latency and server CPU µs/op lower is better. "
          "Metrics counted under valgrind (instructions_per_op, instructions_per_op_command, est_cycles_per_op; "
          "lower is better) are judged by another rule: Δ is the change of medians, the interval every "
          "cross-side ratio of runs, τ = max(1% inside call(), 4% for the whole process; 3 × the A/A spread), "
          "no p-value "
          "(docs/measure-instructions.md).")


def sides_sentence(baseline: str, comparison: str, quote=literal, *, runs=()) -> str:
    """Who was compared, and how the runs met the machine: interleaved, or as duets (when any of
    `runs` was one: redline.engine.engine)."""
    if any((run.facts or {}).get("duet") for run in runs):
        return (f"Baseline {quote(baseline)} vs comparison {quote(comparison)}, timed runs as duets: both sides at "
                "once on the same cores, so throughput and latency are each side's share; server CPU per "
                "operation is the comparison that means what it says.")
    return f"Baseline {quote(baseline)} vs comparison {quote(comparison)}, runs interleaved A B B A on one machine."


def comparison_markdown(comparisons: list[TestComparison], records: list[Run], *, baseline: str,
             comparison: str) -> str:
    tests = len({c.test for c in comparisons})
    shown = metrics.compared(metrics.measure_of(r.metrics for r in records))
    steadiness = summarize(records)
    lines = [f"**redline**: {summary_sentence(comparisons, tests)}", "",
             sides_sentence(baseline, comparison, runs=records), "",
             *([f"{steadiness.sentence()}.", ""] if steadiness else []),
             f"| test | metric | baseline | comparison | Δ | {interval_label(comparisons)} | p | verdict |",
             "|---|---|---:|---:|---:|---:|---:|---|"]
    for c in sorted_comparisons(comparisons):
        n = cells(c)
        lines.append(f"| {literal(c.test)} | {c.metric} | {n['baseline']} | {n['comparison']} | {n['Δ']} | {n['95% CI']} | "
                     f"{n['p']} | **{WORDS[c.verdict]}** {explain(c)}"
                     + (f"; moved: {moves(c)}" if c.significant and c.moved_symbols else "") + " |")
    lines += ["", LEGEND, "",
              "<details><summary>Every run</summary>", "",
              "| test | side | run | status | " + " | ".join(m.label for m in shown) + " |",
              "|---|---|---:|---|" + "---:|" * len(shown)]
    for r in records:
        lines.append(f"| {literal(r.test)} | {r.side} | {r.run_index + 1} | {r.status} | "
                     + " | ".join(format_number(r.metrics.get(m.name)) for m in shown) + " |")
    lines += ["", "</details>", ""]
    return "\n".join(lines)


def render(session: SessionDocument) -> str:
    if session.kind == "gate" and "gate" in session.documents:
        from redline.output.gate_report import gate_markdown
        return gate_markdown(session.documents["gate"])
    if session.comparisons or session.kind == "compare":
        return comparison_markdown(session.comparisons, session.runs, baseline=session.side_label("baseline") or "?",
                                   comparison=session.side_label("comparison") or "?")
    if session.bisection:
        return report_markdown(session.bisection)
    return runs_markdown(session.measured)


def runs_markdown(records: list[Run]) -> str:
    """Every measured run with the metrics its measure gives."""
    shown = metrics.compared(metrics.measure_of(r.metrics for r in records))
    lines = ["| test | side | run | status | " + " | ".join(m.label for m in shown) + " |",
             "|---|---|---:|---|" + "---:|" * len(shown)]
    lines += [f"| {r.key} | {r.side or r.target} | {r.run_index + 1} | {r.status} | "
              + " | ".join(format_number(r.metrics.get(m.name)) for m in shown) + " |" for r in records]
    return "\n".join(lines) + "\n"
