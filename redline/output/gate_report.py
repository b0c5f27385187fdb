"""What a catalogue gate says (redline.lab.gate), rendered from its stored document (the session's
"gate" document, the same JSON `redline gate --json` writes): the summary sentence, the terminal
table and the markdown page — every test once, changes first, by the size of the effect, with the
evidence that decided it (counted Δ and range, timed Δ and interval, which one decided, why a test
went to time, the symbols that moved). The HTML page is redline.output.html.gate_page; `redline
show` and `redline report` give a stored gate through the same functions."""

from __future__ import annotations

from collections import Counter

from rich.table import Table

from redline.core import metrics
from redline.core.numbers import format_duration as duration_words
from redline.core.terminal import styled
from redline.profile.compare import describe_move
from redline.system.steadiness import SteadinessSummary

REGRESSION, IMPROVEMENT, NO_CHANGE, INCONCLUSIVE = "regression", "improvement", "no_change", "inconclusive"
NOT_MEASURED, SKIPPED = "undecided", "skipped"      # redline.analysis.gate's words for the other two
WORDS = {REGRESSION: "regression", IMPROVEMENT: "improvement", NO_CHANGE: "no change", INCONCLUSIVE: "inconclusive",
         NOT_MEASURED: "not measured", SKIPPED: "skipped"}
STYLE = {REGRESSION: "red", IMPROVEMENT: "green", INCONCLUSIVE: "yellow", NOT_MEASURED: "yellow", NO_CHANGE: "dim",
         SKIPPED: "dim"}
ORDER = {REGRESSION: 0, IMPROVEMENT: 0, INCONCLUSIVE: 1, NOT_MEASURED: 2, NO_CHANGE: 3, SKIPPED: 4}
SHOWN_IN_FULL = (REGRESSION, IMPROVEMENT, INCONCLUSIVE, NOT_MEASURED)




def ordered(document: dict) -> list[dict]:
    """Every test's entry: changes first, then what is undecided, then no change, then skipped;
    by the size of the effect within each."""
    return sorted(document.get("tests", []), key=lambda t: (ORDER.get(t["verdict"], 5), -abs(t.get("effect_pct") or 0.0),
                                                            t["key"]))


def _short(name: str) -> str:
    metric = metrics.BY_NAME.get(name)
    return (metric.short or metric.label) if metric else name


def counted_headline(entry: dict) -> dict | None:
    """The counted comparison a test is shown by: the one the gate judged it by
    (redline.analysis.gate.Screen.headline, named in the document)."""
    counted = entry.get("counted") or {}
    rows = [c for c in counted.get("metrics") or [] if c.get("delta_pct") is not None]
    headline = next((c for c in rows if c["metric"] == counted.get("headline_metric")), None)
    return headline or (rows[0] if rows else None)


def ratio_words(comparison: dict | None) -> str:
    """'3.02× faster' / '1.25× slower' for a timed comparison (its JSON); for a counted one, what the
    program does, not how fast it is: '2.11× fewer instr/op in call()'. The ratio is the estimate
    the interval beside it is of (`delta_pct`, paired where the runs are): the ratio of the sides'
    medians can say otherwise on a drifting machine (GET at pipeline 100 in duets: medians 1.01×,
    the pairs −3.0% [−4.6%, −1.4%])."""
    if not comparison:
        return ""
    if comparison.get("delta_pct") is not None and comparison["delta_pct"] > -100:
        base, comp = 1.0, 1.0 + comparison["delta_pct"] / 100
    elif comparison.get("baseline_median") and comparison.get("comparison_median"):
        base, comp = comparison["baseline_median"], comparison["comparison_median"]
    else:
        return ""
    better = comp > base if comparison.get("higher_is_better") else comp < base
    ratio = f"{max(base, comp) / min(base, comp):.2f}×"
    metric = metrics.BY_NAME.get(comparison.get("metric"))
    if metric is not None and (metric.measure == metrics.INSTRUCTIONS or metric.better is None):
        return f"{ratio} {'fewer' if comp < base else 'more'} {metric.label}"     # work done, not speed
    return f"{ratio} {'faster' if better else 'slower'}"


