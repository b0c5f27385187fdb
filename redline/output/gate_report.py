"""What a catalogue gate says (redline.lab.gate): the summary sentence, the terminal table and the
markdown page, every test once, sorted by effect (changes first), with the evidence that decided
it: counted Δ and range, timed Δ and interval, which one decided, why a test went to time, the
symbols that moved. The HTML page is redline.output.html.gate_page."""

from __future__ import annotations

from collections import Counter

from rich.table import Table

from redline.analysis.gate import NOT_MEASURED, SKIPPED, TestVerdict, by_effect
from redline.analysis.stats import Verdict
from redline.core import metrics
from redline.core.terminal import styled
from redline.output.lanes import duration_words
from redline.profile.compare import describe_move

WORDS = {Verdict.REGRESSION: "regression", Verdict.IMPROVEMENT: "improvement", Verdict.NO_CHANGE: "no change",
         Verdict.INCONCLUSIVE: "inconclusive", NOT_MEASURED: "not measured", SKIPPED: "skipped"}
STYLE = {Verdict.REGRESSION: "red", Verdict.IMPROVEMENT: "green", Verdict.INCONCLUSIVE: "yellow",
         NOT_MEASURED: "yellow", Verdict.NO_CHANGE: "dim", SKIPPED: "dim"}
SHOWN_IN_FULL = (Verdict.REGRESSION, Verdict.IMPROVEMENT, Verdict.INCONCLUSIVE, NOT_MEASURED)


def _short(name: str) -> str:
    metric = metrics.BY_NAME.get(name)
    return metric.short if metric and metric.short else name


def ratio_words(comparison: dict | None) -> str:
    """'3.02× faster' / '1.25× slower' for a timed or counted comparison (as_json)."""
    if not comparison or not comparison.get("baseline_median") or not comparison.get("comparison_median"):
        return ""
    base, comp = comparison["baseline_median"], comparison["comparison_median"]
    better = comp > base if comparison.get("higher_is_better") else comp < base
    factor = max(base, comp) / min(base, comp)
    return f"{factor:.2f}× {'faster' if better else 'slower'}"


def evidence(comparison: dict | None) -> str:
    """'−66.4% [−66.5%, −66.3%] instr/op in call()' from a comparison's JSON; '–' without one."""
    if not comparison or comparison.get("delta_pct") is None:
        return "–"
    c = comparison
    return f"{c['delta_pct']:+.1f}% [{c['ci_low_pct']:+.1f}%, {c['ci_high_pct']:+.1f}%] {_short(c['metric'])}"


def counted_headline(v: TestVerdict) -> dict | None:
    head = v.screen.headline if v.screen else None
    return head.as_json() if head else None


def summary_sentence(verdicts: list[TestVerdict], document: dict) -> str:
    counts = Counter(v.verdict for v in verdicts)
    by_counts = sum(1 for v in verdicts if v.verdict == Verdict.NO_CHANGE and v.decided_by == "counts")
    parts = [f"{counts[Verdict.REGRESSION]} regressions", f"{counts[Verdict.IMPROVEMENT]} improvements",
             f"{counts[Verdict.NO_CHANGE]} no change ({by_counts} by counts, "
             f"{counts[Verdict.NO_CHANGE] - by_counts} by time)", f"{counts[Verdict.INCONCLUSIVE]} inconclusive"]
    if counts[NOT_MEASURED]:
        parts.append(f"{counts[NOT_MEASURED]} not measured")
    if counts[SKIPPED]:
        parts.append(f"{counts[SKIPPED]} skipped")
    text = f"{len(verdicts)} tests: " + ", ".join(parts)
    broken = document.get("broken") or []
    if broken:
        text += f"; {len(broken)} broken suites left out"
    left = document.get("budget_left_undecided") or []
    if left:
        text += f"; the budget ({duration_words(document.get('budget_s'))}) left {len(left)} tests undecided"
    if not document.get("finished", True):
        text += "; interrupted before the end (resume with --resume)"
    return text + "."


def sides_line(document: dict) -> str:
    sides = {s["name"]: s for s in document.get("sides", [])}
    def label(side):
        config = " ".join(f"{k}={v}" for k, v in (side.get("config") or {}).items())
        return side["target"] + (f" ({config})" if config else "")
    return f"baseline {label(sides['baseline'])} vs comparison {label(sides['comparison'])}" \
        if {"baseline", "comparison"} <= set(sides) else ""


