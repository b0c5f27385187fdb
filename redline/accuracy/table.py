"""The accuracy table and its scores as markdown (docs/accuracy.md holds it between two markers, which
`redline accuracy --markdown FILE` replaces) and as terminal lines."""

from __future__ import annotations

import re
from pathlib import Path

from redline.accuracy.scoring import (ABOVE, BELOW, FALSE_VERDICT, MEASURED, NO_NUMBER, RIGHT, WITHIN, WRONG, Row,
                                      Scores, Tally)

BEGIN, END = "<!-- accuracy-table:begin -->", "<!-- accuracy-table:end -->"
SECTIONS = (("Improvements and regressions", lambda r: r.is_change and not r.weak and not r.ranged),
            ("Ranges, bisected", lambda r: r.ranged and not r.weak),
            ("Controls", lambda r: r.kind == "control"),
            ("Weak entries (scored apart)", lambda r: r.weak))
STATUS_MARK = {"refused": "not run here", "pending": "pending", "failed": "failed"}


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:+.1f}%"


def measured_text(row: Row) -> str:
    if row.status != MEASURED:
        return STATUS_MARK[row.status]
    if row.delta_pct is None:
        return "–"
    interval = (f" [{_pct(row.ci_low_pct)}, {_pct(row.ci_high_pct)}]"
                if row.ci_low_pct is not None and row.ci_high_pct is not None else "")
    return f"{_pct(row.delta_pct)}{interval}"


def band_text(row: Row) -> str:
    if row.band in (WITHIN, BELOW, ABOVE):
        return f"{row.band} ({row.speed:.3f}×)" if row.speed else row.band
    return row.band or ("–" if row.status == MEASURED else "")


def _cell(text) -> str:
    return str(text if text is not None else "").replace("|", "\\|").replace("\n", " ")


def markdown_rows(rows: list[Row]) -> list[str]:
    lines = []
    for title, belongs in SECTIONS:
        chosen = [r for r in rows if belongs(r)]
        if not chosen:
            continue
        lines += ["", f"### {title}", "",
                  "| entry | kind | way | claim | measured Δ [interval] | test | verdict | sign | band | culprit | why / note |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in chosen:
            way = r.measure + ("" if r.primary else " (extra)")
            culprit = f"{r.culprit} {r.culprit_sha[:12]}" if r.culprit and r.culprit_sha else r.culprit or ""
            verdict = (r.verdict or "").replace("_", " ")
            lines.append(f"| {_cell(r.name)} | {r.kind} | {way} | {_cell(r.claim)} | {measured_text(r)} | "
                         f"{_cell(r.test)} | {verdict} | {r.sign or ''} | {band_text(r)} | {_cell(culprit)} | "
                         f"{_cell(r.reason if r.status != MEASURED else r.why)} |")
    return lines


def _share(part: int, whole: int) -> str:
    return f"{part}/{whole} ({100 * part / whole:.0f}%)" if whole else "0/0"


def _tally_row(name: str, tally: Tally) -> str:
    return (f"| {name} | {tally.measured} | {_share(tally.right, tally.measured)} | {tally.wrong} | {tally.missed} | "
            f"{_share(tally.within, tally.banded)} | {tally.not_measured} |")


def _target(value: bool | None) -> str:
    return "not measured yet" if value is None else "met" if value else "**not met**"


def markdown_scores(scores: Scores) -> list[str]:
    t = scores.targets
    share = scores.strong.found_share
    return ["| entries (primary way) | measured | found, right sign | wrong sign | missed | within the claim's band "
            "(of those found, with a number) | not measured (pending, refused, failed) |",
            "|---|---:|---:|---:|---:|---:|---:|",
            _tally_row("improvements and regressions, strong", scores.strong),
            _tally_row("improvements and regressions, weak", scores.weak), "",
            f"Controls: {scores.controls_measured} measured, {scores.false_verdicts} with a verdict of change "
            f"({scores.controls_not_measured} not measured). Ranges: {scores.ranges_bisected} bisected, "
            f"{scores.culprits_right} named a culprit the maintainers named ({scores.ranges_not_measured} not measured).",
            "",
            "Targets of issue #32 (strong entries): "
            f"≥90% found with the right sign: {_target(t['found_90'])}"
            + (f" ({100 * share:.0f}%)" if share is not None else "")
            + f"; none with the wrong sign: {_target(t['none_wrong'])}; no verdict of change on a control: "
            f"{_target(t['controls_silent'])}; every bisected range names a maintainer's culprit: "
            f"{_target(t['culprits_right'])}."]


def headline(scores: Scores) -> str:
    """One line for the README: the strong entries' found share, wrong signs, control verdicts, culprits."""
    s = scores.strong
    return (f"{_share(s.right, s.measured)} strong changes found with the right sign, {s.wrong} wrong; "
            f"{scores.false_verdicts} of {scores.controls_measured} controls with a verdict of change; "
            f"{scores.culprits_right} of {scores.ranges_bisected} bisected ranges named the maintainers' culprit")


def markdown(rows: list[Row], scores: Scores, *, machines: list[dict], command: str) -> str:
    measured = sum(r.status == MEASURED for r in rows if r.primary)
    primary = sum(r.primary for r in rows)
    lines = [BEGIN, "", f"Measured: {measured} of {primary} entries (primary way); every other row says whether it is "
             "pending, refused here (with the reason) or failed.", "",
             f"Reproduce (resumes where the store stopped): `{command}`", "", *machine_lines(machines), "",
             "#### Scores", "", *markdown_scores(scores), *markdown_rows(rows), "", END]
    return "\n".join(lines) + "\n"


def machine_lines(machines: list[dict]) -> list[str]:
    if not machines:
        return ["Machine: nothing measured yet."]
    models = sorted({m.get("cpu_model") or "?" for m in machines})
    cores = sorted({str(m.get("cores")) for m in machines})
    kernels = sorted({m.get("kernel") or "?" for m in machines})
    loads = [m.get("load_avg", [None])[0] for m in machines if m.get("load_avg")]
    load = f"; 1-minute load average {min(loads):.1f}–{max(loads):.1f} when measurements started" if loads else ""
    return [f"Machine: {', '.join(models)}, {'/'.join(cores)} cores, Linux {', '.join(kernels)}{load} "
            f"({len(machines)} measurements; every session stores its machine facts)."]


def write_markdown(path: Path, text: str) -> None:
    """Replace the table between the markers of `path` if it has them, else write `text` as the file."""
    if path.exists():
        old = path.read_text()
        pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END) + r"\n?", re.S)
        if pattern.search(old):
            path.write_text(pattern.sub(lambda _: text, old, count=1))
            return
    path.write_text(text)


def terminal_lines(rows: list[Row], scores: Scores) -> list[str]:
    lines = []
    for r in rows:
        mark = {RIGHT: "✓", WRONG: "✗", FALSE_VERDICT: "✗"}.get(r.sign or "", "·")
        extra = f" band {band_text(r)}" if r.band and r.band != NO_NUMBER else ""
        culprit = f" culprit {r.culprit}" if r.culprit else ""
        why = r.reason if r.status != MEASURED else r.why
        lines.append(f"{mark} {r.name} ({r.kind}{', weak' if r.weak else ''}, {r.measure}): {measured_text(r)} "
                     f"{(r.verdict or '').replace('_', ' ')} {r.sign or ''}{extra}{culprit}"
                     + (f" — {why}" if why else ""))
    return lines + ["", headline(scores)]