def evidence(comparison: dict | None) -> str:
    """'−66.4% [−66.5%, −66.3%] instr/op in call()'; '–' without a comparison."""
    if not comparison or comparison.get("delta_pct") is None:
        return "–"
    c = comparison
    return f"{c['delta_pct']:+.1f}% [{c['ci_low_pct']:+.1f}%, {c['ci_high_pct']:+.1f}%] {_short(c['metric'])}"


def effect(entry: dict) -> str:
    """The effect in words, of what decided (time), else of the counts: in instructions, since a
    count that time did not confirm says nothing of speed."""
    return ratio_words(entry.get("timed") if entry.get("decided_by") == "time" else counted_headline(entry)) or "–"


def cells(entry: dict) -> list[str]:
    """test, verdict, decided by, effect, counted Δ, timed Δ, why."""
    return [entry["key"], WORDS.get(entry["verdict"], entry["verdict"]), entry.get("decided_by") or "–", effect(entry),
            evidence(counted_headline(entry)), evidence(entry.get("timed")), entry.get("why") or ""]


HEADERS = ["test", "verdict", "decided by", "effect", "counted Δ (run range)", "timed Δ (95% CI)", "why"]


def summary_sentence(document: dict) -> str:
    tests = document.get("tests", [])
    counts = Counter(t["verdict"] for t in tests)
    by_counts = sum(1 for t in tests if t["verdict"] == NO_CHANGE and t.get("decided_by") == "counts")
    parts = [f"{counts[REGRESSION]} regressions", f"{counts[IMPROVEMENT]} improvements",
             f"{counts[NO_CHANGE]} no change ({by_counts} by counts, {counts[NO_CHANGE] - by_counts} by time)",
             f"{counts[INCONCLUSIVE]} inconclusive"]
    if counts[NOT_MEASURED]:
        parts.append(f"{counts[NOT_MEASURED]} not measured")
    if counts[SKIPPED]:
        parts.append(f"{counts[SKIPPED]} skipped")
    text = f"{len(tests)} tests: " + ", ".join(parts)
    if document.get("broken"):
        text += f"; {len(document['broken'])} broken suites left out"
    if document.get("budget_left_undecided"):
        text += (f"; the budget ({duration_words(document.get('budget_s'))}) left "
                 f"{len(document['budget_left_undecided'])} tests undecided")
    if document.get("budget_left_unprofiled"):
        text += (f"; changes the budget left without a counted profile: {len(document['budget_left_unprofiled'])} "
                 "(resume to profile them)")
    if not document.get("finished", True):
        text += "; stopped before the end (resume with --resume)"
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
    return (f"wall time {duration_words(document.get('elapsed_s'))} after builds of "
            f"{duration_words(p.get('builds_s'))}: counted screen {duration_words(p.get('screen_wall_s'))} (lanes), "
            f"timed {duration_words(p.get('timed_s'))}"
            f"{' (duets)' if (document.get('settings') or {}).get('duet') else ''}, "
            f"counted profiles {duration_words(p.get('profile_wall_s', p.get('profile_s')))}"
            f"{' in lanes (' + duration_words(p.get('profile_s')) + ' of lane time)' if p.get('profile_wall_s') else ''}; "
            f"datasets prepared {duration_words(p.get('preparation_s'))} (inside those)")


def steadiness_line(document: dict) -> str | None:
    """How steady the machine was as the timed confirmations began, None before any."""
    found = SteadinessSummary.from_json(document.get("steadiness"))
    return found.sentence() if found else None


