"""The HTML page of a catalogue gate: one page, offline, every test once sorted by effect with its
evidence, and the differential flame graphs of the tests whose counts moved."""

from __future__ import annotations

from redline.analysis.gate import NOT_MEASURED, SKIPPED, TestVerdict, by_effect
from redline.analysis.stats import Verdict
from redline.output.gate_report import (SHOWN_IN_FULL, WORDS, counted_headline, evidence, phases_line, ratio_words,
                                        sides_line, skipped_groups, summary_sentence)
from redline.output.html.page import Page, facts_table, table, text
from redline.profile.compare import describe_move

CSS_CLASS = {Verdict.REGRESSION: "regression", Verdict.IMPROVEMENT: "improvement", Verdict.INCONCLUSIVE: "inconclusive",
             NOT_MEASURED: "inconclusive", Verdict.NO_CHANGE: "no_change", SKIPPED: "no_change"}


def _row(v: TestVerdict) -> list[str]:
    timed = v.timed.as_json() if v.timed else None
    word = WORDS.get(v.verdict, v.verdict)
    return [text(v.test), f'<span class="verdict-{CSS_CLASS.get(v.verdict, "")}">{text(word)}</span>', text(v.decided_by or "–"),
            text(ratio_words(timed if v.decided_by == "time" else counted_headline(v)) or "–"),
            text(evidence(counted_headline(v))), text(evidence(timed)), text(v.why)]


HEADERS = ["test", "verdict", "decided by", "effect", "counted Δ (run range)", "timed Δ (95% CI)", "why"]


def gate_page(verdicts: list[TestVerdict], document: dict) -> Page:
    page = Page(f"redline gate · session {document.get('session_id')}",
                subtitle=[text(summary_sentence(verdicts, document)), text(sides_line(document)),
                          f"<code>{text(' '.join(document.get('argv') or []))}</code>"])
    settings = document.get("settings") or {}
    page.section("summary", "Summary", facts_table([
        ("time", phases_line(document)),
        ("counted screen", f"{settings.get('counted_runs')} runs per side, up to {settings.get('counted_max_runs')} "
                           "while not 'no change' (server under callgrind)"),
        ("timed confirmation", f"{settings.get('timed_runs')} runs per side, up to {settings.get('timed_max_runs')} while "
                               f"undecided; {settings.get('duration_s')} s measured after {settings.get('warmup_s')} s "
                               f"warm-up; decided on {settings.get('metric')}"),
        ("dataset scale", settings.get("scale") or "the suites' own"),
        ("resumes session", document.get("resumes")),
        ("budget", document.get("budget_s")),
    ]))
    ordered = by_effect(verdicts)
    shown = [v for v in ordered if v.verdict in SHOWN_IN_FULL]
    page.section("verdicts", "Changes and undecided tests, by effect",
                 table(HEADERS, [_row(v) for v in shown]) if shown else "<p>None: every test was decided "
                                                                         "'no change' or skipped.</p>")
    profiled = [v for v in ordered if v.diff_flamegraph or v.moved_symbols]
    if profiled:
        body = ""
        for v in profiled:
            moved = "; ".join(describe_move(m) for m in (v.moved_symbols or [])[:5])
            body += f"<h3>{text(v.test)}</h3><p>{text(moved)}</p>"
            body += page.flame_graph(v.diff_flamegraph, f"{v.test}: counted profile, comparison against baseline")
        page.section("profiles", "Where the counts moved", body)
    same = [v for v in ordered if v.verdict == Verdict.NO_CHANGE]
    page.section("no-change", f"No change ({len(same)})",
                 f"<details><summary>{len(same)} tests</summary>{table(HEADERS, [_row(v) for v in same])}</details>")
    groups = skipped_groups(verdicts)
    if groups:
        page.section("skipped", "Skipped (this machine or server cannot run them)", table(
            ["reason", "tests"], [[text(reason), text(", ".join(tests))] for reason, tests in groups]))
    broken = document.get("broken") or []
    if broken:
        page.section("broken", "Broken suites, left out", table(
            ["where", "what"], [[text(b["location"]), text(b["message"])] for b in broken]))
    return page
