"""A stored session as the terminal shows it when the command ends: `render(session) -> str`, the
same signature as every other output (redline.output.FORMATS). run: the results table and the
profiles; compare: the verdict table, the names it shortened, the summary and what moved in the
profiles; calibrate: each test's noise floor; bisect: the bisection's report; gate: its verdicts
(redline.output.gate_report)."""

from __future__ import annotations

from redline.core import terminal
from redline.output import verdicts
from redline.output.bisect_report import report_lines
from redline.output.markdown import sides_sentence
from redline.output.tables import noise_floor_table, print_profiles, print_results
from redline.store.session import SessionDocument
from redline.system.steadiness import summarize


def render(session: SessionDocument) -> str:
    """The text (styled as the terminal takes it) that the session's command prints at its end."""
    console = terminal.console()          # the terminal's width and colours; output captured
    with console.capture() as captured:
        _show(console, session)
    return captured.get()


def _show(console, session: SessionDocument) -> None:
    if session.kind == "gate" and "gate" in session.documents:
        from redline.output.gate_report import print_gate
        print_gate(console, session.documents["gate"])
    elif session.kind == "compare" or session.comparisons:
        _comparisons(console, session)
    elif session.kind == "calibrate":
        floors = session.documents.get("noise_floors") or {}
        shown = list(dict.fromkeys(metric for by_metric in floors.values() for metric in by_metric))
        console.print(noise_floor_table(floors, shown))
    elif session.bisection:
        for line in report_lines(session.bisection):
            console.print(line, soft_wrap=True)
    else:
        print_results(console, session.measured)
        print_profiles(console, session.profiled)


def _comparisons(console, session: SessionDocument) -> None:
    comparisons = session.comparisons
    if not comparisons and session.kind == "compare" and session.status != "finished":
        if session.measured:
            print_results(console, session.measured)
        console.print(f"compare {session.session_id} was {session.status} before its verdicts: "
                      f"`redline compare --resume {session.session_id}` (with this --store) measures what did not "
                      "end and judges every test", soft_wrap=True)
        return
    console.print(verdicts.terminal_table(comparisons, width=console.width))
    for line in verdicts.name_legend(comparisons, width=console.width):
        console.print(line)
    console.print(verdicts.summary_sentence(comparisons, len({r.key for r in session.measured})))
    steadiness = summarize(session.measured)
    if steadiness:
        console.print(steadiness.sentence() + ".", soft_wrap=True)
    if session.kind == "compare":
        console.print(sides_sentence(session.side_label("baseline") or "?", session.side_label("comparison") or "?",
                                     quote=str, runs=session.measured), soft_wrap=True)
    for line in verdicts.profile_lines(comparisons):
        console.print(line)