def moved_lines(document: dict) -> list[str]:
    lines = []
    for entry in ordered(document):
        if entry.get("moved_symbols") and entry["verdict"] in (REGRESSION, IMPROVEMENT, INCONCLUSIVE):
            moved = ", ".join(describe_move(m) for m in entry["moved_symbols"][:3])
            lines.append(f"{entry['key']}: moved {moved}"
                         + (f" (diff flame graph {entry['diff_flamegraph']})" if entry.get("diff_flamegraph") else ""))
    return lines


def skipped_groups(document: dict) -> list[tuple[str, list[str]]]:
    groups: dict[str, list[str]] = {}
    for entry in document.get("tests", []):
        if entry["verdict"] == SKIPPED:
            groups.setdefault(entry.get("why") or "", []).append(entry["key"])
    return sorted(groups.items(), key=lambda item: -len(item[1]))


def print_gate(console, document: dict) -> None:
    """The terminal's end of `redline gate`: the tests that changed or are undecided, by effect (a
    table, then why each was decided so), what moved in their profiles, and the sentence."""
    table = Table(show_header=True, header_style="bold", width=console.width)
    for column in HEADERS[:-1]:
        table.add_column(column, overflow="fold")
    shown = [entry for entry in ordered(document) if entry["verdict"] in SHOWN_IN_FULL]
    for entry in shown:
        row = cells(entry)[:-1]
        row[1] = styled((row[1], STYLE.get(entry["verdict"], "")))
        table.add_row(*row)
    if shown:
        console.print(table)
    for entry in shown:
        console.print(f"{entry['key']}: {entry.get('why') or ''}", soft_wrap=True)
    for line in moved_lines(document):
        console.print(line, soft_wrap=True)
    console.print(summary_sentence(document), soft_wrap=True)
    steadiness = steadiness_line(document)
    if steadiness:
        console.print(steadiness + ".", soft_wrap=True)


# -- markdown ----------------------------------------------------------------------------------------
def _md(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


LEGEND = ("Legend: a test is screened by counts (the server under callgrind, 2-3 runs per side, "
          "docs/measure-instructions.md) unless counts cannot see its effect; a screen that is not *no change*, "
          "and every test counts cannot see, is measured by time (interleaved, adaptive as `redline compare`) and "
          "time decides. A change is claimed only by time and only when it survives Benjamini–Hochberg over every "
          "timed decision of the catalogue; *no change* by counts means every counted metric lies inside ±τ "
          "(for a pipelined test, the server's reads and writes per request too). "
          "*not measured*: the gate stopped (budget, interrupt) before the test was decided. Details: docs/gate.md.")


def gate_markdown(document: dict) -> str:
    entries, steadiness = ordered(document), steadiness_line(document)
    lines = [f"**redline gate**: {summary_sentence(document)}", "", sides_line(document) + ".", "",
             phases_line(document) + ".", "", *([steadiness + ".", ""] if steadiness else []),
             "| " + " | ".join(HEADERS) + " |", "|---|---|---|---:|---|---|---|"]
    for entry in entries:
        if entry["verdict"] in SHOWN_IN_FULL:
            row = [_md(c) for c in cells(entry)]
            row[1] = f"**{row[1]}**"
            lines.append("| " + " | ".join(row) + " |")
    moved = moved_lines(document)
    if moved:
        lines += ["", "Where the counted profiles moved (self share of instructions, baseline → comparison):", ""]
        lines += [f"- {_md(line)}" for line in moved]
    lines += ["", LEGEND, "", "<details><summary>Every test</summary>", "",
              "| " + " | ".join(HEADERS) + " |", "|---|---|---|---:|---|---|---|"]
    lines += ["| " + " | ".join(_md(c) for c in cells(e)) + " |" for e in entries]
    lines += ["", "</details>", ""]
    if document.get("broken"):
        lines += ["<details><summary>Broken suites, left out</summary>", ""]
        lines += [f"- `{_md(b['location'])}`: {_md(b['message'])}" for b in document["broken"]]
        lines += ["", "</details>", ""]
    return "\n".join(lines)
