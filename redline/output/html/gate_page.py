"""The HTML page of a catalogue gate, from its stored document: one page, offline, every test once
sorted by effect with its evidence, and the differential flame graphs of the tests whose counts
moved."""

from __future__ import annotations

from redline.output.gate_report import (HEADERS, NO_CHANGE, NOT_MEASURED, SHOWN_IN_FULL, SKIPPED, cells, ordered,
                                        phases_line, sides_line, skipped_groups, steadiness_line,
                                        summary_sentence)
from redline.output.html.page import Page, facts_table, table, text
from redline.profile.compare import describe_move


def _row(entry: dict) -> list[str]:
    row = [text(c) for c in cells(entry)]
    css = {NOT_MEASURED: "inconclusive", SKIPPED: "no_change"}.get(entry["verdict"], entry["verdict"])
    row[1] = f'<span class="verdict-{text(css)}">{row[1]}</span>'
    return row


def gate_page(document: dict) -> Page:
    page = Page(f"redline gate · session {document.get('session_id')}",
                subtitle=[text(summary_sentence(document)), text(sides_line(document)),
                          f"<code>{text(' '.join(document.get('argv') or []))}</code>"])
    settings = document.get("settings") or {}
    page.section("summary", "Summary", facts_table([
        ("time", phases_line(document)),
        ("steadiness", steadiness_line(document)),
        ("counted screen", f"{settings.get('counted_runs')} runs per side, up to {settings.get('counted_max_runs')} "
                           "while not 'no change' (server under callgrind)"),
        ("timed confirmation", f"{settings.get('timed_runs')} runs per side, up to {settings.get('timed_max_runs')} "
                               f"while undecided; {settings.get('duration_s')} s measured after "
                               f"{settings.get('warmup_s')} s warm-up; decided on {settings.get('metric')}"),
        ("dataset scale", settings.get("scale") or "the suites' own"),
        ("resumes session", document.get("resumes")),
        ("budget (s)", document.get("budget_s")),
    ]))
    entries = ordered(document)
    shown = [e for e in entries if e["verdict"] in SHOWN_IN_FULL]
    page.section("verdicts", "Changes and undecided tests, by effect",
                 table(HEADERS, [_row(e) for e in shown]) if shown
                 else "<p>None: every test was decided 'no change' or skipped.</p>")
    profiled = [e for e in entries if e.get("diff_flamegraph") or e.get("moved_symbols")]
    if profiled:
        body = ""
        for e in profiled:
            moved = "; ".join(describe_move(m) for m in (e.get("moved_symbols") or [])[:5])
            body += f"<h3>{text(e['key'])}</h3><p>{text(moved)}</p>"
            body += page.flame_graph(e.get("diff_flamegraph"), f"{e['key']}: counted profile, comparison against baseline")
        page.section("profiles", "Where the counts moved", body)
    same = [e for e in entries if e["verdict"] == NO_CHANGE]
    page.section("no-change", f"No change ({len(same)})",
                 f"<details><summary>{len(same)} tests</summary>{table(HEADERS, [_row(e) for e in same])}</details>")
    groups = skipped_groups(document)
    if groups:
        page.section("skipped", "Skipped (this machine or server cannot run them)", table(
            ["reason", "tests"], [[text(reason), text(", ".join(keys))] for reason, keys in groups]))
    if document.get("broken"):
        page.section("broken", "Broken suites, left out", table(
            ["where", "what"], [[text(b["location"]), text(b["message"])] for b in document["broken"]]))
    return page