def phases_line(document: dict) -> str:
    p = document.get("phases") or {}
    return (f"wall time {duration_words(document.get('elapsed_s'))}: counted screen {duration_words(p.get('screen_wall_s'))} "
            f"(lanes), timed {duration_words(p.get('timed_s'))}, counted profiles {duration_words(p.get('profile_s'))}; "
            f"datasets prepared {duration_words(p.get('preparation_s'))} (inside those)")


def terminal_table(verdicts: list[TestVerdict], *, width: int | None = None) -> Table:
    """The tests that moved or are undecided, by effect; the rest are counted in the sentence."""
    table = Table(show_header=True, header_style="bold", width=width, show_lines=False)
    for column in ("test", "verdict", "by", "effect", "counted Δ (run range)", "timed Δ (95% CI)", "why"):
        table.add_column(column, overflow="fold")
    for v in by_effect(verdicts):
        if v.verdict not in SHOWN_IN_FULL:
            continue
        timed = v.timed.as_json() if v.timed else None
        table.add_row(v.test, styled((WORDS.get(v.verdict, v.verdict), STYLE.get(v.verdict, ""))), v.decided_by or "–",
                      ratio_words(timed if v.decided_by == "time" else counted_headline(v)) or "–",
                      evidence(counted_headline(v)), evidence(timed), v.why)
    return table


def moved_lines(verdicts: list[TestVerdict]) -> list[str]:
    lines = []
    for v in by_effect(verdicts):
        if v.moved_symbols and (v.changed or v.verdict == Verdict.INCONCLUSIVE):
            moved = ", ".join(describe_move(m) for m in v.moved_symbols[:3])
            lines.append(f"{v.test}: moved {moved}" + (f" (diff flame graph {v.diff_flamegraph})" if v.diff_flamegraph else ""))
    return lines


def skipped_groups(verdicts: list[TestVerdict]) -> list[tuple[str, list[str]]]:
    groups: dict[str, list[str]] = {}
    for v in verdicts:
        if v.verdict == SKIPPED:
            groups.setdefault(v.why, []).append(v.test)
    return sorted(groups.items(), key=lambda item: -len(item[1]))


# -- markdown ----------------------------------------------------------------------------------------
def _md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def gate_markdown(verdicts: list[TestVerdict], document: dict) -> str:
    lines = [f"**redline gate**: {summary_sentence(verdicts, document)}", "", sides_line(document) + ".", "",
             phases_line(document) + ".", "",
             "| test | verdict | decided by | effect | counted Δ (run range) | timed Δ (95% CI) | why |",
             "|---|---|---|---:|---|---|---|"]
    ordered = by_effect(verdicts)
    for v in ordered:
        if v.verdict in SHOWN_IN_FULL:
            timed = v.timed.as_json() if v.timed else None
            lines.append(f"| {_md(v.test)} | **{WORDS.get(v.verdict, v.verdict)}** | {v.decided_by or '–'} | "
                         f"{ratio_words(timed if v.decided_by == 'time' else counted_headline(v)) or '–'} | "
                         f"{_md(evidence(counted_headline(v)))} | {_md(evidence(timed))} | {_md(v.why)} |")
    moved = moved_lines(verdicts)
    if moved:
        lines += ["", "Where the counted profiles moved (self share of instructions, baseline → comparison):", ""]
        lines += [f"- {_md(line)}" for line in moved]
    lines += ["", "Legend: a test is screened by counts (the server under callgrind, 2-3 runs per side, "
              "docs/measure-instructions.md) unless counts cannot see its effect; a screen that is not "
              "*no change*, and every test counts cannot see, is measured by time (interleaved, adaptive as "
              "`redline compare`) and time decides. A change is claimed only by time and only when it survives "
              "Benjamini–Hochberg over every timed decision of the catalogue; *no change* by counts means every "
              "counted metric lies inside ±τ. *not measured*: the gate stopped (budget, interrupt) before the test "
              "was decided. Details: docs/gate.md.", "",
              "<details><summary>Every test</summary>", "",
              "| test | verdict | decided by | counted Δ | timed Δ | why |", "|---|---|---|---|---|---|"]
    for v in ordered:
        timed = v.timed.as_json() if v.timed else None
        lines.append(f"| {_md(v.test)} | {WORDS.get(v.verdict, v.verdict)} | {v.decided_by or '–'} | "
                     f"{_md(evidence(counted_headline(v)))} | {_md(evidence(timed))} | {_md(v.why)} |")
    lines += ["", "</details>", ""]
    broken = document.get("broken") or []
    if broken:
        lines += ["<details><summary>Broken suites, left out</summary>", ""]
        lines += [f"- `{_md(b['location'])}`: {_md(b['message'])}" for b in broken]
        lines += ["", "</details>", ""]
    return "\n".join(lines)
